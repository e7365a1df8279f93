package goeng

import (
	"fmt"
	"slices"

	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/internal/quant"
	"github.com/dgtune/dgtune/mx/internal/uninit"
)

func qp(p mx.QuantParams) quant.Params { return quant.Params{Bits: p.Bits, GroupSize: p.GroupSize} }

func (e *Engine) Quantize(h mx.Handle, p mx.QuantParams) (mx.Handle, mx.Handle, mx.Handle) {
	w := tt(h)
	cols := w.shape[len(w.shape)-1]
	rows := w.size() / cols
	packed, scales, biases, err := quant.Quantize(w.f32(), rows, cols, qp(p))
	if err != nil {
		panic(fmt.Sprintf("goeng: quantize %v: %v", w.shape, err))
	}
	lead := w.shape[:len(w.shape)-1]
	ws := append(slices.Clone(lead), quant.PackedCols(cols, p.Bits))
	ss := append(slices.Clone(lead), cols/p.GroupSize)
	dt := w.dt
	return newTensor(ws, mx.Uint32, packed), fromF32(ss, dt, scales), fromF32(ss, dt, biases)
}

// qweight unpacks the operands of a quantized op: rows (all leading axes) and logical
// columns of the packed weight.
func qweight(wq, scales, biases *tensor, p mx.QuantParams) ([]uint32, []float32, []float32, int, int) {
	packed, ok := wq.raw().([]uint32)
	if !ok {
		panic(fmt.Sprintf("goeng: packed weight of dtype %s", wq.dt))
	}
	cols := wq.shape[len(wq.shape)-1] * 32 / p.Bits
	rows := wq.size() / wq.shape[len(wq.shape)-1]
	return packed, scales.f32(), biases.f32(), rows, cols
}

func (e *Engine) Dequantize(hw, hs, hb mx.Handle, p mx.QuantParams) mx.Handle {
	wq, s, b := tt(hw), tt(hs), tt(hb)
	packed, sv, bv, rows, cols := qweight(wq, s, b, p)
	shape := append(slices.Clone(wq.shape[:len(wq.shape)-1]), cols)
	return fromF32(shape, s.dt, quant.Dequantize(packed, sv, bv, rows, cols, qp(p)))
}

// qmm computes x·Wᵀ (transpose) or x·W for a 2-D quantized W.
func qmm(x, wq, s, b *tensor, transpose bool, p mx.QuantParams) *tensor {
	packed, sv, bv, rows, cols := qweight(wq, s, b, p)
	k := x.shape[len(x.shape)-1]
	m := x.size() / max(k, 1)
	var n int
	var y []float32
	if transpose {
		n = rows
		y = uninit.Float32s(m * n) // overwritten
		quant.MatmulT(y, x.f32(), m, packed, sv, bv, n, k, qp(p))
	} else {
		n = cols
		y = uninit.Float32s(m * n) // overwritten
		quant.Matmul(y, x.f32(), m, packed, sv, bv, k, n, qp(p))
	}
	shape := append(slices.Clone(x.shape[:len(x.shape)-1]), n)
	return fromF32(shape, mx.PromoteTypes(x.dt, s.dt), y)
}

// d(x·Wᵀ)/dx = g·W and d(x·W)/dx = g·Wᵀ: the same packed weight with the other layout.
func (e *Engine) QuantizedMatmul(hx, hw, hs, hb mx.Handle, transpose bool, p mx.QuantParams) mx.Handle {
	x, wq, s, b := tt(hx), tt(hw), tt(hs), tt(hb)
	out := qmm(x, wq, s, b, transpose, p)
	return record(out, "quantized_matmul", []*tensor{x, wq, s, b}, func(g *tensor) []*tensor {
		return []*tensor{qmm(g, wq, s, b, !transpose, p), nil, nil, nil}
	})
}

func gqmm(x, wq, s, b, idx *tensor, transpose bool, p mx.QuantParams, sorted bool) *tensor {
	packed, sv, bv, _, cols := qweight(wq, s, b, p)
	experts, rows := wq.shape[0], wq.shape[1]
	k := x.shape[len(x.shape)-1]
	m := x.size() / max(k, 1)
	ids := expertIndices("gather_qmm", idx, experts)
	var n int
	var y []float32
	if transpose {
		n = rows
		y = uninit.Float32s(m * n) // overwritten
		quant.GatherMatmulT(y, x.f32(), m, ids, packed, sv, bv, experts, n, k, qp(p), sorted)
	} else {
		n = cols
		y = uninit.Float32s(m * n) // overwritten
		quant.GatherMatmul(y, x.f32(), m, ids, packed, sv, bv, experts, k, n, qp(p), sorted)
	}
	shape := append(slices.Clone(x.shape[:len(x.shape)-1]), n)
	return fromF32(shape, mx.PromoteTypes(x.dt, s.dt), y)
}

func (e *Engine) GatherQMM(hx, hw, hs, hb, hi mx.Handle, transpose bool, p mx.QuantParams, sorted bool) mx.Handle {
	x, wq, s, b, idx := tt(hx), tt(hw), tt(hs), tt(hb), tt(hi)
	out := gqmm(x, wq, s, b, idx, transpose, p, sorted)
	return record(out, "gather_qmm", []*tensor{x, wq, s, b, idx}, func(g *tensor) []*tensor {
		return []*tensor{gqmm(g, wq, s, b, idx, !transpose, p, sorted), nil, nil, nil, nil}
	})
}
