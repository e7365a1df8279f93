package goeng

import (
	"math"
	"slices"

	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/internal/uninit"
)

// AdamStep implements mx.AdamStepper: one pass per element doing the composition's
// float32 operations in its order. Each product is converted to float32 explicitly, which
// in Go forbids fusing it into a multiply-add, so every operation rounds on its own as
// the separate ops do. The results are constants (the optimizer is never differentiated).
func (e *Engine) AdamStep(hp, hg, hm, hv mx.Handle, c mx.AdamConstants) (mx.Handle, mx.Handle, mx.Handle) {
	np, nm, nv := e.AdamStepAll([]mx.Handle{hp}, []mx.Handle{hg}, []mx.Handle{hm}, []mx.Handle{hv}, c)
	return np[0], nm[0], nv[0]
}

// AdamStepAll implements mx.AdamStepperAll: AdamStep's element loop over the elements of
// all the parameters, laid end to end, in one parallel region (bitwise AdamStep's: each
// element's operations do not depend on where the region's chunks fall).
func (e *Engine) AdamStepAll(hp, hg, hm, hv []mx.Handle, c mx.AdamConstants) (newP, newM, newV []mx.Handle) {
	type arrays struct{ p, g, m, v, np, nm, nv []float32 }
	ts := make([]arrays, len(hp))
	start := make([]int, len(hp)+1) // parameter i's elements are start[i]..start[i+1] end to end
	for i := range hp {
		p := tt(hp[i]).f32()
		n := len(p)
		ts[i] = arrays{p: p, g: tt(hg[i]).f32(), m: tt(hm[i]).f32(), v: tt(hv[i]).f32(),
			np: uninit.Float32s(n), nm: uninit.Float32s(n), nv: uninit.Float32s(n)}
		start[i+1] = start[i] + n
	}
	parallelFor(start[len(hp)], 16, func(lo, hi int) {
		i, _ := slices.BinarySearch(start, lo+1)
		for i--; lo < hi; i++ {
			a, off := &ts[i], start[i]
			end := min(hi, start[i+1])
			adamRange(a.p, a.g, a.m, a.v, a.np, a.nm, a.nv, lo-off, end-off, c)
			lo = end
		}
	})
	newP, newM, newV = make([]mx.Handle, len(hp)), make([]mx.Handle, len(hp)), make([]mx.Handle, len(hp))
	for i := range hp {
		shape := tt(hp[i]).shape
		newP[i], newM[i], newV[i] = fromF32(shape, mx.Float32, ts[i].np), fromF32(shape, mx.Float32, ts[i].nm), fromF32(shape, mx.Float32, ts[i].nv)
	}
	return newP, newM, newV
}

// adamRange is the update of elements lo..hi−1 (see AdamStep).
func adamRange(p, g, m, v, np, nm, nv []float32, lo, hi int, c mx.AdamConstants) {
	for i := lo; i < hi; i++ {
		pi, gi := p[i], g[i]
		if c.HasDecay {
			pi = float32(pi * c.Decay)
		}
		mi := float32(m[i]*c.B1) + float32(gi*c.OneMinusB1)
		g2 := float32(gi * gi)
		vi := float32(v[i]*c.B2) + float32(g2*c.OneMinusB2)
		num := float32(c.LR * mi)
		den := float32(math.Sqrt(float64(vi))) + c.Eps
		np[i] = pi - float32(num/den)
		nm[i], nv[i] = mi, vi
	}
}
