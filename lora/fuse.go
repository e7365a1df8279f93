package lora

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/mx"
)

// FuseTensors folds f into a checkpoint's tensors (MLX layout) for config cfg:
// W' = W + (scale·B)ᵀ·Aᵀ, both factors cast to W's dtype first as mlx-lm does. A quantized
// module is dequantized, updated and re-quantized with its own bits and group size; with
// dequantize it is stored dense instead (in its scales' dtype) and its quantization entry
// becomes false. Every other tensor is passed through as the same array. The adapter is
// checked against cfg's geometry first; nothing is computed when it does not fit.
func FuseTensors(cfg *diffusiongemma.Config, weights map[string]*mx.Array, f *AdapterFile, dequantize bool) (map[string]*mx.Array, *diffusiongemma.Config, error) {
	fail := func(err error) (map[string]*mx.Array, *diffusiongemma.Config, error) {
		return nil, nil, fmt.Errorf("lora: fuse: %w", err)
	}
	if f == nil {
		return fail(fmt.Errorf("%w: no adapter", ErrFormat))
	}
	if err := f.Validate(); err != nil {
		return fail(err)
	}
	if f.Separate() {
		return fail(fmt.Errorf("%w: the adapter's encoder pass has weights of its own (lora_parameters.encoder %q), and a checkpoint holds one set of weights for both passes; use the adapter unfused, or export it with --format peft",
			ErrMismatch, EncoderModeSeparate))
	}
	if err := cfg.Validate(); err != nil {
		return fail(err)
	}
	if err := CheckGeometry(cfg, f); err != nil {
		return fail(err)
	}
	geom := linearGeometry(cfg)
	out := maps.Clone(weights)
	newCfg := *cfg
	if cfg.Quantization != nil {
		q := *cfg.Quantization
		q.Modules = maps.Clone(q.Modules)
		if q.Modules == nil {
			q.Modules = map[string]diffusiongemma.ModuleQuantization{}
		}
		newCfg.Quantization = &q
	}
	var problems []string
	for _, mod := range f.ModuleNames() {
		w := f.Modules[mod]
		in, outDim := geom[mod][0], geom[mod][1]
		if sc, ok := weights[mod+".scales"]; ok {
			wq, bi := weights[mod+".weight"], weights[mod+".biases"]
			if wq == nil || bi == nil || wq.DType() != mx.Uint32 || wq.Ndim() != 2 || sc.Ndim() != 2 || !slices.Equal(bi.Shape(), sc.Shape()) {
				problems = append(problems, fmt.Sprintf("%s: incomplete or malformed quantized weight", mod))
				continue
			}
			group := 64 // the loader's default when the map names no group size
			if cfg.Quantization != nil {
				if _, g, isQ := cfg.Quantization.For(mod); isQ {
					group = g
				}
			}
			bits, qin, err := diffusiongemma.InferBits(wq.Dim(1), sc.Dim(1), group)
			if err != nil || qin != in || wq.Dim(0) != outDim {
				problems = append(problems, fmt.Sprintf("%s: quantized weight %v with scales %v does not fit [%d, %d] (out, in) at group size %d",
					mod, wq.Shape(), sc.Shape(), outDim, in, group))
				continue
			}
			dense := mx.Dequantize(wq, sc, bi, group, bits)
			fused := mx.Add(dense, delta(w.A, w.B, f.Scale(), dense.DType()))
			if dequantize {
				out[mod+".weight"] = fused
				delete(out, mod+".scales")
				delete(out, mod+".biases")
				if newCfg.Quantization != nil {
					newCfg.Quantization.Modules[mod] = diffusiongemma.ModuleQuantization{Quantized: false}
				}
				continue
			}
			q, s, b := mx.Quantize(fused, group, bits)
			out[mod+".weight"] = q
			out[mod+".scales"] = mx.AsType(s, sc.DType())
			out[mod+".biases"] = mx.AsType(b, bi.DType())
			continue
		}
		base, ok := weights[mod+".weight"]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("%s: no %s.weight in the checkpoint", mod, mod))
		case !slices.Equal(base.Shape(), []int{outDim, in}):
			problems = append(problems, fmt.Sprintf("%s.weight: checkpoint %v, config [%d %d]", mod, base.Shape(), outDim, in))
		case !base.DType().IsFloat():
			problems = append(problems, fmt.Sprintf("%s.weight: dtype %s, want a float type", mod, base.DType()))
		default:
			out[mod+".weight"] = mx.Add(base, delta(w.A, w.B, f.Scale(), base.DType()))
		}
	}
	if len(problems) > 0 {
		return fail(fmt.Errorf("checkpoint does not match its config:\n  %s", strings.Join(problems, "\n  ")))
	}
	return out, &newCfg, nil
}

// CheckGeometry checks every tensor of f against the linears cfg declares (shapes from
// the tensor table, so no weight is read): A must be [in, r] and B [r, out]. The error
// (a *MismatchError) names the adapter's base_model and the first problem.
func CheckGeometry(cfg *diffusiongemma.Config, f *AdapterFile) error {
	geom := linearGeometry(cfg)
	return checkFit(f, func(mod string) (int, int, bool) {
		d, ok := geom[mod]
		return d[0], d[1], ok
	})
}

// linearGeometry maps every 2-D linear module of cfg (the embedding excluded) to its
// [in, out], from the tensor table alone.
func linearGeometry(cfg *diffusiongemma.Config) map[string][2]int {
	g := map[string][2]int{}
	for _, ts := range diffusiongemma.ExpectedTensors(cfg) {
		if ts.Kind == diffusiongemma.KindLinear {
			g[ts.Module] = [2]int{ts.Shape[1], ts.Shape[0]}
		}
	}
	return g
}
