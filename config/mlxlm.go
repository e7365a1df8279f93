package config

// mlx-lm compatibility. A config written for `mlx_lm.lora` (the keys of mlx_lm/lora.py's
// CONFIG_DEFAULTS and flags, mlx_lm/LORA.md and mlx_lm/examples/lora_config.yaml) loads
// as written. Each of its keys is one of:
//
//   - the same key in dgtune (model, data, seed, fine_tune_type, num_layers, batch_size,
//     iters, val_batches, learning_rate, steps_per_report, steps_per_eval, adapter_path,
//     save_every, grad_checkpoint, grad_accumulation_steps, lr_schedule, lora_parameters,
//     optimizer, the *_feature names);
//   - honoured with a meaning of its own here: train, test, test_batches,
//     resume_adapter_file, max_seq_length, mask_prompt (fields of Config, resolved by
//     resolveMLXLM) and optimizer_config.<optimizer>.* (folded onto the flat
//     optimizer_config keys by fromMLXLM and apply);
//   - accepted with a note saying why it has no effect (inertKeys).
//
// Keys in neither vocabulary stay errors naming the nearest valid key (checkKeys).

import (
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/viper"
	"gopkg.in/yaml.v3"
)

// inertKeys are mlx-lm keys that cannot mean anything here, with the reason.
var inertKeys = map[string]string{
	"report_to":             "dgtune reports to no logging service (wandb, swanlab); metrics go to metrics.jsonl in adapter_path",
	"project_name":          "it names a report_to project, and dgtune reports to no logging service",
	"hf_dataset":            "dgtune downloads nothing from the Hugging Face Hub; it reads train/valid/test .jsonl or .parquet from the data directory",
	"trust_remote_code":     "dgtune runs no code that comes with a checkpoint; DiffusionGemma and its tokenizer are built in",
	"clear_cache_threshold": "dgtune releases each step's arrays when the step ends and does not trim MLX's allocator cache by size",
	"config":                "a config file cannot name another config file (mlx-lm ignores it there too)",
}

// optimizerArgs are the keyword arguments of the mlx.optimizers classes dgtune
// implements, as mlx-lm passes them from optimizer_config.<name> (learning_rate is
// mlx-lm's own argument).
var optimizerArgs = map[string][]string{
	"adam":  {"betas", "eps", "bias_correction"},
	"adamw": {"betas", "eps", "weight_decay", "bias_correction"},
	"sgd":   {"momentum", "weight_decay", "dampening", "nesterov"},
}

// otherOptimizers are the remaining mlx.optimizers names: a block for one of them is
// never read (as in mlx-lm, where only the chosen optimizer's block is), and choosing
// one is an error of Validate.
var otherOptimizers = []string{"adafactor", "muon", "lion", "rmsprop", "adagrad", "adadelta", "adamax"}

func isOptimizerName(n string) bool {
	_, ok := optimizerArgs[n]
	return ok || slices.Contains(otherOptimizers, n)
}

// mlxlmFile is what fromMLXLM took out of a config file, for the steps after the file
// is merged with the environment and flags.
type mlxlmFile struct {
	path   string
	blocks map[string]map[string]any // optimizer_config.<optimizer>
	flat   map[string]any            // optimizer_config.<key>, as written in the same file
	notes  []string
}

// fromMLXLM rewrites a config file's mlx-lm-only constructs away: inert keys are removed
// (a note for each that is set), optimizer_config.<optimizer> blocks are set aside for
// apply. A file that does not parse is returned unchanged, for checkKeys to report.
func fromMLXLM(path string, raw []byte) ([]byte, *mlxlmFile, error) {
	m := &mlxlmFile{path: path, blocks: map[string]map[string]any{}, flat: map[string]any{}}
	var doc map[string]any
	if yaml.Unmarshal(raw, &doc) != nil || doc == nil {
		return raw, m, nil
	}
	changed := false
	for _, k := range sortedKeys(inertKeys) {
		v, ok := doc[k]
		if !ok {
			continue
		}
		if isSet(v) {
			m.notes = append(m.notes, fmt.Sprintf("%s: %s: no effect: %s", path, k, inertKeys[k]))
		}
		delete(doc, k)
		changed = true
	}
	if oc, ok := doc["optimizer_config"].(map[string]any); ok {
		for _, k := range sortedKeys(oc) {
			v := oc[k]
			sub, isMap := v.(map[string]any)
			switch {
			case isOptimizerName(k) && (isMap || v == nil):
				m.blocks[k] = sub
				delete(oc, k)
				changed = true
			case isOptimizerName(k):
				return nil, nil, fmt.Errorf("config: %s: optimizer_config.%s must be a mapping of %s's arguments", path, k, k)
			case isMap:
				// A mapping under optimizer_config names an optimizer; no flat key is one.
				names := append(sortedKeys(optimizerArgs), otherOptimizers...)
				return nil, nil, fmt.Errorf("config: %s: optimizer_config.%s: unknown optimizer (did you mean %q?)", path, k, nearestOf(k, names))
			default:
				m.flat[k] = v
			}
		}
	}
	if !changed {
		return raw, m, nil
	}
	out, err := yaml.Marshal(doc)
	if err != nil {
		return nil, nil, fmt.Errorf("config: %s: %w", path, err)
	}
	return out, m, nil
}

