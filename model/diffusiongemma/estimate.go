package diffusiongemma

import (
	"fmt"
	"iter"

	"github.com/dgtune/dgtune/mx"
)

// What the memory estimate (package estimate) needs of the model: a checkpoint's tensors as
// stored, and the weight arrays a built Model holds, each with its weight group from the
// tensor table. The estimate runs the training step itself on a shape-only engine.

// QuantizationPolicy is the quantization map `probe mkmodel --bits` writes for cfg: "0"
// (nil: unquantized), "4", "8" or "mixed" (8-bit attention, dense MLP and router, 4-bit
// the rest), group 64 (32 when an input width is not a multiple of 64).
func QuantizationPolicy(cfg *Config, policy string) (*Quantization, error) {
	if cfg == nil {
		return nil, fmt.Errorf("diffusiongemma: quantization policy: no config")
	}
	bitsFor, group, err := quantPlan(cfg, policy)
	if err != nil {
		return nil, err
	}
	if group == 0 {
		return nil, nil
	}
	def := 4
	if policy == Bits8 {
		def = 8
	}
	q := &Quantization{GroupSize: group, Bits: def, Mode: QuantModeAffine}
	for _, ts := range ExpectedTensors(cfg) {
		if b := bitsFor(ts.Module); ts.Quantizable && b != def {
			if q.Modules == nil {
				q.Modules = map[string]ModuleQuantization{}
			}
			q.Modules[ts.Module] = ModuleQuantization{Quantized: true, Bits: b, GroupSize: group}
		}
	}
	return q, nil
}

// StoredDType is what a checkpoint of cfg under quantization q stores unquantized tensors
// and scales in: the config's dtype, else bfloat16 for a quantized base (MLX) and float32
// for an unquantized one (probe mkmodel --bits 0).
func StoredDType(cfg *Config, q *Quantization) mx.DType {
	switch cfg.TextConfig.Dtype {
	case "float32":
		return mx.Float32
	case "float16":
		return mx.Float16
	case "bfloat16":
		return mx.BFloat16
	}
	if q == nil {
		return mx.Float32
	}
	return mx.BFloat16
}

// StoredTensor is one tensor of a text checkpoint as stored: its name, shape and dtype, and
// the weight group it belongs to in a memory report.
type StoredTensor struct {
	Name  string
	Shape []int
	DType mx.DType
	Group string
}

// StoredTensors lists the tensors of a text checkpoint of cfg under quantization q (nil:
// none), in the MLX layout Build reads: a quantized module as uint32 codes plus scales and
// biases, every other tensor whole, unquantized tensors and scales in dtype stored.
func StoredTensors(cfg *Config, q *Quantization, stored mx.DType) ([]StoredTensor, error) {
	t := &cfg.TextConfig
	var out []StoredTensor
	for r := range textTensors(t, t.NumHiddenLayers) {
		shape := r.def.shape(t, r.layer)
		bits, group, quantized := 0, 0, false
		if q != nil && r.def.kind.Quantizable() {
			bits, group, quantized = q.For(r.module)
		}
		if !quantized {
			out = append(out, StoredTensor{Name: r.name, Shape: shape, DType: stored, Group: r.def.group})
			continue
		}
		w, s, err := QuantizedShapes(shape, bits, group)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r.module, err)
		}
		out = append(out,
			StoredTensor{Name: r.module + ".weight", Shape: w, DType: mx.Uint32, Group: r.def.group},
			StoredTensor{Name: r.module + ".scales", Shape: s, DType: stored, Group: r.def.group},
			StoredTensor{Name: r.module + ".biases", Shape: s, DType: stored, Group: r.def.group})
	}
	return out, nil
}

// WeightArrays yields every base-weight array of m's text model (a quantized module's
// codes, scales and biases in turn) with its weight group, as Build made them: call it
// before attaching adapters, which replace linears by wrappers.
func (m *Model) WeightArrays() iter.Seq2[string, *mx.Array] {
	return func(yield func(string, *mx.Array) bool) {
		t := &m.Config.TextConfig
		for r := range textTensors(t, len(m.Layers)) {
			var arrays []*mx.Array
			s := r.def.slot(m, r.layer)
			switch {
			case s.array != nil:
				arrays = []*mx.Array{*s.array}
			case s.linear != nil:
				switch l := (*s.linear).(type) {
				case *Dense:
					arrays = []*mx.Array{l.W}
				case *Quantized:
					arrays = quantOrDense(l, nil)
				}
			case s.embed != nil && *s.embed != nil:
				arrays = quantOrDense((*s.embed).Quant, (*s.embed).Dense)
			case s.experts != nil && *s.experts != nil:
				arrays = quantOrDense((*s.experts).Quant, (*s.experts).Dense)
			}
			for _, a := range arrays {
				if a != nil && !yield(r.def.group, a) {
					return
				}
			}
		}
	}
}

func quantOrDense(q *Quantized, dense *mx.Array) []*mx.Array {
	if q != nil {
		return []*mx.Array{q.W, q.Scales, q.Biases}
	}
	return []*mx.Array{dense}
}

// FormatBytes renders n in binary units with three significant figures (e.g. "13.2 GiB").
func FormatBytes(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	f := float64(n)
	u := 0
	for f >= 1024 && u < len(units)-1 {
		f /= 1024
		u++
	}
	// Thresholds sit where rounding would carry into the next digit (9.996 → "10.0").
	switch {
	case u == 0:
		return fmt.Sprintf("%d B", n)
	case f >= 99.95:
		return fmt.Sprintf("%.0f %s", f, units[u])
	case f >= 9.995:
		return fmt.Sprintf("%.1f %s", f, units[u])
	}
	return fmt.Sprintf("%.2f %s", f, units[u])
}
