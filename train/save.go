package train

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/dgtune/dgtune/config"
	"github.com/dgtune/dgtune/internal/atomicfile"
	"github.com/dgtune/dgtune/lora"
	"github.com/dgtune/dgtune/mx"
)

// save writes the checkpoint of step: the latest weights, a numbered copy when asked, and
// the training state (on rank 0; the other ranks hold the same values and write nothing).
// A lost rank does not end the process in the middle of it (cluster.saving).
func (r *run) save(step int, numbered bool) error {
	if r.c.rank != 0 {
		return nil
	}
	return r.c.saving(step, func() error {
		if err := r.saveWeights(weightsFile(r.cfg)); err != nil {
			return err
		}
		if numbered {
			if err := r.saveWeights(fmt.Sprintf("%07d_%s", step, weightsFile(r.cfg))); err != nil {
				return err
			}
		}
		return r.state.write(r.learner)
	})
}

// weightsFile is the name of the latest weights under adapter_path.
func weightsFile(cfg config.Config) string {
	if cfg.FineTuneType == "full" {
		return FullWeightsFile
	}
	return AdapterFile
}

// saveWeights writes the trained arrays to name under adapter_path. An adapter goes
// through package lora's writer (the file every loader reads); a full fine-tune writes a
// complete checkpoint (config, generation config and tokenizer copied), loadable as a
// base model.
func (r *run) saveWeights(name string) error {
	dir := r.cfg.AdapterPath
	if a, ok := r.params.(*lora.Adapter); ok {
		if name == lora.AdaptersFile {
			return lora.Save(dir, a, nil)
		}
		return lora.SaveTensors(filepath.Join(dir, name), a, nil)
	}
	if err := copyCheckpointFiles(r.cfg.Model, dir); err != nil {
		return err
	}
	path := filepath.Join(dir, name)
	if err := mx.SaveSafetensors(path, r.params.Params(), map[string]string{"format": "mlx"}); err != nil {
		return fmt.Errorf("save %s: %w", path, err)
	}
	return nil
}

// copyCheckpointFiles copies the base checkpoint's non-weight files next to full
// fine-tuned weights.
func copyCheckpointFiles(from, to string) error {
	for _, name := range []string{"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"} {
		b, err := os.ReadFile(filepath.Join(from, name))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return err
		}
		if err := atomicfile.WriteFile(filepath.Join(to, name), b); err != nil {
			return err
		}
	}
	return nil
}

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
