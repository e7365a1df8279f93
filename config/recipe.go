package config

import (
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/spf13/pflag"
	"github.com/spf13/viper"
)

// Recipes: `recipe: NAME` sets the defaults of a published training recipe. Like an
// objective preset it only replaces defaults: a key given in the file, the environment or
// a flag still wins, and the resolved config marks the values that came from the recipe.
const (
	RecipeOptiq = "optiq" // mlx-optiq's DiffusionGemma LoRA recipe: the defaults
	RecipeNeMo  = "nemo"  // NeMo AutoModel's examples/dllm_sft/diffusion_gemma_lora.yaml
)

// Choices of the keys the NeMo recipe brought.
const (
	InitKaimingUniform = "kaiming_uniform"
	InitXavierNormal   = "xavier_normal"
	InitGaussian       = "gaussian"

	ChatTemplateDGTune = "dgtune"
	ChatTemplateNeMo   = "nemo"

	NormalizeMicroBatch = "micro_batch"
	NormalizeStep       = "step"

	DrawPerExample = "example"
	DrawPerStep    = "step"
)

// recipePresets returns the keys each recipe sets. NeMo's values are those of
// examples/dllm_sft/diffusion_gemma_lora.yaml at NeMo AutoModel 36044ad: the objective
// (DiffusionGemmaSFTRecipe), peft dim 16 / alpha 32 (scale 2) with xavier A on q/k/v/o and
// the dense gate/up/down (dgtune's default keys), torch AdamW (bias-corrected) with its
// betas, eps and decay, clip_grad_norm 1.0, OptimizerParamScheduler's 25 warm-up steps from 0
// then cosine to 1.5e-5 at step 800 (max_steps), global batch 8, seed 42, the chat template
// and seq_length 1024 of its dataset block, and its step-wide loss normalisation and
// per-(step, micro-batch) self-conditioning coin.
func recipePresets() map[string]map[string]any {
	return map[string]map[string]any{
		RecipeOptiq: {},
		RecipeNeMo: {
			"objective":                        ObjectiveNeMo,
			"lora_parameters.rank":             16,
			"lora_parameters.scale":            2.0,
			"lora_parameters.dropout":          0.0,
			"lora_parameters.init":             InitXavierNormal,
			"optimizer":                        "adamw",
			"learning_rate":                    1.5e-4,
			"optimizer_config.betas":           []float64{0.95, 0.99},
			"optimizer_config.eps":             1e-8,
			"optimizer_config.weight_decay":    1e-4,
			"optimizer_config.bias_correction": true,
			"grad_clip":                        1.0,
			"lr_schedule.name":                 "cosine_with_min_lr",
			"lr_schedule.arguments":            []float64{1.5e-4, 800, 1.5e-5},
			"lr_schedule.warmup":               25,
			"lr_schedule.warmup_init":          0.0,
			"batch_size":                       8,
			"iters":                            800,
			"seed":                             uint64(42),
			"chat_template":                    ChatTemplateNeMo,
			"max_seq_length":                   1024,
			"loss_normalization":               NormalizeStep,
			"self_conditioning_draw":           DrawPerStep,
		},
	}
}

// RecipePreset returns the keys recipe name sets, or false for an unknown name.
func RecipePreset(name string) (map[string]any, bool) {
	p, ok := recipePresets()[name]
	return p, ok
}

func presetNames(m map[string]map[string]any) string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// applyRecipePreset installs the chosen recipe's values as v's defaults. It runs before
// the objective preset, so that the objective a recipe names brings its own keys.
func applyRecipePreset(v *viper.Viper) error {
	name := v.GetString("recipe")
	preset, ok := RecipePreset(name)
	if !ok {
		return fmt.Errorf("config: recipe %q: want one of %s", name, presetNames(recipePresets()))
	}
	for k, val := range preset {
		v.SetDefault(k, val)
	}
	return nil
}

// given reports, for the presets' bookkeeping, whether a key was set by the file, a
// DGTUNE_* variable, a flag or a PEFT name given as a flag (flagKeys).
type given struct {
	v        *viper.Viper
	path     string
	fs       *pflag.FlagSet
	flagKeys map[string]any
}

func (g given) has(k string) bool {
	if _, ok := g.flagKeys[k]; ok {
		return true
	}
	if g.fs != nil {
		if f := g.fs.Lookup(FlagName(k)); f != nil && f.Changed {
			return true
		}
	}
	if strings.TrimSpace(os.Getenv(EnvName(k))) != "" {
		return true
	}
	return g.path != "" && g.v.InConfig(k)
}

// notePresets records in c.Presets the keys whose value the recipe or the objective preset
// set: named by a preset, given nowhere, and still holding the preset's value (an
// adapter's inherited setting may have replaced it).
func (c *Config) notePresets(g given) {
	c.Presets = map[string]string{}
	mark := func(who string, preset map[string]any) {
		for k, val := range preset {
			if g.has(k) || fmt.Sprint(Get(*c, k)) != fmt.Sprint(val) {
				continue
			}
			c.Presets[k] = who
		}
	}
	if p, ok := RecipePreset(c.Recipe); ok {
		mark("recipe "+c.Recipe, p)
	}
	if p, ok := ObjectivePreset(c.Objective); ok {
		mark("objective "+c.Objective, p)
	}
}

// validateRecipe checks the keys the NeMo recipe brought.
func (c Config) validateRecipe(bad func(format string, args ...any)) {
	if _, ok := RecipePreset(c.Recipe); !ok {
		bad("recipe %q: want %s or %s", c.Recipe, RecipeNeMo, RecipeOptiq)
	}
	choice := func(key, v string, allowed ...string) {
		for _, a := range allowed {
			if v == a {
				return
			}
		}
		bad("%s %q: want one of %s", key, v, strings.Join(allowed, ", "))
	}
	choice("lora_parameters.init", c.LoRAParameters.Init, InitKaimingUniform, InitXavierNormal, InitGaussian)
	choice("chat_template", c.ChatTemplate, ChatTemplateDGTune, ChatTemplateNeMo)
	choice("loss_normalization", c.LossNormalization, NormalizeMicroBatch, NormalizeStep)
	choice("self_conditioning_draw", c.SelfConditioningDraw, DrawPerExample, DrawPerStep)
}
