package diffusiongemma

import (
	"math"
	"math/rand/v2"
	"strings"

	"github.com/dgtune/dgtune/mx"
)

// SyntheticSoftTokens is the per-image soft-token budget of WithSyntheticVision: 16 tokens
// = 144 patches, so a square image is 192×192 and a test prompt stays short.
const SyntheticSoftTokens = 16

// SyntheticVisionConfig is a tiny gemma4_vision tower for synthetic checkpoints and tests
// (`probe mkmodel --vision`): hidden 32, 2 layers, 2 heads of 16, GeGLU width 64, the real
// patch size 16, pooling 3 and RoPE base 100, and a 64-entry position table (more than
// the 48 patches per side the SyntheticSoftTokens budget allows).
func SyntheticVisionConfig() VisionConfig {
	v := DefaultVisionConfig()
	v.HiddenSize = 32
	v.IntermediateSize = 64
	v.NumHiddenLayers = 2
	v.NumAttentionHeads = 2
	v.NumKeyValueHeads = 2
	v.HeadDim = 16
	v.GlobalHeadDim = 16
	v.PositionEmbeddingSize = 64
	v.DefaultOutputLength = SyntheticSoftTokens
	return v
}

// WithSyntheticVision gives cfg the SyntheticVisionConfig tower and its soft-token budget.
// Synthesize then also draws the vision tensors.
func WithSyntheticVision(cfg *Config) {
	v := SyntheticVisionConfig()
	cfg.VisionConfig = &v
	cfg.VisionSoftTokensPerImage = SyntheticSoftTokens
}

// synthesizeVision adds cfg's vision tensors to out, drawn from their own stream of seed
// so that the text weights do not depend on whether a tower is present. Linears follow
// the text policy (the published recipe quantizes the tower at 4 bits); a linear whose
// input is not a multiple of the group size falls back to groups of 32, or stays dense
// as the real vision down_proj (input 4304) does.
func synthesizeVision(e mx.Engine, cfg *Config, seed uint64, bitsFor func(string) int, group int, storage mx.DType, out map[string]*mx.Array) {
	rng := rand.New(rand.NewPCG(seed, 0x7e5a))
	uniform := func(n int, lo, hi float64) []float32 { return uniformFloats(rng, n, lo, hi) }
	for _, ts := range VisionTensors(cfg) {
		n := 1
		for _, d := range ts.Shape {
			n *= d
		}
		in := ts.Shape[len(ts.Shape)-1]
		var vals []float32
		switch {
		case ts.Quantizable:
			a := math.Sqrt(3 / float64(in))
			vals = uniform(n, -a, a)
		case strings.HasSuffix(ts.Name, ".position_embedding_table"):
			vals = uniform(n, -1, 1)
		case strings.HasSuffix(ts.Name, ".std_bias"):
			vals = uniform(n, -0.1, 0.1)
		default: // norms, std_scale
			vals = uniform(n, 0.9, 1.1)
		}
		a := mx.FromFloat32(e, vals, ts.Shape...)
		bits, g := 0, group
		if ts.Quantizable && group > 0 {
			bits = bitsFor(ts.Module)
			if in%g != 0 {
				g = 32
			}
			if in%g != 0 {
				bits = 0
			}
		}
		if bits == 0 {
			if ts.Quantizable && group > 0 {
				// MLX lists a module its predicate left dense as false.
				cfg.Quantization.Modules[ts.Module] = ModuleQuantization{Quantized: false}
			}
			out[ts.Name] = mx.AsType(a, storage)
			continue
		}
		wq, s, b := mx.Quantize(a, g, bits)
		out[ts.Module+".weight"] = wq
		out[ts.Module+".scales"] = mx.AsType(s, storage)
		out[ts.Module+".biases"] = mx.AsType(b, storage)
		if bits != cfg.Quantization.Bits || g != cfg.Quantization.GroupSize {
			cfg.Quantization.Modules[ts.Module] = ModuleQuantization{Quantized: true, Bits: bits, GroupSize: g}
		}
	}
}
