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

// DeriveSeed mixes parts into one 64-bit seed with SplitMix64's finaliser, so that
// neighbouring (step, example) pairs get unrelated keys.
func DeriveSeed(parts ...uint64) uint64 {
	h := uint64(0x9e3779b97f4a7c15)
	for _, p := range parts {
		h ^= p + 0x9e3779b97f4a7c15 + (h << 6) + (h >> 2)
		h = mix64(h)
	}
	return h
}

func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// FormatConfig renders the resolved configuration as YAML, the values a preset set
// marked as FormatChanged marks them.
func FormatConfig(c config.Config) string {
	return formatKeys(c, func(string) bool { return true })
}

// toMap turns the config into the key layout of the YAML file.
func toMap(c config.Config) map[string]any {
	out := map[string]any{}
	for _, k := range config.Keys() {
		v := config.Get(c, k)
		m := out
		parts := splitKey(k)
		for _, p := range parts[:len(parts)-1] {
			sub, ok := m[p].(map[string]any)
			if !ok {
				sub = map[string]any{}
				m[p] = sub
			}
			m = sub
		}
		m[parts[len(parts)-1]] = v
	}
	return out
}

func splitKey(k string) []string {
	var out []string
	start := 0
	for i := range len(k) {
		if k[i] == '.' {
			out = append(out, k[start:i])
			start = i + 1
		}
	}
	return append(out, k[start:])
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
	ac.Extra = map[string]any{"training": toMap(c)}
	return lora.WriteConfig(c.AdapterPath, ac)
}
