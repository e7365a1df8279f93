package goeng

import (
	"math"
	"testing"
)

// TestGELUTanhAccuracy: on a dense sweep of [−12, 12] the float32 GELU-tanh and its
// derivative stay within |Δ| ≤ 4e-6·|f| + 1e-7 of the float64 formulas — a few float32
// ulps, plus the rounding of u itself in the far negative tail (where GELU ≈ x·e^(2u)
// and a 1-ulp change of u ≈ −30 moves e^(2u) by 4e-6) and, for GELU′, of the two terms
// that cancel where it crosses zero near x = −0.75 — and exp32 within 2 ulps of
// math.Exp on its whole range.
func TestGELUTanhAccuracy(t *testing.T) {
	ref := func(x float64) (y, dy float64) {
		u := geluC * (x + geluA*x*x*x)
		th := math.Tanh(u)
		return 0.5 * x * (1 + th), 0.5*(1+th) + 0.5*x*(1-th*th)*geluC*(1+3*geluA*x*x)
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
	for x := float32(-87.3); x <= 88.7; x += 0.0071 {
		e := math.Abs(float64(exp32(x))-math.Exp(float64(x))) / math.Exp(float64(x))
		worstE = max(worstE, e)
	}
	if worstE > 2.4e-7 {
		t.Errorf("exp32: worst relative error %.3g, want ≤ 2 ulps", worstE)
	}
	if !math.IsInf(float64(exp32(89)), 1) || exp32(-88) != 0 || exp32(0) != 1 || !math.IsNaN(float64(exp32(float32(math.NaN())))) {
		t.Errorf("exp32 edges: %v %v %v %v", exp32(89), exp32(-88), exp32(0), exp32(float32(math.NaN())))
	}
}
