package config

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"

	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"
	"gopkg.in/yaml.v3"
)

// EnvPrefix is the prefix of environment overrides (DGTUNE_LEARNING_RATE).
const EnvPrefix = "DGTUNE"

// key is one leaf setting.
type key struct {
	path  string // "lora_parameters.rank"
	help  string
	typ   reflect.Type
	value any // default
}

// keys walks Config's fields into leaf settings, in declaration order.
func keys() []key {
	var out []key
	var walk func(t reflect.Type, v reflect.Value, prefix string)
	walk = func(t reflect.Type, v reflect.Value, prefix string) {
		for i := range t.NumField() {
			f := t.Field(i)
			name := f.Tag.Get("mapstructure")
			if name == "" {
				continue
			}
			p := prefix + name
			if f.Type.Kind() == reflect.Struct {
				walk(f.Type, v.Field(i), p+".")
				continue
			}
			out = append(out, key{path: p, help: f.Tag.Get("help"), typ: f.Type, value: v.Field(i).Interface()})
		}
	}
	d := Defaults()
	walk(reflect.TypeOf(d), reflect.ValueOf(d), "")
	return out
}

// Keys lists every setting's dotted name.
func Keys() []string {
	var out []string
	for _, k := range keys() {
		out = append(out, k.path)
	}
	return out
}

// FlagName is the flag spelling of a key: '-' for '_'.
func FlagName(path string) string { return strings.ReplaceAll(path, "_", "-") }

// BindFlags defines one flag per key on fs, with the key's default and help.
func BindFlags(fs *pflag.FlagSet) {
	for _, k := range keys() {
		name := FlagName(k.path)
		switch v := k.value.(type) {
		case string:
			fs.String(name, v, k.help)
		case int:
			fs.Int(name, v, k.help)
		case uint64:
			fs.Uint64(name, v, k.help)
		case float64:
			fs.Float64(name, v, k.help)
		case bool:
			fs.Bool(name, v, k.help)
		case []string:
			fs.StringSlice(name, v, k.help)
		case []float64:
			fs.Float64Slice(name, v, k.help)
		default:
			panic(fmt.Sprintf("config: key %s has unsupported type %T", k.path, v))
		}
	}
	// PEFT's names (peft.go), without defaults: unset, the keys' own apply.
	for _, a := range peftAliases {
		name := FlagName(a.alias)
		switch a.typ.Kind() {
		case reflect.Int:
			fs.Int(name, 0, a.help)
		case reflect.Float64:
			fs.Float64(name, 0, a.help)
		default:
			fs.StringSlice(name, nil, a.help)
		}
	}
}

// Load resolves the configuration: defaults, then the YAML file at path (if not
// empty), then DGTUNE_* environment variables, then the flags of fs that were set.
func Load(path string, fs *pflag.FlagSet) (Config, error) {
	c, _, err := LoadInheriting(path, fs, Inherit{})
	return c, err
}

// LoadInheriting is Load with one more layer between the defaults and the file: inh's
// values (an adapter's recorded training settings, for eval). The report says which of
// them the result took and which the file, the environment or a flag overrode.
func LoadInheriting(path string, fs *pflag.FlagSet, inh Inherit) (Config, InheritReport, error) {
	c, v, err := load(path, fs, inh)
	if err != nil {
		return Config{}, InheritReport{}, err
	}
	return c, inh.report(c, v, path, fs), nil
}

