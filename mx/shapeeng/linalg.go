package shapeeng

import (
	"slices"

	"github.com/dgtune/dgtune/mx/internal/dims"

	"github.com/dgtune/dgtune/mx"
)

// Products, gathers and quantized weights.

// operand is what a product reads of x: a pending swap is read as its source in place.
func operand(x *array) (*array, bool) {
	if x.sv != nil {
		return x.sv.src, true
	}
	return x, false
}

// product is goeng's matmulOp(a, b, ta, tb): op(a)·op(b) over the last two axes with
// broadcast batch axes, a fresh result. A batched operand whose batch is broadcast is
// copied first.
func (e *Engine) product(a, b *array, ta, tb bool, label string) *array {
	e.use(a, b)
	if src, ok := operand(a); ok {
		a, ta = src, !ta
	}
	if src, ok := operand(b); ok {
		b, tb = src, !tb
	}
	e.use(a, b)
	na, nb := len(a.shape), len(b.shape)
	m, k := a.shape[na-2], a.shape[na-1]
	if ta {
		m, k = k, m
	}
	n := b.shape[nb-1]
	if tb {
		n = b.shape[nb-2]
	}
	batch := broadcast(a.shape[:na-2], b.shape[:nb-2])
	nbatch := dims.Numel(batch)
	if dims.Numel(a.shape[:na-2]) != nbatch {
		e.temp(int64(nbatch*a.shape[na-2]*a.shape[na-1])*4, label)
	}
	if dims.Numel(b.shape[:nb-2]) != 1 && dims.Numel(b.shape[:nb-2]) != nbatch {
		e.temp(int64(nbatch*b.shape[nb-2]*b.shape[nb-1])*4, label)
	}
	e.asF32(label, a, b)
	if dims.Numel(b.shape[:nb-2]) == 1 && !ta {
		e.gemm(nbatch*m, n, k, false, tb, false) // the batch folds into the rows
	} else {
		e.gemm(m, n, k, ta, tb, false)
	}
	dt := mx.PromoteTypes(a.dt, b.dt)
	if !dt.IsFloat() {
		dt = mx.Float32
	}
	shape := append(slices.Clone(batch), m, n)
	e.convertTemp(shape, dt, label)
	return e.fresh(shape, dt, label)
}

// weightGrad is goeng's matmulWeightGrad: Σ_batch op(a)ᵀ·g for a weight without batch
// axes, one [k, n] product.
func (e *Engine) weightGrad(a, g *array) *array {
	e.read(a, g)
	k, n := a.shape[len(a.shape)-1], g.shape[len(g.shape)-1]
	e.gemm(k, n, g.size()/max(n, 1), true, false, false)
	return e.fresh([]int{k, n}, mx.Float32, labelBackward)
}

// matmulVJP is goeng's: dA = g·Bᵀ, dB = Aᵀ·g (summed over broadcast batch axes), each
// only for a traced input.
func (e *Engine) matmulVJP(a, b *array) func(g *array) []*array {
	return func(g *array) []*array {
		var ga, gb *array
		if a.node != nil {
			ga = e.unbroadcast(e.product(g, b, false, true, labelBackward), a.shape)
		}
		if b.node != nil {
			if dims.Numel(b.shape[:len(b.shape)-2]) == 1 {
				gb = e.reshaped(e.weightGrad(a, g), b.shape)
			} else {
				gb = e.unbroadcast(e.product(a, g, true, false, labelBackward), b.shape)
			}
		}
		return []*array{ga, gb}
	}
}

// Matmul implements mx.Engine.
func (e *Engine) Matmul(ha, hb mx.Handle) mx.Handle {
	e.tick()
	a, b := h(ha), h(hb)
	return e.record(e.product(a, b, false, false, "matmul"), "matmul", []*array{a, b}, e.matmulVJP(a, b))
}

// AddMM implements mx.Engine: β·c + α·(a·b) in the product's own buffer (the
// composition's temporaries for half or broadcast operands).
func (e *Engine) AddMM(hc, ha, hb mx.Handle, alpha, beta float64) mx.Handle {
	e.tick()
	c, a, b := h(hc), h(ha), h(hb)
	e.read(c)
	out := e.product(a, b, false, false, "addmm")
	if out.dt != mx.Float32 || c.dt != mx.Float32 || !slices.Equal(c.shape, out.shape) {
		e.temp(2*out.bytes(), "addmm")
	}
	mm := e.matmulVJP(a, b)
	return e.record(out, "addmm", []*array{c, a, b}, func(g *array) []*array {
		res := []*array{nil, nil, nil}
		if c.node != nil {
			dc := g
			if beta != 1 {
				dc = e.grad(g, g)
			}
			res[0] = e.unbroadcast(dc, c.shape)
		}
		if alpha == 1 {
			if a.node != nil || b.node != nil {
				ab := mm(g)
				res[1], res[2] = ab[0], ab[1]
			}
			return res
		}
		// α on the small factor of each product.
		if a.node != nil {
			e.read(b)
			e.temp(int64(b.size())*4, labelBackward)
			res[1] = e.unbroadcast(e.product(g, b, false, true, labelBackward), a.shape)
		}
		if b.node != nil {
			e.read(a)
			e.temp(int64(a.size())*4, labelBackward)
			if dims.Numel(b.shape[:len(b.shape)-2]) == 1 {
				res[2] = e.reshaped(e.weightGrad(a, g), b.shape)
			} else {
				res[2] = e.unbroadcast(e.product(a, g, true, false, labelBackward), b.shape)
			}
		}
		return res
	})
}

