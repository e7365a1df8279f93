package goeng

import (
	"fmt"
	"slices"

	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/internal/quant"
	"github.com/dgtune/dgtune/mx/internal/sgemm"
	"github.com/dgtune/dgtune/mx/internal/uninit"
)

// expertIndices reads gather indices as int32, checking them against the number of
// experts.
func expertIndices(op string, idx *tensor, experts int) []int32 {
	if v, ok := idx.raw().([]int32); ok {
		for _, e := range v {
			if e < 0 || int(e) >= experts {
				panic(fmt.Sprintf("goeng: %s: expert index %d of %d", op, e, experts))
			}
		}
		return v
	}
	ids64 := idx.i64()
	ids := make([]int32, len(ids64))
	for i, v := range ids64 {
		if v < 0 || v >= int64(experts) {
			panic(fmt.Sprintf("goeng: %s: expert index %d of %d", op, v, experts))
		}
		ids[i] = int32(v)
	}
	return ids
}

// GatherMM implements mx.Engine: row r of x [..., K] times w[idx[r]] for w [E, K, N].
// The rows are grouped by expert — in place when the indices come sorted, through a
// stable counting sort into a copy otherwise — and every expert's rows are one product
// of a single sgemm.Batch, so no per-row weight is ever materialised and all experts
// share the cores. A swapped stack (a pending transpose of W [E, N, K]) is read in
// place. The VJP gives dx by the same products against op(w)ᵀ and dw[e] = x_eᵀ·g_e
// (in W's own layout for a swapped stack, handed back as a swap, so nothing is copied);
// experts without rows get zeros. Each output row rounds exactly as x[r]·w[e] alone
// through Matmul, since sgemm's result does not depend on how rows are grouped.
func (e *Engine) GatherMM(hx, hw, hi mx.Handle, sorted bool) mx.Handle {
	x, w, idx := tt(hx), tt(hw), tt(hi)
	g := newExpertGather(x, w, idx, sorted)
	out := g.forward(x)
	return record(out, "gather_mm", []*tensor{x, w, idx}, func(ct *tensor) []*tensor {
		res := []*tensor{nil, nil, nil}
		if x.node != nil {
			res[0] = g.inputGrad(ct)
		}
		if w.node != nil {
			res[1] = g.weightGrad(x, ct)
		}
		return res
	})
}

// expertGather is one gather_mm call's expert segments and weight layout.
type expertGather struct {
	xShape, wShape []int // logical shapes: x [..., K], w [E, K, N]
	dt             mx.DType
	m, k, n, e     int
	// stored is what w's elements are read from: w itself [E, K, N], or, when w is a
	// pending swap, its source [E, N, K] (transposed set).
	stored     []float32
	transposed bool
	start      []int // rows of expert e are sorted positions start[e]..start[e+1]
	order      []int // sorted position → row; nil when the indices came sorted
}

func newExpertGather(x, w, idx *tensor, sorted bool) *expertGather {
	g := &expertGather{xShape: x.shape, wShape: w.shape, e: w.shape[0], k: w.shape[1], n: w.shape[2]}
	g.m = x.size() / max(g.k, 1)
	g.dt = mx.PromoteTypes(x.dt, w.dt)
	if src := w.swapped(); src != nil {
		g.stored, g.transposed = src.f32(), true
	} else {
		g.stored = w.f32()
	}
	ids := expertIndices("gather_mm", idx, g.e)
	if len(ids) != g.m {
		panic(fmt.Sprintf("goeng: gather_mm: %d indices for %d rows", len(ids), g.m))
	}
	g.start, g.order = quant.Segments("goeng: gather_mm", ids, g.e, sorted)
	return g
}

// toSorted returns v's rows of width d in sorted order (v itself when sorted).
func (g *expertGather) toSorted(v []float32, d int) []float32 {
	if g.order == nil {
		return v
	}
	out := uninit.Float32s(g.m * d)
	parallelFor(g.m, d, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			r := g.order[i]
			copy(out[i*d:(i+1)*d], v[r*d:(r+1)*d])
		}
	})
	return out
}