func load(path string, fs *pflag.FlagSet, inh Inherit) (Config, *viper.Viper, error) {
	v := viper.New()
	for _, k := range keys() {
		v.SetDefault(k.path, k.value)
	}
	var mlxlm *mlxlmFile
	peft := &peftUses{}
	if path != "" {
		raw, err := os.ReadFile(path)
		if err != nil {
			return Config{}, nil, fmt.Errorf("config: %w", err)
		}
		if err := checkTypes(path, raw); err != nil {
			return Config{}, nil, err
		}
		if raw, mlxlm, err = fromMLXLM(path, raw); err != nil {
			return Config{}, nil, err
		}
		if raw, err = fromPEFT(path, raw, peft); err != nil {
			return Config{}, nil, err
		}
		if err := checkKeys(path, raw); err != nil {
			return Config{}, nil, err
		}
		v.SetConfigType("yaml")
		if err := v.ReadConfig(bytes.NewReader(raw)); err != nil {
			return Config{}, nil, fmt.Errorf("config: %s: %w", path, err)
		}
	}
	if err := checkEnv(os.Environ()); err != nil {
		return Config{}, nil, err
	}
	v.SetEnvPrefix(EnvPrefix)
	v.SetEnvKeyReplacer(strings.NewReplacer(".", "_"))
	v.AutomaticEnv()
	if fs != nil {
		for _, k := range keys() {
			if f := fs.Lookup(FlagName(k.path)); f != nil && f.Changed {
				if err := v.BindPFlag(k.path, f); err != nil {
					return Config{}, nil, fmt.Errorf("config: flag --%s: %w", f.Name, err)
				}
			}
		}
	}
	flagAliases, err := peft.fromFlags(fs)
	if err != nil {
		return Config{}, nil, err
	}
	for k, val := range flagAliases {
		v.Set(k, val)
	}
	if mlxlm != nil {
		if err := mlxlm.apply(v); err != nil {
			return Config{}, nil, err
		}
	}
	if err := applyRecipePreset(v); err != nil {
		return Config{}, nil, err
	}
	if err := applyObjectivePreset(v); err != nil {
		return Config{}, nil, err
	}
	// After the preset: the recorded values are already the preset's where it set them.
	for _, k := range sortedKeys(inh.Values) {
		v.SetDefault(k, inh.Values[k])
	}
	var c Config
	err = v.Unmarshal(&c, func(dc *mapstructure.DecoderConfig) {
		dc.ErrorUnused = false
		dc.WeaklyTypedInput = true
		dc.DecodeHook = mapstructure.ComposeDecodeHookFunc(
			mapstructure.StringToSliceHookFunc(","),
		)
	})
	if err != nil {
		return Config{}, nil, fmt.Errorf("config: %s", cleanDecodeError(err))
	}
	if err := c.resolveMLXLM(mlxlm); err != nil {
		return Config{}, nil, err
	}
	c.notePresets(given{v: v, path: path, fs: fs, flagKeys: flagAliases})
	if note, err := peft.resolve(&c, fs); err != nil {
		return Config{}, nil, err
	} else if note != "" {
		c.Notes = append(c.Notes, note)
	}
	if err := c.Validate(); err != nil {
		return Config{}, nil, err
	}
	return c, v, nil
}

// cleanDecodeError turns mapstructure's multi-line report into one line.
func cleanDecodeError(err error) string {
	s := err.Error()
	s = strings.ReplaceAll(s, "decoding failed due to the following error(s):\n\n", "")
	s = strings.ReplaceAll(s, "\n", "; ")
	return s
}

// checkKeys rejects unknown keys (naming the nearest known one) and reports YAML
// syntax errors with their line.
func checkKeys(path string, raw []byte) error {
	var doc map[string]any
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return parseError(path, raw, err)
	}
	known := map[string]bool{}
	sections := map[string]bool{}
	for _, k := range keys() {
		known[k.path] = true
		if i := strings.LastIndex(k.path, "."); i > 0 {
			sections[k.path[:i]] = true
		}
	}
	var problems []string
	var walk func(m map[string]any, prefix string)
	walk = func(m map[string]any, prefix string) {
		names := make([]string, 0, len(m))
		for n := range m {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			p := prefix + n
			if sections[p] {
				sub, ok := m[n].(map[string]any)
				if !ok {
					if m[n] != nil {
						problems = append(problems, fmt.Sprintf("%q must be a mapping", p))
					}
					continue
				}
				walk(sub, p+".")
				continue
			}
			if !known[p] {
				problems = append(problems, fmt.Sprintf("unknown key %q (did you mean %q?)", p, nearest(p, known)))
			}
		}
	}
	walk(doc, "")
	if len(problems) > 0 {
		return fmt.Errorf("config: %s: %s", path, strings.Join(problems, "; "))
	}
	return nil
}

