package goeng

import (
	"math"

	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/internal/uninit"
)

// AdamStep implements mx.AdamStepper: one pass per element doing the composition's
// float32 operations in its order. Each product is converted to float32 explicitly, which
// in Go forbids fusing it into a multiply-add, so every operation rounds on its own as
// the separate ops do. The results are constants (the optimizer is never differentiated).
func (e *Engine) AdamStep(hp, hg, hm, hv mx.Handle, c mx.AdamConstants) (mx.Handle, mx.Handle, mx.Handle) {
	p, g, m, v := tt(hp).f32(), tt(hg).f32(), tt(hm).f32(), tt(hv).f32()
	n := len(p)
	np, nm, nv := uninit.Float32s(n), uninit.Float32s(n), uninit.Float32s(n)
	parallelFor(n, 16, func(lo, hi int) {
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
	})
	shape := tt(hp).shape
	return fromF32(shape, mx.Float32, np), fromF32(shape, mx.Float32, nm), fromF32(shape, mx.Float32, nv)
}
