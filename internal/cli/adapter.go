package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/dgtune/dgtune/lora"
	"github.com/dgtune/dgtune/mx"
)

// LoadAdapter reads --adapter: an adapter directory (adapters.safetensors, or PEFT's
// adapter_model.safetensors, with adapter_config.json), or one tensor file of a training
// run — best_adapters.safetensors, a numbered 0000100_adapters.safetensors — whose
// directory holds the adapter_config.json. flag names the option in errors.
func LoadAdapter(e mx.Engine, flag, path string) (*lora.AdapterFile, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("%s %q: not found", flag, path)
	}
	if st.IsDir() {
		return lora.LoadDir(e, path)
	}
	if filepath.Ext(path) != ".safetensors" {
		return nil, fmt.Errorf("%s %q: want an adapter directory or a .safetensors adapter file", flag, path)
	}
	return lora.LoadFile(e, path)
}

// AdapterDir is the directory of --adapter: the path itself for a directory, the file's
// directory for an adapter file.
func AdapterDir(path string) string {
	if st, err := os.Stat(path); err == nil && !st.IsDir() {
		return filepath.Dir(path)
	}
	return path
}

// RecordedBase reads the base model an adapter names (base_model, or PEFT's
// base_model_name_or_path) from the adapter_config.json of --adapter's directory, without
// loading any tensor: "" when there is none.
func RecordedBase(adapter string) string {
	b, err := os.ReadFile(filepath.Join(AdapterDir(adapter), lora.ConfigFile))
	if err != nil {
		return ""
	}
	var ac struct {
		BaseModel string `json:"base_model"`
		PEFTBase  string `json:"base_model_name_or_path"`
	}
	if json.Unmarshal(b, &ac) != nil {
		return ""
	}
	if ac.BaseModel != "" {
		return ac.BaseModel
	}
	return ac.PEFTBase
}

// RecordedTraining reads the training settings an adapter records (the "training" object
// train writes into adapter_config.json) and the file's path; nil when there are none
// (PEFT adapters, other tools') or the file cannot be read.
func RecordedTraining(adapter string) (map[string]any, string) {
	path := filepath.Join(AdapterDir(adapter), lora.ConfigFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, path
	}
	var ac struct {
		Training map[string]any `json:"training"`
	}
	if json.Unmarshal(b, &ac) != nil {
		return nil, path
	}
	return ac.Training, path
}

// ErrBaseNotFound: the adapter's recorded base model is not on this machine.
var ErrBaseNotFound = errors.New("base model not found")

// ResolveBase finds the directory of an adapter's recorded base model: as recorded (train
// writes an absolute path; a relative one is tried against the working directory), else,
// for a relative path, against the adapter's directory — so an adapter shipped next to its
// base, or made elsewhere with a relative path, still finds it.
func ResolveBase(adapter, base string) (string, error) {
	if base == "" {
		return "", nil
	}
	candidates := []string{base}
	if !filepath.IsAbs(base) {
		candidates = append(candidates, filepath.Join(AdapterDir(adapter), base))
	}
	for _, c := range candidates {
		if st, err := os.Stat(c); err == nil && st.IsDir() {
			return c, nil
		} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("base model %s: %w", c, err)
		}
	}
	where := ""
	if len(candidates) > 1 {
		where = " (nor relative to the adapter, " + candidates[1] + ")"
	}
	return "", fmt.Errorf("%w: the adapter's base_model %s does not exist here%s; pass --model DIR", ErrBaseNotFound, base, where)
}

// SameDir reports whether a and b name the same directory (after resolving symbolic
// links), e.g. an adapter's recorded base model and --model.
func SameDir(a, b string) bool {
	sa, errA := os.Stat(a)
	sb, errB := os.Stat(b)
	if errA == nil && errB == nil {
		return os.SameFile(sa, sb)
	}
	ca, errA := filepath.Abs(a)
	cb, errB := filepath.Abs(b)
	return errA == nil && errB == nil && filepath.Clean(ca) == filepath.Clean(cb)
}
