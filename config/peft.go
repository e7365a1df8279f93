package config

// PEFT / transformers vocabulary. A LoraConfig user writes r, lora_alpha, target_modules
// and lora_dropout; dgtune reads them as its own keys, in a file (at the top level or
// inside lora_parameters) and as flags (--r, --lora-alpha, --target-modules,
// --lora-dropout), and says in one line how it read them:
//
//	r              → lora_parameters.rank
//	lora_alpha     → lora_parameters.scale = lora_alpha / rank (PEFT's scaling; rank is the run's)
//	target_modules → lora_parameters.keys ("q_proj" is the key ending in ".q_proj";
//	                 "all-linear" is every linear of a layer that LoRA can adapt)
//	lora_dropout   → lora_parameters.dropout
//
// An alias and its key given in the same place (the file, or the flags) must agree. An
// alias has the precedence of where it is written: a file's r loses to
// DGTUNE_LORA_PARAMETERS_RANK or --lora-parameters.rank, as the file's rank would.

import (
	"fmt"
	"math"
	"os"
	"reflect"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"

	dg "github.com/dgtune/dgtune/model/diffusiongemma"
)

// peftAlias is one PEFT name and the key it stands for.
type peftAlias struct {
	alias string // as in PEFT's LoraConfig
	key   string
	typ   reflect.Type
	help  string
}

var peftAliases = []peftAlias{
	{"r", "lora_parameters.rank", reflect.TypeFor[int](), "PEFT's name for lora_parameters.rank"},
	{"lora_alpha", "lora_parameters.scale", reflect.TypeFor[float64](), "PEFT's lora_alpha: sets lora_parameters.scale = lora_alpha / rank"},
	{"target_modules", "lora_parameters.keys", reflect.TypeFor[[]string](), "PEFT's target_modules (q_proj, v_proj, ... or all-linear): sets lora_parameters.keys"},
	{"lora_dropout", "lora_parameters.dropout", reflect.TypeFor[float64](), "PEFT's name for lora_parameters.dropout"},
}

const aliasAlpha = "lora_alpha"

// aliasUse is one alias as given, and what it became.
type aliasUse struct {
	peftAlias
	raw    any    // the value as given
	value  any    // the key's value (for lora_alpha, alpha itself until the rank is known)
	where  string // the file's path, or "" for a flag
	inFile bool
}

func (u aliasUse) spelled() string {
	if u.inFile {
		return fmt.Sprintf("%s: %s %s", u.where, u.alias, showValue(u.raw))
	}
	return fmt.Sprintf("--%s %s", FlagName(u.alias), showValue(u.raw))
}

// peftUses are the aliases of one Load.
type peftUses struct {
	uses      []aliasUse
	fileScale bool // the file also gives lora_parameters.scale
}

// fromPEFT rewrites a config file's PEFT names into dgtune's keys (lora_alpha is kept
// aside until the rank is known). A file that does not parse is returned unchanged.
func fromPEFT(path string, raw []byte, p *peftUses) ([]byte, error) {
	var doc map[string]any
	if yaml.Unmarshal(raw, &doc) != nil || doc == nil {
		return raw, nil
	}
	lp, _ := doc["lora_parameters"].(map[string]any)
	changed := false
	for _, a := range peftAliases {
		var found []any
		if v, ok := doc[a.alias]; ok {
			found = append(found, v)
			delete(doc, a.alias)
			changed = true
		}
		if v, ok := lp[a.alias]; ok {
			found = append(found, v)
			delete(lp, a.alias)
			changed = true
		}
		if len(found) == 0 || found[0] == nil {
			continue
		}
		if len(found) == 2 && !sameValue(found[0], found[1]) {
			return nil, fmt.Errorf("config: %s: %s (%s) and lora_parameters.%s (%s) disagree; keep one", path, a.alias, showValue(found[0]), a.alias, showValue(found[1]))
		}
		u := aliasUse{peftAlias: a, raw: found[0], where: path, inFile: true}
		var err error
		if u.value, err = aliasValue(a, found[0]); err != nil {
			return nil, fmt.Errorf("config: %s: %w", path, err)
		}
		leaf := strings.TrimPrefix(a.key, "lora_parameters.")
		if a.alias == aliasAlpha {
			_, p.fileScale = lp[leaf]
		} else {
			if lp == nil {
				lp = map[string]any{}
				doc["lora_parameters"] = lp
			}
			if given, ok := lp[leaf]; ok && !sameValue(normalise(given), u.value) {
				return nil, fmt.Errorf("config: %s: %s %s and %s %s disagree; keep one", path, a.alias, showValue(u.raw), a.key, showValue(given))
			}
			lp[leaf] = u.value
		}
		p.uses = append(p.uses, u)
	}
	if !changed {
		return raw, nil
	}
	out, err := yaml.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("config: %s: %w", path, err)
	}
	return out, nil
}