// indexTemp counts goeng's int64 copy of indices and the positions it derives.
func (e *Engine) indexTemp(idx *array, label string) {
	n := int64(idx.size())
	e.temp(16*n, label)
}

// Take implements mx.Engine; the VJP scatter-adds g into x's shape.
func (e *Engine) Take(hx, hi mx.Handle, axis int) mx.Handle {
	e.tick()
	x, idx := h(hx), h(hi)
	e.read(x, idx)
	e.indexTemp(idx, "take")
	shape := append(append(slices.Clone(x.shape[:axis]), idx.shape...), x.shape[axis+1:]...)
	out := e.fresh(shape, x.dt, "take")
	return e.record(out, "take", []*array{x, idx}, func(g *array) []*array {
		e.indexTemp(idx, labelBackward)
		e.asF32(labelBackward, g)
		return []*array{e.grad(x, idx, g), nil}
	})
}

// TakeAlongAxis implements mx.Engine.
func (e *Engine) TakeAlongAxis(hx, hi mx.Handle, axis int) mx.Handle {
	e.tick()
	x, idx := h(hx), h(hi)
	xs, is := slices.Clone(x.shape), slices.Clone(idx.shape)
	xs[axis], is[axis] = 1, 1
	shape := broadcast(xs, is)
	shape[axis] = idx.shape[axis]
	e.read(x, idx)
	e.temp(8*int64(dims.Numel(shape))+8*int64(idx.size()), "take_along_axis")
	out := e.fresh(shape, x.dt, "take_along_axis")
	return e.record(out, "take_along_axis", []*array{x, idx}, func(g *array) []*array {
		e.temp(8*int64(dims.Numel(shape))+8*int64(idx.size()), labelBackward)
		e.asF32(labelBackward, g)
		return []*array{e.grad(x, idx, g), nil}
	})
}

// RMSNorm implements mx.Engine. The VJP computes dx, and dw only for a traced weight.
// RoPE implements mx.Engine (goeng caches its cosine and sine tables).
// GeGLU implements mx.Engine: the VJP makes d gate and d up, and hands out the traced
// ones.
// GeGLUSplit implements mx.GeGLUSplitter.
// TakeWeightedSum implements mx.TakeWeightedSummer. Its node keeps the picked rows'
// positions (an int per pair) for the VJP.
// LoRALinear implements mx.LoRALinearer: base(x) + α·(x·a)·b in one op whose node keeps
// x·a. The VJP makes dxa = g·(αb)ᵀ, db = (α·xa)ᵀ·g, da = xᵀ·dxa and dx, each for a traced
// input.
// Quantize implements mx.Engine.
func (e *Engine) Quantize(hx mx.Handle, p mx.QuantParams) (mx.Handle, mx.Handle, mx.Handle) {
	e.tick()
	w := h(hx)
	e.read(w)
	e.asF32("quantize", w)
	cols := w.shape[len(w.shape)-1]
	lead := w.shape[:len(w.shape)-1]
	ws := append(slices.Clone(lead), cols*p.Bits/32)
	ss := append(slices.Clone(lead), cols/p.GroupSize)
	e.convertTemp(ss, w.dt, "quantize")
	e.convertTemp(ss, w.dt, "quantize")
	return e.fresh(ws, mx.Uint32, "quantize"), e.fresh(ss, w.dt, "quantize"), e.fresh(ss, w.dt, "quantize")
}

// Dequantize implements mx.Engine (untraced, as in goeng).
func (e *Engine) Dequantize(hw, hs, hb mx.Handle, p mx.QuantParams) mx.Handle {
	e.tick()
	w, s, b := h(hw), h(hs), h(hb)
	shape := append(slices.Clone(w.shape[:len(w.shape)-1]), w.shape[len(w.shape)-1]*32/p.Bits)
	e.read(w)
	return e.elementwise("dequantize", shape, s.dt, s, b)
}

// quantProduct is goeng's qmm and gqmm: x [..., k] by a quantized weight → [..., n].
func (e *Engine) quantProduct(label string, x, w, s, b *array, n int) *array {
	e.read(x, w, s, b)
	e.asF32(label, x, s, b)
	shape := append(slices.Clone(x.shape[:len(x.shape)-1]), n)
	k := x.shape[len(x.shape)-1]
	e.gemm(x.size()/max(k, 1), n, k, false, false, true)
	dt := mx.PromoteTypes(x.dt, s.dt)
	e.convertTemp(shape, dt, label)
	return e.fresh(shape, dt, label)
}

