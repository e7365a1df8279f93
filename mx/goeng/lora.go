package goeng

import (
	"slices"
	"sync"

	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/internal/quant"
	"github.com/dgtune/dgtune/mx/internal/sgemm"
	"github.com/dgtune/dgtune/mx/internal/uninit"
)

// LoRALinear implements mx.LoRALinearer: base(x) + alpha·(x·a)·b as one op, base being
// x·wᵀ for a dense w [N, K] (scales nil) or the quantized x·Wᵀ.
//
// The composition makes three passes over tokens × N floats: the base product writes
// its result, and AddMM reads it back and writes the sum. Here the low-rank term of each
// block of the base product is formed and added right after sgemm finishes the block,
// on the goroutine that computed it, while the block is in cache (lowRankEpilogue); the
// values are the composition's to the bit. The backward does the same for dx: the base
// product g·w takes the LoRA path's dxa·aᵀ on its blocks, so dx is one product instead
// of two and a sum. The other cotangents are the composition's: dxa = g·(alpha·b)ᵀ,
// db = (alpha·xa)ᵀ·g and da = xᵀ·dxa.
func (e *Engine) LoRALinear(hx, hw, hs, hb, ha, hbb mx.Handle, p mx.QuantParams, alpha float64) mx.Handle {
	l := &loraLinear{x: tt(hx), w: tt(hw), a: tt(ha), b: tt(hbb), p: p, alpha: float32(alpha)}
	if hs != nil {
		l.scales, l.biases = tt(hs), tt(hb)
	}
	l.xa = matmulKernel(l.x, l.a)
	out := l.baseThen(l.x, true, l.xa, l.b, sgemm.NoTrans, l.alpha)
	return record(out, "lora_linear", []*tensor{l.x, l.w, l.scales, l.biases, l.a, l.b}, l.vjp)
}

// loraLinear is one LoRALinear call's operands, and x·a, which the backward needs.
type loraLinear struct {
	x, w, scales, biases, a, b *tensor
	p                          mx.QuantParams
	alpha                      float32
	xa                         *tensor
}

// baseThen is the base product of v — v·wᵀ (forward) or v·w (backward) — with
// alpha·(p·op(q)) added to every block as it is finished (q [r, N] as stored, or its
// transpose [N, r] when qt is set).
func (l *loraLinear) baseThen(v *tensor, forward bool, p, q *tensor, qt sgemm.Trans, alpha float32) *tensor {
	k := v.shape[len(v.shape)-1]
	m := v.size() / max(k, 1)
	rows, cols := l.w.shape[0], l.w.shape[1] // w's logical [N, K]
	if l.scales != nil {
		cols = cols * 32 / l.p.Bits
	}
	n := cols
	if forward {
		n = rows
	}
	pv, r, qv := p.f32(), p.shape[len(p.shape)-1], q.f32()
	then := func(out []float32) sgemm.Epilogue { return lowRankEpilogue(out, n, pv, r, qv, qt, alpha) }
	var out []float32
	var done bool
	if l.scales == nil {
		var y *tensor
		y, done = matmulThen(v, l.w, false, forward, func(res []float32, _ []int) sgemm.Epilogue { return then(res) })
		out = y.f32()
	} else {
		packed, sv, bv, _, _ := qweight(l.w, l.scales, l.biases, l.p)
		out = uninit.Float32s(m * n) // every block is written by the product
		if forward {
			done = quant.MatmulTThen(out, v.f32(), m, packed, sv, bv, rows, cols, qp(l.p), then(out))
		} else {
			done = quant.MatmulThen(out, v.f32(), m, packed, sv, bv, rows, cols, qp(l.p), then(out))
		}
	}
	if !done {
		// Too few rows for a blocked product: the term over the whole result, one block.
		then(out)(0, m, 0, n)
	}
	shape := append(slices.Clone(v.shape[:len(v.shape)-1]), n)
	return fromF32(shape, mx.Float32, out)
}

// vjp maps the cotangent g of the output to the inputs' (x, w, scales, biases, a, b),
// each nil unless traced.
func (l *loraLinear) vjp(g *tensor) []*tensor {
	res := make([]*tensor, 6)
	if l.x.node == nil && l.a.node == nil && l.b.node == nil {
		return res
	}
	// alpha on the small factor of each product, as AddMM's VJP puts it.
	dxa := matmulOp(g, scaledBy(l.b, l.alpha), false, true) // [..., r]
	if l.b.node != nil {
		res[5] = reshapeKernel(matmulWeightGrad(scaledBy(l.xa, l.alpha), g), l.b.shape)
	}
	if l.a.node != nil {
		res[4] = reshapeKernel(matmulWeightGrad(l.x, dxa), l.a.shape)
	}
	if l.x.node != nil {
		// dx = g·w + dxa·aᵀ, a [K, r] read transposed.
		res[0] = reshapeKernel(l.baseThen(g, false, dxa, l.a, sgemm.Transposed, 1), l.x.shape)
	}
	return res
}

// scaledBy is s·t, t itself when s is 1 (an exact product).
func scaledBy(t *tensor, s float32) *tensor {
	if s == 1 {
		return t
	}
	return kscale(t, s)
}

// lowRankPool recycles the blocks of lowRankEpilogue's products.
var lowRankPool = sync.Pool{New: func() any { return new([]float32) }}

// lowRankEpilogue returns the epilogue that adds alpha·(p·op(q)) to each finished block
// of out [M, N] (row stride n), p [M, r] row-major and op(q) [r, N] (q stored [N, r] when
// qt is set), rounding as AddMM(out, p, q, alpha, 1) does: the block of the product,
// formed as Gemm forms it whatever the block, then alpha·t, then out + alpha·t.
func lowRankEpilogue(out []float32, n int, p []float32, r int, q []float32, qt sgemm.Trans, alpha float32) sgemm.Epilogue {
	return func(i0, i1, j0, j1 int) {
		rows, cols := i1-i0, j1-j0
		if rows == 0 || cols == 0 {
			return
		}
		buf := lowRankPool.Get().(*[]float32)
		defer lowRankPool.Put(buf)
		if cap(*buf) < rows*cols {
			*buf = uninit.Float32s(rows * cols)
		}
		t := (*buf)[:rows*cols] // overwritten by the product
		qs, ldq := q[j0:], n
		if qt {
			qs, ldq = q[j0*r:], r
		}
		sgemm.GemmOnCaller(sgemm.NoTrans, qt, rows, cols, r, p[i0*r:], r, qs, ldq, t, cols, false)
		for i := range rows {
			tr, dst := t[i*cols:(i+1)*cols], out[(i0+i)*n+j0:(i0+i)*n+j1]
			if alpha != 1 {
				for j := vecVS(mx.OpMultiply, tr, tr, alpha); j < cols; j++ {
					tr[j] *= alpha
				}
			}
			for j := vecVV(mx.OpAdd, dst, dst, tr); j < cols; j++ {
				dst[j] += tr[j]
			}
		}
	}
}
