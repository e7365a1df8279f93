package goeng

import (
	"math"

	"github.com/dgtune/dgtune/mx"
)

// GELU-tanh constants: √(2/π) and the cubic coefficient.
const (
	geluC = 0.7978845608028654
	geluA = 0.044715
)

// GELU-tanh is 0.5·x·(1 + tanh u), u = √(2/π)·(x + 0.044715·x³). Both the value and
// the derivative are written with s = σ(2u) = 0.5·(1 + tanh u) = 1/(1 + e^(−2u)):
//
//	GELU(x) = x·s,   GELU′(x) = s + 2·x·s·(1 − s)·√(2/π)·(1 + 3·0.044715·x²),
//
// the same functions without the cancellation in 1 + tanh u for negative u. They are
// evaluated in float32 around exp32 (a table-driven exponential within 2 ulp), a few
// nanoseconds an element where float64 exp and tanh took twenty, and stay within a
// few float32 ulps of the float64 values (TestGELUTanhAccuracy). The tails are exact:
// e^(−2u) = +Inf below about x = −9.4 makes s = 0, GELU(x) = −0 and GELU′ = 0; s = 1
// above about x = 5.4 makes GELU(x) = x and GELU′ = 1.

// geluSigma is s = 1/(1 + e^(−2u)) for x.
func geluSigma(x float32) float32 {
	u := geluC * (x + geluA*x*x*x)
	return 1 / (1 + exp32(-2*u))
}

func geluTanh(x float32) float32 { return x * geluSigma(x) }

func geluTanhGrad(x float32) float32 {
	s := geluSigma(x)
	return s + 2*x*s*(1-s)*geluC*(1+3*geluA*x*x)
}

// exp32 is e^x in float32 within 2 ulps (expRow's method: x = n·ln2/64 + r with
// |r| ≤ ln2/128, e^r by a quadratic, 2^(n/64) from a table and the exponent bits):
// +Inf above 88.72, 0 below −87.33 (no subnormals), NaN for NaN.
func exp32(x float32) float32 {
	const (
		scale = 64 / math.Ln2
		ln2hi = 0.693359375 / 64
		ln2lo = -2.12194440e-4 / 64
	)
	switch {
	case x > 88.72:
		return float32(math.Inf(1))
	case x < -87.33:
		return 0
	case x != x:
		return x
	}
	t := x * scale
	if t < 0 {
		t -= 0.5
	} else {
		t += 0.5
	}
	n := int32(t) // round half away from zero
	nf := float32(n)
	r := x - nf*ln2hi - nf*ln2lo
	p := 1 + r*(1+r*0.5)
	return p * exp2Frac[n&63] * math.Float32frombits(uint32(n>>6+127)<<23)
}

// GeGLU implements mx.Engine: gelu_tanh(gate)·up in one pass, keeping no temporary;
// the VJP recomputes s from gate: d gate = g·up·GELU′(gate), d up = g·GELU(gate).
func (e *Engine) GeGLU(hg, hu mx.Handle) mx.Handle {
	gate, up := tt(hg), tt(hu)
	gv, uv := gate.f32(), up.f32()
	out := make([]float32, len(gv))
	parallelFor(len(gv), 24, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			out[i] = geluTanh(gv[i]) * uv[i]
		}
	})
	res := fromF32(gate.shape, mx.PromoteTypes(gate.dt, up.dt), out)
	return record(res, "geglu", []*tensor{gate, up}, func(g *tensor) []*tensor {
		ct := g.f32()
		var dg, du []float32
		if gate.node != nil {
			dg = make([]float32, len(gv))
		}
		if up.node != nil {
			du = make([]float32, len(gv))
		}
		parallelFor(len(gv), 32, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				x := gv[i]
				s := geluSigma(x)
				if dg != nil {
					dg[i] = ct[i] * uv[i] * (s + 2*x*s*(1-s)*geluC*(1+3*geluA*x*x))
				}
				if du != nil {
					du[i] = ct[i] * (x * s)
				}
			}
		})
		res := []*tensor{nil, nil}
		if dg != nil {
			res[0] = fromF32(gate.shape, mx.Float32, dg)
		}
		if du != nil {
			res[1] = fromF32(up.shape, mx.Float32, du)
		}
		return res
	})
}