// apply folds the block of the optimizer the merged settings choose onto the flat
// optimizer_config keys, at the file's level of precedence (a flag or DGTUNE_ variable
// for the same flat key still wins). Blocks of other optimizers are not read.
func (m *mlxlmFile) apply(v *viper.Viper) error {
	name := strings.ToLower(v.GetString("optimizer"))
	block := m.blocks[name]
	args, known := optimizerArgs[name]
	if len(block) == 0 || !known {
		return nil // an unknown optimizer is Validate's to report
	}
	merged := map[string]any{}
	var problems []string
	for _, k := range sortedKeys(block) {
		val := block[k]
		at := "optimizer_config." + name + "." + k
		switch {
		case k == "learning_rate":
			problems = append(problems, fmt.Sprintf("%s: set learning_rate (or lr_schedule) instead, as mlx-lm passes it separately", at))
		case !slices.Contains(args, k):
			problems = append(problems, fmt.Sprintf("unknown key %q: not an argument of MLX's %s (did you mean %q?)", at, name, at[:len(at)-len(k)]+nearestOf(k, args)))
		case k == "dampening":
			// MLX's SGD dampening; dgtune's SGD has none, which equals dampening 0.
			if f, ok := toFloat(val); !ok || f != 0 {
				problems = append(problems, fmt.Sprintf("%s %v: dgtune's SGD has no dampening (only 0)", at, val))
			}
		default:
			if flat, ok := m.flat[k]; ok && !sameValue(flat, val) {
				problems = append(problems, fmt.Sprintf("optimizer_config.%s (%v) and %s (%v) disagree; keep one", k, flat, at, val))
				continue
			}
			merged[k] = val
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("config: %s: %s", m.path, strings.Join(problems, "; "))
	}
	return v.MergeConfigMap(map[string]any{"optimizer_config": merged})
}

// resolveMLXLM checks and maps the mlx-lm keys that have a meaning of their own here,
// after the file, environment and flags are merged.
func (c *Config) resolveMLXLM(m *mlxlmFile) error {
	if m != nil {
		c.Notes = append(c.Notes, m.notes...)
	}
	var p []string
	bad := func(format string, args ...any) { p = append(p, fmt.Sprintf(format, args...)) }
	if !c.MaskPrompt {
		bad("mask_prompt: false: the denoising objective never scores the prompt (it is the encoder's context, not predicted), so it cannot be unmasked; remove mask_prompt or set it to true")
	}
	if !c.Train && !c.Test {
		bad("train: false and test: false: nothing to do (set test: true to evaluate only)")
	}
	if c.TestBatches == 0 || c.TestBatches < -1 {
		bad("test_batches %d: want -1 (whole test split) or a positive number", c.TestBatches)
	}
	switch {
	case c.MaxSeqLength < 0:
		bad("max_seq_length %d: must not be negative (0 = no cap)", c.MaxSeqLength)
	case c.MaxSeqLength > 0 && c.ChatTemplate == ChatTemplateNeMo:
		c.Notes = append(c.Notes, fmt.Sprintf("max_seq_length %d: prompt + target keep their first %d tokens (chat_template nemo: NeMo AutoModel's seq_length, as mlx-lm cuts a sequence's end)",
			c.MaxSeqLength, c.MaxSeqLength))
	case c.MaxSeqLength > 0 && c.MaxSeqLength <= c.MaxCanvas:
		bad("max_seq_length %d leaves no room for a prompt beside max_canvas %d: raise it or lower max_canvas", c.MaxSeqLength, c.MaxCanvas)
	case c.MaxSeqLength > 0:
		room := c.MaxSeqLength - c.MaxCanvas
		if c.MaxPrompt == 0 || c.MaxPrompt > room {
			c.MaxPrompt = room
		}
		c.Notes = append(c.Notes, fmt.Sprintf("max_seq_length %d: prompts keep their last %d tokens (max_prompt), completions their first %d (max_canvas)",
			c.MaxSeqLength, c.MaxPrompt, c.MaxCanvas))
	}
	if len(p) > 0 {
		return fmt.Errorf("config: %s", strings.Join(p, "; "))
	}
	return nil
}

// isSet reports whether a YAML value says anything: not null, false, zero or empty.
func isSet(v any) bool {
	if v == nil {
		return false
	}
	r := reflect.ValueOf(v)
	switch r.Kind() {
	case reflect.Map, reflect.Slice, reflect.String:
		return r.Len() > 0
	}
	return !r.IsZero()
}

// sameValue compares YAML values, numbers by value (0 and 0.0 agree).
func sameValue(a, b any) bool {
	fa, okA := toFloat(a)
	fb, okB := toFloat(b)
	if okA && okB {
		return fa == fb
	}
	return reflect.DeepEqual(a, b)
}

func toFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case int:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// nearestOf returns the name closest to s by edit distance (the first on ties).
func nearestOf(s string, names []string) string {
	best, bestD := "", 1<<30
	for _, n := range names {
		if d := editDistance(s, n); d < bestD {
			best, bestD = n, d
		}
	}
	return best
}