// fromFlags reads the alias flags that were set; an alias flag and its key's flag must
// agree. The values are returned for Load to set at the flags' precedence.
func (p *peftUses) fromFlags(fs *pflag.FlagSet) (map[string]any, error) {
	out := map[string]any{}
	if fs == nil {
		return out, nil
	}
	for _, a := range peftAliases {
		f := fs.Lookup(FlagName(a.alias))
		if f == nil || !f.Changed {
			continue
		}
		var raw any = f.Value.String()
		if sv, ok := f.Value.(pflag.SliceValue); ok {
			raw = sv.GetSlice()
		}
		u := aliasUse{peftAlias: a, raw: raw}
		var err error
		if u.value, err = aliasValue(a, raw); err != nil {
			return nil, fmt.Errorf("config: --%s: %w", f.Name, err)
		}
		if kf := fs.Lookup(FlagName(a.key)); kf != nil && kf.Changed && a.alias != aliasAlpha {
			var given any = kf.Value.String()
			if sv, ok := kf.Value.(pflag.SliceValue); ok {
				given = stringsToAny(sv.GetSlice())
			}
			if !sameValue(normalise(given), u.value) {
				return nil, fmt.Errorf("config: --%s %s and --%s %s disagree; keep one", f.Name, showValue(raw), kf.Name, kf.Value.String())
			}
		}
		if a.alias != aliasAlpha {
			out[a.key] = u.value
		}
		// Replace a file's use of the same alias: the flag wins, and the note says so once.
		p.uses = slices.DeleteFunc(p.uses, func(x aliasUse) bool { return x.alias == a.alias })
		p.uses = append(p.uses, u)
	}
	return out, nil
}

// resolve sets the scale from lora_alpha once the rank is final and returns the note
// saying how every alias was read ("" when none was given).
func (p *peftUses) resolve(c *Config, fs *pflag.FlagSet) (string, error) {
	if len(p.uses) == 0 {
		return "", nil
	}
	var parts []string
	for _, u := range p.uses {
		if u.alias != aliasAlpha {
			if got := Get(*c, u.key); !sameValue(normalise(got), u.value) {
				flag := fs != nil && fs.Lookup(FlagName(u.key)) != nil && fs.Lookup(FlagName(u.key)).Changed
				parts = append(parts, fmt.Sprintf("%s not used: %s sets %s %s", u.spelled(), sourceOf(flag, u.key), u.key, showValue(got)))
				continue
			}
			parts = append(parts, fmt.Sprintf("%s → %s %s", u.spelled(), u.key, showValue(u.value)))
			continue
		}
		alpha := u.value.(float64)
		rank := c.LoRAParameters.Rank
		if rank < 1 {
			return "", nil // Validate reports the rank
		}
		want := alpha / float64(rank)
		scaleFlag := fs != nil && fs.Lookup(FlagName(u.key)) != nil && fs.Lookup(FlagName(u.key)).Changed
		_, scaleEnv := os.LookupEnv(EnvName(u.key))
		scaleEnv = scaleEnv && strings.TrimSpace(os.Getenv(EnvName(u.key))) != ""
		sameLevel := (u.inFile && p.fileScale) || (!u.inFile && scaleFlag)
		higher := u.inFile && (scaleFlag || scaleEnv)
		switch {
		case sameLevel && !higher && math.Abs(c.LoRAParameters.Scale-want) > 1e-12*math.Abs(want):
			where := "--" + FlagName(u.key)
			if u.inFile {
				where = u.where + ": " + u.key
			}
			return "", fmt.Errorf("config: %s (scale %g at rank %d) and %s %g disagree; keep one", u.spelled(), want, rank, where, c.LoRAParameters.Scale)
		case higher:
			parts = append(parts, fmt.Sprintf("%s not used: %s sets %s %g", u.spelled(), sourceOf(scaleFlag, u.key), u.key, c.LoRAParameters.Scale))
		default:
			c.LoRAParameters.Scale = want
			parts = append(parts, fmt.Sprintf("%s → %s %g (lora_alpha / rank %d)", u.spelled(), u.key, want, rank))
		}
	}
	return "PEFT names read as dgtune's: " + strings.Join(parts, "; "), nil
}