// QuantizedMatmul implements mx.Engine: d(x·Wᵀ)/dx = g·W, the same weight the other way.
func (e *Engine) QuantizedMatmul(hx, hw, hs, hb mx.Handle, transpose bool, p mx.QuantParams) mx.Handle {
	e.tick()
	x, w, s, b := h(hx), h(hw), h(hs), h(hb)
	rows, cols := w.shape[len(w.shape)-2], w.shape[len(w.shape)-1]*32/p.Bits
	n := cols
	if transpose {
		n = rows
	}
	out := e.quantProduct("quantized_matmul", x, w, s, b, n)
	return e.record(out, "quantized_matmul", []*array{x, w, s, b}, func(g *array) []*array {
		return []*array{e.quantProduct(labelBackward, g, w, s, b, x.shape[len(x.shape)-1]), nil, nil, nil}
	})
}

// expertIndexTemp counts goeng's int32 copy of expert indices of another dtype, and the
// sorted copies of rows an unsorted gather makes.
func (e *Engine) expertIndexTemp(idx *array, sorted bool, rowBytes int64, label string) {
	if idx.dt != mx.Int32 {
		e.temp(12*int64(idx.size()), label)
	}
	if !sorted {
		e.temp(rowBytes, label)
	}
}

// GatherQMM implements mx.Engine. With sorted indices the rows are used in place.
func (e *Engine) GatherQMM(hx, hw, hs, hb, hi mx.Handle, transpose bool, p mx.QuantParams, sorted bool) mx.Handle {
	e.tick()
	x, w, s, b, idx := h(hx), h(hw), h(hs), h(hb), h(hi)
	rows, cols := w.shape[1], w.shape[2]*32/p.Bits
	n, k := cols, rows
	if transpose {
		n, k = rows, cols
	}
	m := x.size() / max(k, 1)
	e.read(idx)
	e.expertIndexTemp(idx, sorted, int64(m*(k+n))*4, "gather_qmm")
	out := e.quantProduct("gather_qmm", x, w, s, b, n)
	return e.record(out, "gather_qmm", []*array{x, w, s, b, idx}, func(g *array) []*array {
		e.read(idx)
		e.expertIndexTemp(idx, sorted, int64(m*(k+n))*4, labelBackward)
		return []*array{e.quantProduct(labelBackward, g, w, s, b, k), nil, nil, nil, nil}
	})
}

// GatherMM implements mx.Engine: x [..., K] by w[idx] for w [E, K, N] (a swapped stack
// read in place); unsorted rows are sorted into copies.
func (e *Engine) GatherMM(hx, hw, hi mx.Handle, sorted bool) mx.Handle {
	e.tick()
	x, w, idx := h(hx), h(hw), h(hi)
	e.use(w)
	stored, _ := operand(w)
	e.read(x, idx, stored)
	ex, kd, nd := w.shape[0], w.shape[1], w.shape[2]
	m := x.size() / max(kd, 1)
	e.asF32("gather_mm", x, stored)
	e.expertIndexTemp(idx, sorted, 2*int64(m*(kd+nd))*4, "gather_mm")
	shape := append(slices.Clone(x.shape[:len(x.shape)-1]), nd)
	e.gemm(m, nd, kd, false, w.sv != nil, false)
	dt := mx.PromoteTypes(x.dt, w.dt)
	e.convertTemp(shape, dt, "gather_mm")
	out := e.fresh(shape, dt, "gather_mm")
	return e.record(out, "gather_mm", []*array{x, w, idx}, func(g *array) []*array {
		res := []*array{nil, nil, nil}
		e.read(g, idx, stored)
		if x.node != nil {
			e.expertIndexTemp(idx, sorted, 2*int64(m*(kd+nd))*4, labelBackward)
			e.gemm(m, kd, nd, false, w.sv == nil, false)
			res[0] = e.fresh(x.shape, mx.Float32, labelBackward)
		}
		if w.node != nil {
			e.read(x)
			e.expertIndexTemp(idx, sorted, int64(m*(kd+nd))*4, labelBackward)
			e.gemm(kd, nd, m, true, false, false)
			dw := e.fresh([]int{ex, kd, nd}, mx.Float32, labelBackward)
			if w.sv != nil {
				dw.shape = []int{ex, nd, kd}
				res[1] = e.transpose(dw, []int{0, 2, 1})
			} else {
				res[1] = dw
			}
		}
		return res
	})
}

// AdamStep implements mx.AdamStepper.
// AdamStepAll implements mx.AdamStepperAll: a fresh parameter, m and v each.
// Key implements mx.Engine.
// SplitKey implements mx.Engine.
// draw is a random array of shape and dtype from key (goeng draws float32 or int32 values
// and converts them).
// RandomBits implements mx.Engine.
// Uniform implements mx.Engine.
// Randint implements mx.Engine.
// Normal implements mx.Engine.
// Categorical implements mx.Engine.
// ScaledDotProductAttention implements mx.Engine as goeng's fused attention holds memory
// (goeng.AttentionMemoryOf): the output, a float64 log-sum-exp per query row and, when they
// fit, the probabilities for the backward; score blocks as scratch otherwise. The VJP makes
// dq, dk and dv for the traced inputs and drops the kept probabilities.
