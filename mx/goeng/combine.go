package goeng

import (
	"slices"

	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/internal/uninit"
)

// TakeWeightedSum implements mx.TakeWeightedSummer: out[t] = Σ_k w[t, k]·y[idx[t, k]] for
// y [R, H] and idx, w [..., K] → [..., H], the mixture of experts' combine. For float32
// operands every value rounds as the composition Take → Multiply → Sum over K does on this
// engine (half-precision ones are computed in float32 and the result rounded once): each
// product w·y in float32, their sum over k in float64 from 0, in order of k, rounded
// once (AVX2 kernels where built: the same operations lane by lane). In the VJP, dy's rows
// are the composition's: 0 + w·g (rows picked more than once add their terms in order of
// (t, k)); dw[t, k] = Σ_h g·y is dot4's float64 sum of exact products in four partial sums
// (the composition rounds each product to float32 and sums in order of h, so dw may
// differ in the last place). It reads each picked row once each way and never
// materialises [..., K, H].
func (e *Engine) TakeWeightedSum(hy, hi, hw mx.Handle) mx.Handle {
	y, idx, w := tt(hy), tt(hi), tt(hw)
	r, h := y.shape[0], y.shape[1]
	k := idx.shape[len(idx.shape)-1]
	ids := idx.i64()
	pos := make([]int, len(ids))
	for j, s := range ids {
		pos[j] = normIndex(s, r, "take_weighted_sum")
	}
	t := len(pos) / max(k, 1)
	yv, wv := y.f32(), w.f32()
	out := uninit.Float32s(t * h)
	parallelFor(t, k*h, func(lo, hi int) {
		acc := make([]float64, h)
		for tok := lo; tok < hi; tok++ {
			clear(acc)
			for s := range k {
				axpyRounded(acc, yv[pos[tok*k+s]*h:][:h], wv[tok*k+s])
			}
			dst := out[tok*h : (tok+1)*h]
			i := 0
			if n8 := h / 8 * 8; combineAVX2 && n8 > 0 {
				roundF64(&dst[0], &acc[0], n8)
				i = n8
			}
			for ; i < h; i++ {
				dst[i] = float32(acc[i])
			}
		}
	})
	shape := append(slices.Clone(idx.shape[:len(idx.shape)-1]), h)
	res := fromF32(shape, mx.PromoteTypes(y.dt, w.dt), out)
	return record(res, "take_weighted_sum", []*tensor{y, idx, w}, func(g *tensor) []*tensor {
		gv := g.f32()
		var dy, dw *tensor
		if y.node != nil {
			dy = fromF32(slices.Clone(y.shape), mx.Float32, weightedScatter(gv, wv, pos, r, h, k))
		}
		if w.node != nil {
			d := uninit.Float32s(len(pos))
			parallelFor(t, k*h, func(lo, hi int) {
				for tok := lo; tok < hi; tok++ {
					gr := gv[tok*h : (tok+1)*h]
					for s := range k {
						d[tok*k+s] = float32(dot4(gr, yv[pos[tok*k+s]*h:][:h]))
					}
				}
			})
			dw = fromF32(slices.Clone(w.shape), mx.Float32, d)
		}
		return []*tensor{dy, nil, dw}
	})
}

// weightedScatter is the combine's dy [r, h]: row pos[j] receives w[j]·g[j/k] for every
// pair j, from 0, in order of j; rows no pair picks are 0. Destination rows are split
// among the goroutines, so no two write one row.
func weightedScatter(g, w []float32, pos []int, r, h, k int) []float32 {
	first, from := groupByDestination(pos, r)
	dy := uninit.Float32s(r * h)
	parallelFor(r, max(1, len(pos)/max(r, 1))*h, func(lo, hi int) {
		for row := lo; row < hi; row++ {
			dst := dy[row*h : (row+1)*h]
			js := from[first[row]:first[row+1]]
			if len(js) == 0 {
				clear(dst)
				continue
			}
			// 0 + w·g (as the scatter from zero makes −0 into +0), then each further
			// pair's w·g added, every step rounded in float32.
			j := js[0]
			gr, wt := g[(j/k)*h:][:h], w[j]
			i := vecVS(mx.OpMultiply, dst, gr, wt)
			vecVS(mx.OpAdd, dst[:i], dst, 0)
			for ; i < h; i++ {
				dst[i] = float32(gr[i]*wt) + 0
			}
			for _, j := range js[1:] {
				gr, wt := g[(j/k)*h:][:h], w[j]
				for i, v := range gr {
					dst[i] += float32(v * wt)
				}
			}
		}
	})
	return dy
}

// axpyRounded is acc[i] += float64(float32(x[i]·w)): the product rounded in float32 (so
// never fused into the add), then added in float64.
func axpyRounded(acc []float64, x []float32, w float32) {
	x = x[:len(acc)]
	i := 0
	if n8 := len(acc) / 8 * 8; combineAVX2 && n8 > 0 {
		axpyRoundedF64(&acc[0], &x[0], w, n8)
		i = n8
	}
	for ; i < len(acc); i++ {
		acc[i] += float64(float32(x[i] * w))
	}
}
