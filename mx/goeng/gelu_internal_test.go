package goeng

import (
	"fmt"
	"math"
	"slices"
	"testing"
)

// TestGELUTanhAccuracy: on a dense sweep of [−12, 12] the float32 GELU-tanh and its
// derivative stay within |Δ| ≤ 4e-6·|f| + 1e-7 of the float64 formulas — a few float32
// ulps, plus the rounding of u itself in the far negative tail (where GELU ≈ x·e^(2u)
// and a 1-ulp change of u ≈ −30 moves e^(2u) by 4e-6) and, for GELU′, of the two terms
// that cancel where it crosses zero near x = −0.75 — and exp32 within 2 ulps of
// math.Exp on its whole range.
func TestGELUTanhAccuracy(t *testing.T) {
	const c, a = 0.7978845608028654, 0.044715
	ref := func(x float64) (y, dy float64) {
		u := c * (x + a*x*x*x)
		th := math.Tanh(u)
		return 0.5 * x * (1 + th), 0.5*(1+th) + 0.5*x*(1-th*th)*c*(1+3*a*x*x)
	}
	for x := float32(-12); x <= 12; x += 0.00137 {
		y, dy := ref(float64(x))
		if gy := float64(geluTanh(x)); !(math.Abs(gy-y) <= 4e-6*math.Abs(y)+1e-7) {
			t.Fatalf("GELU(%v) = %v, want %v", x, gy, y)
		}
		if gd := float64(geluTanhGrad(x)); !(math.Abs(gd-dy) <= 4e-6*math.Abs(dy)+1e-7) {
			t.Fatalf("GELU′(%v) = %v, want %v", x, gd, dy)
		}
	}
	for _, c := range []struct{ x, y, dy float32 }{{100, 100, 1}, {-100, 0, 0}, {0, 0, 0.5}} {
		if y, d := geluTanh(c.x), geluTanhGrad(c.x); y != c.y || d != c.dy {
			t.Errorf("x = %v: GELU %v, GELU′ %v; want %v, %v", c.x, y, d, c.y, c.dy)
		}
	}
	if y := geluTanh(-100); !math.Signbit(float64(y)) {
		t.Errorf("GELU(−100) = %v, want −0", y)
	}
	var worstE float64
	for x := float32(-87); x <= 87; x += 0.0071 {
		e := math.Abs(float64(expPoly(x))-math.Exp(float64(x))) / math.Exp(float64(x))
		worstE = max(worstE, e)
	}
	if worstE > 2.4e-7 {
		t.Errorf("expPoly: worst relative error %.3g, want ≤ 2 ulps", worstE)
	}
	if expPoly(0) != 1 {
		t.Errorf("expPoly(0) = %v", expPoly(0))
	}
}

// TestGELUKernels: the eight-lane kernels (where built) give the portable code's bits on
// a sweep that covers both tails, zero, and lengths that are not multiples of 8.
func TestGELUKernels(t *testing.T) {
	var x, u, ct []float32
	for v := float32(-14); v <= 14; v += 0.00731 {
		x = append(x, v)
		u = append(u, 0.5-v/7)
		ct = append(ct, 1+v/3)
	}
	x = append(x, 0, float32(math.Copysign(0, -1)), 1e-30, -1e-30, 100, -100, float32(math.Inf(1)), float32(math.NaN()))
	for len(u) < len(x) {
		u, ct = append(u, 1), append(ct, -2)
	}
	x, u, ct = x[:len(x)-3], u[:len(x)-3], ct[:len(x)-3] // an odd length
	// Lengths that take the eight-lane kernel and the Go loop after it (23, 31), the
	// kernel alone (8), the Go loop alone (5), and the whole sweep.
	for _, n := range []int{len(x), 23, 31, 8, 5} {
		t.Run(fmt.Sprint(n), func(t *testing.T) { checkGELUKernels(t, x[:n], u[:n], ct[:n]) })
	}
	// The special values (the tail trimmed above drops ±Inf and NaN) in the kernel's lanes
	// and the Go loop's.
	special := []float32{float32(math.Inf(1)), float32(math.NaN()), -100, float32(math.Inf(-1)), 100, 0, -30, 30}
	var xs []float32
	for range 4 {
		xs = append(xs, special...)
	}
	xs = xs[:31]
	t.Run("special", func(t *testing.T) { checkGELUKernels(t, xs, u[:31], ct[:31]) })
}

