package config

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/spf13/viper"
)

// Objective presets: `objective: NAME` sets several loss keys at once. A preset replaces
// the defaults of its keys, so a key given in the file, the environment or a flag still
// wins over it.
const (
	ObjectiveReference = "reference" // mlx-optiq's loss (diffusiongemma.md §5.2): the defaults
	ObjectiveNeMo      = "nemo"      // NeMo AutoModel's DiffusionGemmaSFTRecipe
)

// Long-target choices (long_targets).
const (
	LongTruncate    = "truncate"
	LongRandomBlock = "random_block"
)

// objectivePresets returns the keys each preset sets. NeMo's values are those of
// examples/dllm_sft/diffusion_gemma_lora.yaml and DiffusionGemmaSFTRecipe: dllm.eps
// 0.001 (t ~ U(eps, 1)), the flat loss over every supervised canvas position, the
// response closed by <turn|> and EOS-filled to whole canvases, self_conditioning_p 0.5,
// encoder_loss_weight 1.0 and one randomly chosen response block per example.
func objectivePresets() map[string]map[string]any {
	return map[string]map[string]any{
		ObjectiveReference: {},
		ObjectiveNeMo: {
			"t_min":               0.001,
			"t_max":               1.0,
			"loss_positions":      "all",
			"eos_fill":            true,
			"self_conditioning":   0.5,
			"encoder_loss_weight": 1.0,
			"long_targets":        LongRandomBlock,
		},
	}
}

// ObjectivePreset returns the keys preset name sets, or false for an unknown name.
func ObjectivePreset(name string) (map[string]any, bool) {
	p, ok := objectivePresets()[name]
	return p, ok
}

// applyObjectivePreset installs the chosen preset's values as v's defaults.
func applyObjectivePreset(v *viper.Viper) error {
	name := v.GetString("objective")
	preset, ok := ObjectivePreset(name)
	if !ok {
		names := make([]string, 0, len(objectivePresets()))
		for n := range objectivePresets() {
			names = append(names, n)
		}
		sort.Strings(names)
		return fmt.Errorf("config: objective %q: want one of %s", name, strings.Join(names, ", "))
	}
	for k, val := range preset {
		v.SetDefault(k, val)
	}
	return nil
}

// validateObjective checks the NeMo options.
func (c Config) validateObjective(bad func(format string, args ...any)) {
	if _, ok := ObjectivePreset(c.Objective); !ok {
		bad("objective %q: want %s or %s", c.Objective, ObjectiveReference, ObjectiveNeMo)
	}
	if c.LongTargets != LongTruncate && c.LongTargets != LongRandomBlock {
		bad("long_targets %q: want %s or %s", c.LongTargets, LongTruncate, LongRandomBlock)
	}
	if !(c.SelfConditioning >= 0 && c.SelfConditioning <= 1) {
		bad("self_conditioning %g: must be a probability in [0, 1]", c.SelfConditioning)
	}
	if !(c.EncoderLossWeight >= 0) || math.IsInf(c.EncoderLossWeight, 1) {
		bad("encoder_loss_weight %g: must be finite and ≥ 0", c.EncoderLossWeight)
	}
}
