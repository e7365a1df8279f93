package goeng

import (
	"math"
	"slices"

	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/internal/uninit"
)

// GELU-tanh is 0.5·x·(1 + tanh u), u = √(2/π)·(x + 0.044715·x³). Both the value and
// the derivative are written with s = σ(2u) = 0.5·(1 + tanh u) = 1/(1 + e^(−2u)):
//
//	GELU(x) = x·s,   GELU′(x) = s + x·s·(1 − s)·2√(2/π)·(1 + 3·0.044715·x²),
//
// the same functions without the cancellation in 1 + tanh u for negative u. They are
// evaluated in float32, op by op in a fixed order, around expPoly (Cephes' expf: a
// rounding to n·ln2 and a degree-7 polynomial, within an ulp or two), so that the AVX2
// kernels (gelu_amd64.s: eight lanes of the same operations, multiplies and adds rounded
// separately) and this portable code give the same bits, and stay within a few float32
// ulps of the float64 functions (TestGELUTanhAccuracy). The tails are exact: −2u > 87
// (x below about −10) makes s = 0, GELU(x) = −0 and GELU′ = 0; −2u < −87 makes e^(−2u)
// vanish next to 1, so s = 1, GELU(x) = x and GELU′ = 1.

// The constants in float32, as the kernels load them.
const (
	geluC   = float32(0.7978845608028654) // √(2/π)
	geluA   = float32(0.044715)
	gelu3A  = float32(3 * 0.044715)
	gelu2C  = float32(2 * 0.7978845608028654)
	expClip = float32(87)
	log2e   = float32(1.44269504088896341)
	expC1   = float32(0.693359375)
	expC2   = float32(-2.12194440e-4)
	expP0   = float32(1.9875691500e-4)
	expP1   = float32(1.3981999507e-3)
	expP2   = float32(8.3334519073e-3)
	expP3   = float32(4.1665795894e-2)
	expP4   = float32(1.6666665459e-1)
	expP5   = float32(5.0000001201e-1)
)

// expPoly is e^x for |x| ≤ 87 (Cephes' expf). Every product is converted on its own so
// no compiler fuses a multiply-add: the kernels round the same way.
func expPoly(x float32) float32 {
	fx := float32(math.RoundToEven(float64(float32(x * log2e))))
	r := x - float32(fx*expC1)
	r = r - float32(fx*expC2)
	zz := float32(r * r)
	y := float32(expP0*r) + expP1
	y = float32(y*r) + expP2
	y = float32(y*r) + expP3
	y = float32(y*r) + expP4
	y = float32(y*r) + expP5
	y = float32(y*zz) + r
	y = y + 1
	return float32(y * math.Float32frombits(uint32(int32(fx)+127)<<23))
}

// tanhF32 is tanh in float32 (Cephes' tanhf, within about two float32 ulps of the float64
// function; TestTanhAccuracy): for |x| < 0.625 the odd polynomial x + x³·P(x²), beyond it
// 1 − 2/(e^(2|x|) + 1) with expPoly, and ±1 past |x| = 9, where tanh rounds to ±1 in
// float32. It costs a few nanoseconds where math.Tanh in float64 cost about twenty
// (the softcap of the logits is one call over every scored row and the vocabulary).
func tanhF32(x float32) float32 {
	z := x
	if z < 0 {
		z = -z
	}
	if z >= 0.625 {
		r := float32(1)
		if z <= 9 {
			r = 1 - 2/(expPoly(2*z)+1)
		}
		if x < 0 {
			r = -r
		}
		return r
	}
	if x == 0 {
		return x // ±0 (x + x³·P would make −0 into +0)
	}
	// NaN lands here too (every comparison is false) and stays NaN.
	z2 := float32(x * x)
	p := float32(-5.70498872745e-3*z2) + 2.06390887954e-2
	p = float32(p*z2) - 5.37397155531e-2
	p = float32(p*z2) + 1.33314422036e-1
	p = float32(p*z2) - 3.33332819422e-1
	return float32(float32(p*z2)*x) + x
}

// tanhRows sets out[i] = tanhF32(x[i]), the leading multiples of 8 with the AVX2 kernel
// (the same operations lane by lane) where built.
func tanhRows(out, x []float32) {
	n := len(x) / 8 * 8
	if n > 0 && geluAVX2 {
		tanhKernel(&out[0], &x[0], n)
	} else {
		n = 0
	}
	for i := n; i < len(x); i++ {
		out[i] = tanhF32(x[i])
	}
}

// geluSigma is s = 1/(1 + e^(−2u)) for x.
func geluSigma(x float32) float32 {
	x2 := float32(x * x)
	t := x + float32(geluA*float32(x2*x))
	z := -2 * float32(geluC*t)
	if z > expClip {
		return 0
	}
	return 1 / (1 + expPoly(max(z, -expClip)))
}

func geluTanh(x float32) float32 { return float32(x * geluSigma(x)) }

// geluGradFrom is GELU′(x) given s.
func geluGradFrom(x, s float32) float32 {
	q := 1 + float32(gelu3A*float32(x*x))
	q = float32(gelu2C * q)
	p := float32(float32(x*s) * (1 - s))
	return s + float32(p*q)
}