func sourceOf(flag bool, key string) string {
	if flag {
		return "--" + FlagName(key)
	}
	return EnvName(key)
}

// aliasValue converts an alias's value into its key's.
func aliasValue(a peftAlias, v any) (any, error) {
	switch a.typ.Kind() {
	case reflect.Int:
		f, ok := numberOf(v)
		if !ok || f != math.Trunc(f) {
			return nil, fmt.Errorf("%s %s: want a whole number", a.alias, showValue(v))
		}
		return int(f), nil
	case reflect.Float64:
		f, ok := numberOf(v)
		if !ok {
			return nil, fmt.Errorf("%s %s: want a number", a.alias, showValue(v))
		}
		return f, nil
	}
	keys, err := peftTargetKeys(v)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", a.alias, showValue(v), err)
	}
	return stringsToAny(keys), nil
}

// peftTargetKeys maps PEFT target_modules onto a layer's LoRA keys, as PEFT matches a
// name: the whole key, or its last dotted parts ("q_proj" is "self_attn.q_proj").
// "all-linear" is every key. A regex string (PEFT full-matches it against module paths)
// is refused: a list says the same thing plainly here.
func peftTargetKeys(v any) ([]string, error) {
	var names []string
	switch x := v.(type) {
	case string:
		if strings.TrimSpace(x) == "all-linear" {
			return dg.LoRAKeys(), nil
		}
		if strings.ContainsAny(x, `*+?()[]|\^$`) {
			return nil, fmt.Errorf("a regex is not read here; list the modules (q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj, router.proj) or write all-linear")
		}
		names = strings.Split(x, ",")
	case []string:
		names = x
	case []any:
		for _, it := range x {
			s, ok := it.(string)
			if !ok {
				return nil, fmt.Errorf("want a list of module names")
			}
			names = append(names, s)
		}
	default:
		return nil, fmt.Errorf("want a list of module names")
	}
	var out []string
	for _, n := range names {
		n = strings.TrimSpace(n)
		if n == "all-linear" {
			return dg.LoRAKeys(), nil
		}
		found := false
		for _, k := range dg.LoRAKeys() {
			if k == n || strings.HasSuffix(k, "."+n) {
				found = true
				if !slices.Contains(out, k) {
					out = append(out, k)
				}
			}
		}
		if !found {
			return nil, fmt.Errorf("%q names no linear of a DiffusionGemma layer (want some of %s, or all-linear)", n, strings.Join(shortKeys(), ", "))
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("names no module")
	}
	return out, nil
}

// shortKeys are the LoRA keys as PEFT users name them (the last part).
func shortKeys() []string {
	var out []string
	for _, k := range dg.LoRAKeys() {
		if k == "router.proj" {
			out = append(out, k) // "proj" alone would be ambiguous
			continue
		}
		out = append(out, k[strings.LastIndex(k, ".")+1:])
	}
	return out
}

// numberOf reads an int, a float or a string holding a number.
func numberOf(v any) (float64, bool) {
	if f, ok := toFloat(v); ok {
		return f, true
	}
	if s, ok := v.(string); ok {
		n := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s}
		return yamlNumber(n)
	}
	return 0, false
}

// normalise turns a key's value as a file or flag gives it into aliasValue's form, for
// comparing (a rank "8" from a flag, lists of strings as []any).
func normalise(v any) any {
	switch x := v.(type) {
	case string:
		if f, ok := numberOf(x); ok {
			return f
		}
		return x
	case []string:
		return stringsToAny(x)
	}
	return v
}

func stringsToAny(s []string) []any {
	out := make([]any, len(s))
	for i, x := range s {
		out[i] = x
	}
	return out
}

// showValue prints a value as a user would write it.
func showValue(v any) string {
	switch x := v.(type) {
	case []any:
		parts := make([]string, len(x))
		for i, it := range x {
			parts[i] = fmt.Sprint(it)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case []string:
		return "[" + strings.Join(x, ", ") + "]"
	case string:
		return x
	}
	return fmt.Sprint(v)
}