// nearest returns the known key closest to p by edit distance.
func nearest(p string, known map[string]bool) string {
	best, bestD := "", 1<<30
	names := make([]string, 0, len(known))
	for k := range known {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if d := editDistance(p, k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// Validate checks values that no type can express.
func (c Config) Validate() error {
	var p []string
	bad := func(format string, args ...any) { p = append(p, fmt.Sprintf(format, args...)) }
	oneOf := func(name, v string, allowed ...string) {
		for _, a := range allowed {
			if v == a {
				return
			}
		}
		bad("%s %q: want one of %s", name, v, strings.Join(allowed, ", "))
	}
	oneOf("backend", c.Backend, "auto", "go", "mlx")
	oneOf("compute_dtype", c.ComputeDType, "float32", "bfloat16")
	if c.QuantizeOnLoad != 0 && c.QuantizeOnLoad != 4 && c.QuantizeOnLoad != 8 {
		bad("quantize_on_load %d: want 0 (off), 4 or 8", c.QuantizeOnLoad)
	}
	if c.MemoryLimitGB < 0 {
		bad("memory_limit_gb %g: must be 0 (the engine's default) or positive", c.MemoryLimitGB)
	}
	oneOf("fine_tune_type", c.FineTuneType, "lora", "full")
	oneOf("optimizer", c.Optimizer, "adamw", "adam", "sgd")
	oneOf("loss_positions", c.LossPositions, "corrupted", "all")
	oneOf("weighting", c.Weighting, "none", "inv_t")
	oneOf("eval.sampler", c.Eval.Sampler, "confidence", "entropy")
	c.validateObjective(bad)
	c.validateRecipe(bad)
	if c.Distributed != "" {
		oneOf("distributed", c.Distributed, "ring", "nccl", "mpi", "any")
	}
	if c.DistributedTimeout < 1 {
		bad("distributed_timeout %d: must be at least 1 second", c.DistributedTimeout)
	}
	if c.GradCheckpoint && c.FineTuneType == "full" {
		bad("grad_checkpoint: needs fine_tune_type lora (a checkpointed layer passes gradients only to LoRA arrays)")
	}
	if c.LoRAParameters.Rank < 1 {
		bad("lora_parameters.rank %d: must be at least 1", c.LoRAParameters.Rank)
	}
	if c.LoRAParameters.Dropout < 0 || c.LoRAParameters.Dropout >= 1 {
		bad("lora_parameters.dropout %g: must be in [0, 1)", c.LoRAParameters.Dropout)
	}
	if c.BatchSize < 1 {
		bad("batch_size %d: must be at least 1", c.BatchSize)
	}
	if c.Iters < 0 || c.Epochs < 0 {
		bad("iters %d and epochs %d must not be negative", c.Iters, c.Epochs)
	}
	if c.Iters == 0 && c.Epochs == 0 && c.Train {
		bad("iters and epochs are both 0: nothing to train")
	}
	if c.LearningRate < 0 {
		bad("learning_rate %g: must not be negative", c.LearningRate)
	}
	if c.GradAccumulationSteps < 1 {
		bad("grad_accumulation_steps %d: must be at least 1", c.GradAccumulationSteps)
	}
	if c.StepsPerReport < 1 {
		bad("steps_per_report %d: must be at least 1", c.StepsPerReport)
	}
	if c.SaveEvery < 0 || c.StepsPerEval < 0 {
		bad("save_every %d and steps_per_eval %d must not be negative", c.SaveEvery, c.StepsPerEval)
	}
	if c.NumLayers == 0 || c.NumLayers < -1 {
		bad("num_layers %d: want -1 (all layers) or a positive number", c.NumLayers)
	}
	if c.GradClip < 0 {
		bad("grad_clip %g: must not be negative (0 = off)", c.GradClip)
	}
	if c.MaxPrompt < 0 {
		bad("max_prompt %d: must not be negative (0 = no limit)", c.MaxPrompt)
	}
	// mlx-lm's -1 is the whole split; its 0 scores no batch and reports NaN (0/0 tokens).
	if c.ValBatches == 0 || c.ValBatches < -1 {
		bad("val_batches %d: want -1 (the whole valid split) or a positive number", c.ValBatches)
	}
	if c.EarlyStoppingPatience < 0 {
		bad("early_stopping_patience %d: must not be negative (0 = off)", c.EarlyStoppingPatience)
	}
	if c.MaxCanvas < 1 {
		bad("max_canvas %d: must be at least 1", c.MaxCanvas)
	}
	if (c.TMin != -1 && (c.TMin < 0 || c.TMin > 1)) || (c.TMax != -1 && (c.TMax < 0 || c.TMax > 1)) {
		bad("t_min %g / t_max %g: must be in [0, 1] (or -1 for the checkpoint's)", c.TMin, c.TMax)
	}
	if len(c.OptimizerConfig.Betas) != 2 {
		bad("optimizer_config.betas %v: want two values", c.OptimizerConfig.Betas)
	}
	if c.AdapterPath == "" && c.Train { // train: false with no adapter scores the base, as in mlx-lm
		bad("adapter_path is empty")
	}
	for _, t := range c.Eval.NoiseLevels {
		if t <= 0 || t > 1 {
			bad("eval.noise_levels %v: each must be in (0, 1]", c.Eval.NoiseLevels)
			break
		}
	}
	if len(p) > 0 {
		return errors.New("config: " + strings.Join(p, "; "))
	}
	return nil
}

// Get returns the value of a dotted key of c.
func Get(c Config, path string) any {
	v := reflect.ValueOf(c)
	for _, part := range strings.Split(path, ".") {
		t := v.Type()
		found := false
		for i := range t.NumField() {
			if t.Field(i).Tag.Get("mapstructure") == part {
				v = v.Field(i)
				found = true
				break
			}
		}
		if !found {
			return nil
		}
	}
	return v.Interface()
}