func geluTanhGrad(x float32) float32 { return geluGradFrom(x, geluSigma(x)) }

// geluRows sets out[i] = GELU(x[i]).
func geluRows(out, x []float32) {
	n := len(x) / 8 * 8
	if n > 0 && geluAVX2 {
		geluKernel(&out[0], &x[0], n)
	} else {
		n = 0
	}
	for i := n; i < len(x); i++ {
		out[i] = geluTanh(x[i])
	}
}

// geluGradRows sets out[i] = g[i]·GELU′(x[i]).
func geluGradRows(out, x, g []float32) {
	n := len(x) / 8 * 8
	if n > 0 && geluAVX2 {
		geluGradKernel(&out[0], &x[0], &g[0], n)
	} else {
		n = 0
	}
	for i := n; i < len(x); i++ {
		out[i] = g[i] * geluTanhGrad(x[i])
	}
}

// gegluRows sets out[i] = GELU(gate[i])·up[i].
func gegluRows(out, gate, up []float32) {
	n := len(gate) / 8 * 8
	if n > 0 && geluAVX2 {
		gegluKernel(&out[0], &gate[0], &up[0], n)
	} else {
		n = 0
	}
	for i := n; i < len(gate); i++ {
		out[i] = geluTanh(gate[i]) * up[i]
	}
}

// gegluGradRows sets dg[i] = (ct[i]·up[i])·GELU′(gate[i]) and du[i] = ct[i]·GELU(gate[i]).
func gegluGradRows(dg, du, gate, up, ct []float32) {
	n := len(gate) / 8 * 8
	if n > 0 && geluAVX2 {
		gegluGradKernel(&dg[0], &du[0], &gate[0], &up[0], &ct[0], n)
	} else {
		n = 0
	}
	for i := n; i < len(gate); i++ {
		x := gate[i]
		s := geluSigma(x)
		dg[i] = float32(ct[i]*up[i]) * geluGradFrom(x, s)
		du[i] = ct[i] * float32(x*s)
	}
}

// parallelRows runs f over [0, n) in chunks that are multiples of 8 (whole vectors).
func parallelRows(n int, f func(lo, hi int)) {
	blocks := (n + 255) / 256
	parallelFor(blocks, 256*24, func(lo, hi int) { f(lo*256, min(hi*256, n)) })
}

// GeGLU implements mx.Engine: gelu_tanh(gate)·up in one pass, keeping no temporary;
// the VJP recomputes s from gate: d gate = g·up·GELU′(gate), d up = g·GELU(gate).
func (e *Engine) GeGLU(hg, hu mx.Handle) mx.Handle {
	gate, up := tt(hg), tt(hu)
	gv, uv := gate.f32(), up.f32()
	out := uninit.Float32s(len(gv))
	parallelRows(len(gv), func(lo, hi int) { gegluRows(out[lo:hi], gv[lo:hi], uv[lo:hi]) })
	res := fromF32(gate.shape, mx.PromoteTypes(gate.dt, up.dt), out)
	return record(res, "geglu", []*tensor{gate, up}, func(g *tensor) []*tensor {
		ct := g.f32()
		dg, du := uninit.Float32s(len(gv)), uninit.Float32s(len(gv))
		parallelRows(len(gv), func(lo, hi int) { gegluGradRows(dg[lo:hi], du[lo:hi], gv[lo:hi], uv[lo:hi], ct[lo:hi]) })
		res := []*tensor{nil, nil}
		if gate.node != nil {
			res[0] = fromF32(gate.shape, mx.Float32, dg)
		}
		if up.node != nil {
			res[1] = fromF32(up.shape, mx.Float32, du)
		}
		return res
	})
}

// GeGLUSplit implements mx.GeGLUSplitter: GeGLU of the halves of each row of x [..., 2I]
// in one pass, the same elementwise computation as GeGLU of the two slices. Its VJP writes
// d gate and d up into the two halves of one [..., 2I] cotangent, where the slices' VJPs
// would each allocate a zero-padded one and the backward add them.
func (e *Engine) GeGLUSplit(hx mx.Handle) mx.Handle {
	x := tt(hx)
	nd := len(x.shape)
	w := x.shape[nd-1]
	half := w / 2
	rows := x.size() / max(w, 1)
	xv := x.f32()
	out := uninit.Float32s(rows * half)
	parallelFor(rows, 24*half, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			gegluRows(out[r*half:(r+1)*half], xv[r*w:r*w+half], xv[r*w+half:(r+1)*w])
		}
	})
	shape := slices.Clone(x.shape)
	shape[nd-1] = half
	res := fromF32(shape, x.dt, out)
	return record(res, "geglu_split", []*tensor{x}, func(g *tensor) []*tensor {
		ct := g.f32()
		dx := uninit.Float32s(len(xv))
		parallelFor(rows, 24*half, func(lo, hi int) {
			for r := lo; r < hi; r++ {
				row := dx[r*w : (r+1)*w]
				gegluGradRows(row[:half], row[half:], xv[r*w:r*w+half], xv[r*w+half:(r+1)*w], ct[r*half:(r+1)*half])
			}
		})
		return []*tensor{fromF32(x.shape, mx.Float32, dx)}
	})
}
