package diffusiongemma

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"

	"github.com/dgtune/dgtune/internal/atomicfile"
	"github.com/dgtune/dgtune/mx"
)

// Bits policies for synthetic checkpoints (`probe mkmodel --bits`).
const (
	BitsNone  = "0"
	Bits4     = "4"
	Bits8     = "8"
	BitsMixed = "mixed" // mlx-vlm's published recipe: 8-bit attention/dense MLP/router, 4-bit the rest
)

// quantPlan decides bits per quantizable module and the group size for a policy.
func quantPlan(cfg *Config, policy string) (func(module string) int, int, error) {
	group := 64
	for _, ts := range ExpectedTensors(cfg) {
		if ts.Quantizable && ts.Shape[len(ts.Shape)-1]%64 != 0 {
			group = 32
		}
	}
	switch policy {
	case BitsNone, "":
		return func(string) int { return 0 }, 0, nil
	case Bits4:
		return func(string) int { return 4 }, group, nil
	case Bits8:
		return func(string) int { return 8 }, group, nil
	case BitsMixed:
		return func(module string) int {
			if strings.Contains(module, ".self_attn.") || strings.Contains(module, ".mlp.") || strings.HasSuffix(module, ".router.proj") {
				return 8
			}
			return 4
		}, group, nil
	}
	return nil, 0, fmt.Errorf("diffusiongemma: --bits %q: want 0, 4, 8 or mixed", policy)
}

// Synthesize draws random weights for cfg from seed (variance-preserving linears,
// norms and scalars near 1) and quantizes them by policy, setting cfg.Quantization.
// The result is a checkpoint's tensor map, in the MLX layout. A config with a
// vision_config (see WithSyntheticVision) also gets the vision tower's tensors.
func Synthesize(e mx.Engine, cfg *Config, seed uint64, policy string) (map[string]*mx.Array, error) {
	bitsFor, group, err := quantPlan(cfg, policy)
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	storage := mx.Float32
	if group > 0 {
		storage = mx.BFloat16
		def := 4
		if policy == Bits8 {
			def = 8
		}
		q := &Quantization{GroupSize: group, Bits: def, Mode: "affine", Modules: map[string]ModuleQuantization{}}
		cfg.Quantization = q
	} else {
		cfg.Quantization = nil
	}
	out := map[string]*mx.Array{}
	uniform := func(n int, lo, hi float64) []float32 { return uniformFloats(rng, n, lo, hi) }
	for _, ts := range ExpectedTensors(cfg) {
		n := 1
		for _, d := range ts.Shape {
			n *= d
		}
		var vals []float32
		switch {
		case ts.Kind == KindEmbedding:
			vals = uniform(n, -1, 1)
		case ts.Quantizable:
			in := ts.Shape[len(ts.Shape)-1]
			a := math.Sqrt(3 / float64(in))
			vals = uniform(n, -a, a)
		case strings.HasSuffix(ts.Name, "per_expert_scale"):
			vals = uniform(n, 0.8, 1.2)
		default: // norms, router scale, layer scalars
			vals = uniform(n, 0.9, 1.1)
		}
		a := mx.FromFloat32(e, vals, ts.Shape...)
		bits := 0
		if ts.Quantizable {
			bits = bitsFor(ts.Module)
		}
		if bits == 0 {
			out[ts.Name] = mx.AsType(a, storage)
			continue
		}
		wq, s, b := mx.Quantize(a, group, bits)
		out[ts.Module+".weight"] = wq
		out[ts.Module+".scales"] = mx.AsType(s, storage)
		out[ts.Module+".biases"] = mx.AsType(b, storage)
		if bits != cfg.Quantization.Bits {
			cfg.Quantization.Modules[ts.Module] = ModuleQuantization{Quantized: true, Bits: bits, GroupSize: group}
		}
	}
	if cfg.VisionConfig != nil {
		synthesizeVision(e, cfg, seed, bitsFor, group, storage, out)
	}
	if storage == mx.BFloat16 {
		cfg.TextConfig.Dtype = "bfloat16"
	}
	return out, nil
}

// uniformFloats draws n values uniform in [lo, hi) from rng, in order: the rule every
// synthetic tensor's values come from (Synthesize, its vision tower, and the sharded
// writers' unquantized tensors).
func uniformFloats(rng *rand.Rand, n int, lo, hi float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(lo + (hi-lo)*rng.Float64())
	}
	return v
}

// WriteCheckpoint writes a complete checkpoint directory: config.json (nested layout),
// generation_config.json, model.safetensors and, when given, tokenizer.json.
func WriteCheckpoint(dir string, cfg *Config, weights map[string]*mx.Array, tokenizerJSON []byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("write checkpoint: %w", err)
	}
	conf, err := cfg.MarshalNested()
	if err != nil {
		return fmt.Errorf("write checkpoint: %w", err)
	}
	files := map[string][]byte{"config.json": conf}
	if cfg.GenerationConfig != nil {
		g, err := json.MarshalIndent(cfg.GenerationConfig, "", "  ")
		if err != nil {
			return fmt.Errorf("write checkpoint: %w", err)
		}
		files["generation_config.json"] = append(g, '\n')
	}
	if tokenizerJSON != nil {
		files["tokenizer.json"] = tokenizerJSON
	}
	if weights != nil {
		if err := mx.SaveSafetensors(filepath.Join(dir, "model.safetensors"), weights, map[string]string{"format": "mlx"}); err != nil {
			return fmt.Errorf("write checkpoint: %w", err)
		}
	}
	for name, b := range files {
		if err := atomicfile.WriteFile(filepath.Join(dir, name), b); err != nil {
			return fmt.Errorf("write checkpoint: %w", err)
		}
	}
	return nil
}
