package train

import (
	"path/filepath"

	"github.com/dgtune/dgtune/config"
	"github.com/dgtune/dgtune/lora"
)

// Purposes of derived seeds: every random stream of a run has its own.
const (
	seedLoRAInit uint64 = iota + 1
	seedShuffle
	seedTrainNoise
	seedValNoise
	seedDropout
	seedTrainChoice // the objective's per-example choices: block of a long target, self-conditioning coin
	seedValChoice
	seedTrainCoin // self_conditioning_draw step: one coin per (step, micro-batch)
)

// writeAdapterConfig writes adapter_config.json with package lora's writer: mlx-lm/optiq's
// fields plus the whole resolved training config under "training".
//
// base_model is the model's absolute path, so that eval and export find it from any
// working directory.
func writeAdapterConfig(c config.Config) error {
	base := c.Model
	if abs, err := filepath.Abs(base); err == nil {
		base = abs
	}
	ac := lora.NewAdapterConfig(LoRAConfig(c), base)
	ac.FineTuneType = c.FineTuneType
	ac.Extra = map[string]any{"training": config.Nested(c)}
	return lora.WriteConfig(c.AdapterPath, ac)
}