// fromSorted returns rows in sorted order back in row order.
func (g *expertGather) fromSorted(v []float32, d int) []float32 {
	if g.order == nil {
		return v
	}
	out := uninit.Float32s(g.m * d)
	parallelFor(g.m, d, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			r := g.order[i]
			copy(out[r*d:(r+1)*d], v[i*d:(i+1)*d])
		}
	})
	return out
}

// products computes, for every expert with rows, out_e (rows × cols) = in_e (rows ×
// inner) · op(W_e), where op reads the stored matrix of expert e transposed or not.
func (g *expertGather) products(in []float32, inner, cols int, trans bool, out []float32) {
	ld := g.n // a stored [K, N] matrix
	if g.transposed {
		ld = g.k // a stored [N, K] matrix
	}
	size := g.k * g.n
	var ps []sgemm.Product
	for e := range g.e {
		s, t := g.start[e], g.start[e+1]
		if t == s {
			continue
		}
		ps = append(ps, sgemm.Product{TB: sgemm.Trans(trans), M: t - s, N: cols, K: inner,
			A: in[s*inner : t*inner], LDA: inner, B: g.stored[e*size : (e+1)*size], LDB: ld,
			C: out[s*cols : t*cols], LDC: cols})
	}
	sgemm.Batch(ps)
}

func (g *expertGather) outShape(last int) []int {
	return append(slices.Clone(g.xShape[:len(g.xShape)-1]), last)
}

// forward is y = x·w[idx] row by row.
func (g *expertGather) forward(x *tensor) *tensor {
	xs := g.toSorted(x.f32(), g.k)
	ys := uninit.Float32s(g.m * g.n)
	g.products(xs, g.k, g.n, g.transposed, ys)
	return fromF32(g.outShape(g.n), g.dt, g.fromSorted(ys, g.n))
}

// inputGrad is dx[r] = ct[r]·w[idx[r]]ᵀ.
func (g *expertGather) inputGrad(ct *tensor) *tensor {
	cs := g.toSorted(ct.f32(), g.n)
	dx := uninit.Float32s(g.m * g.k)
	g.products(cs, g.n, g.k, !g.transposed, dx)
	return fromF32(g.xShape, mx.Float32, g.fromSorted(dx, g.k))
}

// weightGrad is dw[e] = Σ_{r: idx[r]=e} x[r]ᵀ·ct[r], in w's logical shape [E, K, N].
func (g *expertGather) weightGrad(x, ct *tensor) *tensor {
	xs := g.toSorted(x.f32(), g.k)
	cs := g.toSorted(ct.f32(), g.n)
	size := g.k * g.n
	dw := make([]float32, g.e*size)
	var ps []sgemm.Product
	for e := range g.e {
		s, t := g.start[e], g.start[e+1]
		if t == s {
			continue
		}
		rows := t - s
		xe, ce, de := xs[s*g.k:t*g.k], cs[s*g.n:t*g.n], dw[e*size:(e+1)*size]
		if g.transposed {
			// d(stored)_e [N, K] = ct_eᵀ·x_e.
			ps = append(ps, sgemm.Product{TA: sgemm.Transposed, M: g.n, N: g.k, K: rows, A: ce, LDA: g.n, B: xe, LDB: g.k, C: de, LDC: g.k})
		} else {
			ps = append(ps, sgemm.Product{TA: sgemm.Transposed, M: g.k, N: g.n, K: rows, A: xe, LDA: g.k, B: ce, LDB: g.n, C: de, LDC: g.n})
		}
	}
	sgemm.Batch(ps)
	if !g.transposed {
		return fromF32(g.wShape, mx.Float32, dw)
	}
	src := fromF32([]int{g.e, g.n, g.k}, mx.Float32, dw)
	return &tensor{shape: slices.Clone(g.wShape), dt: mx.Float32, swap: &swapView{src: src}}
}