// checkGELUKernels wants the row functions' bits to be the scalar functions' on x, u, ct.
// A NaN's payload is whichever operand's the hardware passes on, which the compiler's
// order of a commutative operation decides even in Go code, so NaNs compare as one value.
func checkGELUKernels(t *testing.T, x, u, ct []float32) {
	n := len(x)
	bits := func(f float32) uint32 {
		if f != f {
			return 0x7fc00000
		}
		return math.Float32bits(f)
	}
	want := func(f func(i int) float32) []uint32 {
		out := make([]uint32, n)
		for i := range out {
			out[i] = bits(f(i))
		}
		return out
	}
	got := func(v []float32) []uint32 {
		out := make([]uint32, len(v))
		for i, f := range v {
			out[i] = bits(f)
		}
		return out
	}
	o1, o2, o3, o4 := make([]float32, n), make([]float32, n), make([]float32, n), make([]float32, n)
	geluRows(o1, x)
	if !slices.Equal(got(o1), want(func(i int) float32 { return geluTanh(x[i]) })) {
		t.Error("geluRows differs from geluTanh")
	}
	geluGradRows(o1, x, ct)
	if !slices.Equal(got(o1), want(func(i int) float32 { return ct[i] * geluTanhGrad(x[i]) })) {
		t.Error("geluGradRows differs from geluTanhGrad")
	}
	gegluRows(o2, x, u)
	if !slices.Equal(got(o2), want(func(i int) float32 { return geluTanh(x[i]) * u[i] })) {
		t.Error("gegluRows differs")
	}
	gegluGradRows(o3, o4, x, u, ct)
	if !slices.Equal(got(o3), want(func(i int) float32 { return float32(ct[i]*u[i]) * geluTanhGrad(x[i]) })) {
		t.Error("gegluGradRows: d gate differs")
	}
	if !slices.Equal(got(o4), want(func(i int) float32 { return ct[i] * geluTanh(x[i]) })) {
		t.Error("gegluGradRows: d up differs")
	}
}

// TestTanhAccuracy: tanhF32 within about two float32 ulps of the float64 function across
// both branches and their seam at 0.625, the saturation at 9, ±0, ±Inf and NaN.
func TestTanhAccuracy(t *testing.T) {
	worst, at := 0.0, float32(0)
	for x := float32(-12); x <= 12; x += 0.000731 {
		want := math.Tanh(float64(x))
		got := float64(tanhF32(x))
		// Relative to the result, or to one ulp of 2⁻²⁴ near zero's neighbourhood.
		if e := math.Abs(got-want) / math.Max(math.Abs(want), 1e-30); e > worst {
			worst, at = e, x
		}
	}
	if worst > 2.5e-7 {
		t.Errorf("worst relative error %.3g at x = %v, want ≤ about 2 ulps", worst, at)
	}
	for _, c := range []struct{ x, want float32 }{{0.625, float32(math.Tanh(0.625))}, {9, 1}, {20, 1}, {-20, -1}} {
		if got := tanhF32(c.x); math.Abs(float64(got-c.want)) > 2.5e-7*math.Abs(float64(c.want)) {
			t.Errorf("tanh(%v) = %v, want %v", c.x, got, c.want)
		}
	}
	inf := float32(math.Inf(1))
	if tanhF32(inf) != 1 || tanhF32(-inf) != -1 || !math.IsNaN(float64(tanhF32(float32(math.NaN())))) {
		t.Errorf("tanh(±Inf, NaN) = %v, %v, %v", tanhF32(inf), tanhF32(-inf), tanhF32(float32(math.NaN())))
	}
	if z := tanhF32(float32(math.Copysign(0, -1))); z != 0 || !math.Signbit(float64(z)) {
		t.Errorf("tanh(−0) = %v, want −0", z)
	}
}

// TestTanhKernel: the eight-lane kernel (where built) gives tanhF32's bits on a sweep over
// both branches and their seams (0.625, 9), ±0, tiny values, both infinities and NaN, with
// a length that is not a multiple of 8.
func TestTanhKernel(t *testing.T) {
	// The specials first, so that the kernel (not the tail loop) sees them.
	x := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.Copysign(0, -1)), 0, -1e-40, 9, 9.5}
	for v := float32(-12); v <= 12; v += 0.000917 {
		x = append(x, v)
	}
	x = append(x, 0.625, -0.625, 0.62499994, 9, -9, 9.000001, 0, float32(math.Copysign(0, -1)), 1e-30, -1e-30, 1e-45, 88, -88, 1e30)
	x = append(x, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()))
	out := make([]float32, len(x))
	tanhRows(out, x)
	for i, v := range x {
		if want := tanhF32(v); math.Float32bits(out[i]) != math.Float32bits(want) {
			t.Fatalf("tanh(%v) = %v (%#x), tanhF32 %v (%#x)", v, out[i], math.Float32bits(out[i]), want, math.Float32bits(want))
		}
	}
}

// BenchmarkGeGLURows is the bench preset's GeGLU over a step's rows (384 × 1024) on one
// goroutine, forward and backward.
func BenchmarkGeGLURows(b *testing.B) {
	const n = 384 * 1024
	x, u, ct := make([]float32, n), make([]float32, n), make([]float32, n)
	for i := range x {
		x[i], u[i], ct[i] = float32(i%2000)/100-10, float32(i%7)/7, float32(i%5)/5-0.5
	}
	out, out2 := make([]float32, n), make([]float32, n)
	b.Run("forward", func(b *testing.B) {
		for b.Loop() {
			gegluRows(out, x, u)
		}
		reportRowRate(b, n)
	})
	b.Run("backward", func(b *testing.B) {
		for b.Loop() {
			gegluGradRows(out, out2, x, u, ct)
		}
		reportRowRate(b, n)
	})
}

// reportRowRate reports n elements an iteration as billions a second.
func reportRowRate(b *testing.B, n int) {
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "Gelem/s")
}
