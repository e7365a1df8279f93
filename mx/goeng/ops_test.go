package goeng_test

import (
	"math"
	"slices"
	"testing"

	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
)

// Forward tests of every op in the mx API on the go engine. Expected values are worked
// out by hand in the comments; nothing here is computed by another call into mx.

const (
	ln2 = 0.6931471805599453
	ln3 = 1.0986122886681098
	e1  = 2.718281828459045
)

func TestUnary(t *testing.T) {
	e := mxtest.Go(t)
	x := func(v ...float32) *mx.Array { return fa(e, v, len(v)) }
	xi := func(v ...int32) *mx.Array { return ia(e, v, len(v)) }
	pi := float32(math.Pi)
	runCases(t, []opCase{
		{name: "negative", got: func() *mx.Array { return mx.Negative(x(1, -2, 0)) }, dt: mx.Float32, shape: []int{3}, want: []float32{-1, 2, 0}},
		// exp(±1) = e, 1/e.
		{name: "exp", got: func() *mx.Array { return mx.Exp(x(0, 1, -1, ninf)) }, dt: mx.Float32, shape: []int{4}, want: []float32{1, e1, 1 / e1, 0}, tol: 1e-6},
		// log e = 1, log ½ = −ln 2, log 0 = −∞, log −1 = NaN.
		{name: "log", got: func() *mx.Array { return mx.Log(x(1, e1, 0.5, 0, -1)) }, dt: mx.Float32, shape: []int{5}, want: []float32{0, 1, -ln2, ninf, nan}, tol: 1e-6},
		{name: "sqrt", got: func() *mx.Array { return mx.Sqrt(x(0, 4, 2.25, -1)) }, dt: mx.Float32, shape: []int{4}, want: []float32{0, 2, 1.5, nan}},
		// 1/√4 = ½, 1/√¼ = 2, 1/√0 = +∞.
		{name: "rsqrt", got: func() *mx.Array { return mx.Rsqrt(x(4, 0.25, 0)) }, dt: mx.Float32, shape: []int{3}, want: []float32{0.5, 2, inf}},
		// tanh x = (e^2x − 1)/(e^2x + 1); at x = ±ln3/2, e^2x = 3^±1 gives ±½.
		{name: "tanh", got: func() *mx.Array { return mx.Tanh(x(0, ln3/2, -ln3/2, 100)) }, dt: mx.Float32, shape: []int{4}, want: []float32{0, 0.5, -0.5, 1}, tol: 1e-6},
		// σ(ln3) = 1/(1 + 1/3) = ¾, σ(−ln3) = ¼; saturates without NaN at ±100.
		{name: "sigmoid", got: func() *mx.Array { return mx.Sigmoid(x(0, ln3, -ln3, 100, -100)) }, dt: mx.Float32, shape: []int{5}, want: []float32{0.5, 0.75, 0.25, 1, 0}, tol: 1e-6},
		{name: "abs", got: func() *mx.Array { return mx.Abs(x(-3, 0, 2.5)) }, dt: mx.Float32, shape: []int{3}, want: []float32{3, 0, 2.5}},
		{name: "square", got: func() *mx.Array { return mx.Square(x(-3, 1.5)) }, dt: mx.Float32, shape: []int{2}, want: []float32{9, 2.25}},
		// sin(π/2) = 1, sin(π/6) = ½.
		{name: "sin", got: func() *mx.Array { return mx.Sin(x(0, pi/2, pi/6, -pi/2)) }, dt: mx.Float32, shape: []int{4}, want: []float32{0, 1, 0.5, -1}, tol: 1e-6},
		// cos π = −1, cos(π/3) = ½.
		{name: "cos", got: func() *mx.Array { return mx.Cos(x(0, pi, pi/3)) }, dt: mx.Float32, shape: []int{3}, want: []float32{1, -1, 0.5}, tol: 1e-6},
		{name: "floor", got: func() *mx.Array { return mx.Floor(x(-1.5, -1, 0.5, 2.999)) }, dt: mx.Float32, shape: []int{4}, want: []float32{-2, -1, 0, 2}},
		// erf(0.5) = 0.5204998778130465 (tabulated); erf(±∞) = ±1.
		{name: "erf", got: func() *mx.Array { return mx.Erf(x(0, 0.5, inf, ninf)) }, dt: mx.Float32, shape: []int{4}, want: []float32{0, 0.52049988, 1, -1}, tol: 1e-6},
		// log1p(e−1) = 1; log1p(1e-10) = 1e-10 to first order (log of float32(1+1e-10) would be 0).
		{name: "log1p", got: func() *mx.Array { return mx.Log1p(x(0, e1-1, -1, 1e-10)) }, dt: mx.Float32, shape: []int{4}, want: []float32{0, 1, ninf, 1e-10}, tol: 1e-6},
		{name: "log1p tiny relative", got: func() *mx.Array { return mx.MulScalar(mx.Log1p(x(1e-10)), 1e10) }, dt: mx.Float32, shape: []int{1}, want: []float32{1}, tol: 1e-6},
		{name: "reciprocal", got: func() *mx.Array { return mx.Reciprocal(x(2, -4, 0)) }, dt: mx.Float32, shape: []int{3}, want: []float32{0.5, -0.25, inf}},
		// GELU-tanh 0.5·x·(1 + tanh u), u = √(2/π)·(x + 0.044715·x³), √(2/π) = 0.7978845608:
		//   x = 1: u = 0.7978845608·1.044715 = 0.8335619689, tanh u = 0.6823839812, y = 0.8411919906;
		//   x = 2: u = 0.7978845608·2.35772 = 1.8811883867, tanh u = 0.9545976941, y = 1.9545976941;
		//   odd u and GELU(x) − GELU(−x) = x give y(−1) = −0.1588080094, y(−2) = −0.0454023059.
		// The tails saturate to x and −0 without NaN (1 + tanh u would cancel to 0 at −100).
		{name: "gelu_tanh", got: func() *mx.Array { return mx.GELUTanh(x(0, 1, -1, 2, -2, 100, -100)) }, dt: mx.Float32, shape: []int{7},
			want: []float32{0, 0.8411919906, -0.1588080094, 1.9545976941, -0.0454023059, 100, 0}, tol: 1e-6},
		// bf16 keeps its dtype: bf16(1.9545977) = 1.953125 (8 significant bits: 1 + 122/128).
		{name: "gelu_tanh bf16", got: func() *mx.Array { return mx.GELUTanh(mx.AsType(x(0, 2), mx.BFloat16)) }, dt: mx.BFloat16, shape: []int{2}, want: []float32{0, 1.953125}},
		{name: "sign", got: func() *mx.Array { return mx.Sign(x(-3, 0, 2)) }, dt: mx.Float32, shape: []int{3}, want: []float32{-1, 0, 1}},
		{name: "isnan", got: func() *mx.Array { return mx.IsNaN(x(nan, inf, ninf, 0, 1)) }, dt: mx.Bool, shape: []int{5}, want: []bool{true, false, false, false, false}},
		{name: "isinf", got: func() *mx.Array { return mx.IsInf(x(nan, inf, ninf, 0, 1)) }, dt: mx.Bool, shape: []int{5}, want: []bool{false, true, true, false, false}},
		{name: "logical_not float", got: func() *mx.Array { return mx.LogicalNot(x(0, 2, -1)) }, dt: mx.Bool, shape: []int{3}, want: []bool{true, false, false}},
		{name: "logical_not bool", got: func() *mx.Array { return mx.LogicalNot(ba(e, []bool{true, false}, 2)) }, dt: mx.Bool, shape: []int{2}, want: []bool{false, true}},
		{name: "2-D shape kept", got: func() *mx.Array { return mx.Square(fa(e, []float32{1, 2, 3, 4, 5, 6}, 2, 3)) }, dt: mx.Float32, shape: []int{2, 3}, want: []float32{1, 4, 9, 16, 25, 36}},
		// Integer inputs: sign-like ops stay integer, transcendental ones go to float32.
		{name: "negative int", got: func() *mx.Array { return mx.Negative(xi(-3, 0, 2)) }, dt: mx.Int32, shape: []int{3}, want: []int32{3, 0, -2}},
		{name: "abs int", got: func() *mx.Array { return mx.Abs(xi(-3, 0, 2)) }, dt: mx.Int32, shape: []int{3}, want: []int32{3, 0, 2}},
		{name: "square int", got: func() *mx.Array { return mx.Square(xi(-3, 0, 2)) }, dt: mx.Int32, shape: []int{3}, want: []int32{9, 0, 4}},
		{name: "sign int", got: func() *mx.Array { return mx.Sign(xi(-3, 0, 2)) }, dt: mx.Int32, shape: []int{3}, want: []int32{-1, 0, 1}},
		{name: "floor int", got: func() *mx.Array { return mx.Floor(xi(-3, 0, 2)) }, dt: mx.Int32, shape: []int{3}, want: []int32{-3, 0, 2}},
		{name: "exp int", got: func() *mx.Array { return mx.Exp(xi(0, 1)) }, dt: mx.Float32, shape: []int{2}, want: []float32{1, e1}, tol: 1e-6},
		{name: "sqrt int", got: func() *mx.Array { return mx.Sqrt(xi(4, 9)) }, dt: mx.Float32, shape: []int{2}, want: []float32{2, 3}},
		{name: "gelu_tanh int", got: func() *mx.Array { return mx.GELUTanh(xi(0, 1)) }, dt: mx.Float32, shape: []int{2}, want: []float32{0, 0.8411919906}, tol: 1e-6},
		{name: "isnan int", got: func() *mx.Array { return mx.IsNaN(xi(0, -1)) }, dt: mx.Bool, shape: []int{2}, want: []bool{false, false}},
		{name: "isinf int", got: func() *mx.Array { return mx.IsInf(xi(0, math.MaxInt32)) }, dt: mx.Bool, shape: []int{2}, want: []bool{false, false}},
		{name: "logical_not int", got: func() *mx.Array { return mx.LogicalNot(xi(0, 5)) }, dt: mx.Bool, shape: []int{2}, want: []bool{true, false}},
		// Half inputs keep their dtype: exp(0) = 1 and −2² = 4 are exact in bf16.
		{name: "square bf16", got: func() *mx.Array { return mx.Square(mx.AsType(x(-2, 0), mx.BFloat16)) }, dt: mx.BFloat16, shape: []int{2}, want: []float32{4, 0}},
	})
}

func TestBinary(t *testing.T) {
	e := mxtest.Go(t)
	a23 := func() *mx.Array { return fa(e, []float32{1, 2, 3, 4, 5, 6}, 2, 3) }
	x := func(v ...float32) *mx.Array { return fa(e, v, len(v)) }
	xi := func(v ...int32) *mx.Array { return ia(e, v, len(v)) }
	// The sign table for floor semantics: a = q·b + r with q = ⌊a/b⌋ and r taking b's sign.
	//   a   b   q   r
	//   7   2   3   1
	//  −7   2  −4   1
	//   7  −2  −4  −1
	//  −7  −2   3  −1
	//   6   3   2   0
	//  −6   3  −2   0
	na := []int32{7, -7, 7, -7, 6, -6}
	nb := []int32{2, 2, -2, -2, 3, 3}
	runCases(t, []opCase{
		{name: "add scalar", got: func() *mx.Array { return mx.Add(a23(), mx.Scalar(e, 10, mx.Float32)) }, dt: mx.Float32, shape: []int{2, 3}, want: []float32{11, 12, 13, 14, 15, 16}},
		// Row [1, 10, 100] scales the columns.
		{name: "multiply row", got: func() *mx.Array { return mx.Multiply(a23(), x(1, 10, 100)) }, dt: mx.Float32, shape: []int{2, 3}, want: []float32{1, 20, 300, 4, 50, 600}},
		// Column [[1], [2]] is subtracted from each row.
		{name: "subtract column", got: func() *mx.Array { return mx.Subtract(a23(), fa(e, []float32{1, 2}, 2, 1)) }, dt: mx.Float32, shape: []int{2, 3}, want: []float32{0, 1, 2, 2, 3, 4}},
		// Outer sum [2,1] + [1,3] → [2,3]: out[i][j] = c[i] + r[j].
		{name: "add outer", got: func() *mx.Array { return mx.Add(fa(e, []float32{1, 2}, 2, 1), fa(e, []float32{10, 20, 30}, 1, 3)) }, dt: mx.Float32, shape: []int{2, 3}, want: []float32{11, 21, 31, 12, 22, 32}},
		// [2,1,2] ⊙ [3,1] → [2,3,2]: out[i][j][k] = x[i][k]·y[j].
		{name: "multiply 3-D", got: func() *mx.Array {
			return mx.Multiply(fa(e, []float32{1, 2, 3, 4}, 2, 1, 2), fa(e, []float32{1, 10, 100}, 3, 1))
		}, dt: mx.Float32, shape: []int{2, 3, 2}, want: []float32{1, 2, 10, 20, 100, 200, 3, 4, 30, 40, 300, 400}},
		{name: "divide", got: func() *mx.Array { return mx.Divide(x(1, 3, 1, -1), x(2, 2, 0, 0)) }, dt: mx.Float32, shape: []int{4}, want: []float32{0.5, 1.5, inf, ninf}},
		// True division of integers gives float32 (MLX promotes to at least float).
		{name: "divide int", got: func() *mx.Array { return mx.Divide(xi(7, -7), xi(2)) }, dt: mx.Float32, shape: []int{2}, want: []float32{3.5, -3.5}},
		// maximum/minimum propagate NaN.
		{name: "maximum", got: func() *mx.Array { return mx.Maximum(x(1, nan, 3, -1), x(2, 0, 3, nan)) }, dt: mx.Float32, shape: []int{4}, want: []float32{2, nan, 3, nan}},
		{name: "minimum", got: func() *mx.Array { return mx.Minimum(x(1, nan, 3), x(2, 0, 3)) }, dt: mx.Float32, shape: []int{3}, want: []float32{1, nan, 3}},
		{name: "maximum int", got: func() *mx.Array { return mx.Maximum(xi(-5, 7), xi(-6)) }, dt: mx.Int32, shape: []int{2}, want: []int32{-5, 7}},
		// 2³ = 8, 4^½ = 2, 9⁻¹ = 1/9, 0⁰ = 1.
		{name: "power", got: func() *mx.Array { return mx.Power(x(2, 4, 9, 0), x(3, 0.5, -1, 0)) }, dt: mx.Float32, shape: []int{4}, want: []float32{8, 2, 1.0 / 9, 1}, tol: 1e-7},
		{name: "power int", got: func() *mx.Array { return mx.Power(xi(2, 3, -2), xi(10, 3, 3)) }, dt: mx.Int32, shape: []int{3}, want: []int32{1024, 27, -8}},
		{name: "floor_divide int", got: func() *mx.Array { return mx.FloorDivide(xi(na...), xi(nb...)) }, dt: mx.Int32, shape: []int{6}, want: []int32{3, -4, -4, 3, 2, -2}},
		{name: "remainder int", got: func() *mx.Array { return mx.Remainder(xi(na...), xi(nb...)) }, dt: mx.Int32, shape: []int{6}, want: []int32{1, 1, -1, -1, 0, 0}},
		// Floats follow the same rule: 5.5/−2 = −2.75 → q = −3, r = 5.5 − 6 = −0.5, etc.
		{name: "floor_divide float", got: func() *mx.Array { return mx.FloorDivide(x(5.5, -5.5, 5.5, -5.5), x(2, 2, -2, -2)) }, dt: mx.Float32, shape: []int{4}, want: []float32{2, -3, -3, 2}},
		{name: "remainder float", got: func() *mx.Array { return mx.Remainder(x(5.5, -5.5, 5.5, -5.5), x(2, 2, -2, -2)) }, dt: mx.Float32, shape: []int{4}, want: []float32{1.5, 0.5, -0.5, -1.5}},
		// Remainder broadcast by a scalar: r ∈ [0, 3).
		{name: "remainder scalar", got: func() *mx.Array { return mx.Remainder(xi(-4, -3, -1, 0, 4), ia(e, []int32{3})) }, dt: mx.Int32, shape: []int{5}, want: []int32{2, 0, 2, 0, 1}},
		// Promotion: int32 + float32 → float32; bf16 + f16 → float32; int32 + int64 → int64.
		{name: "promote int float", got: func() *mx.Array { return mx.Add(xi(1, 2), x(0.5)) }, dt: mx.Float32, shape: []int{2}, want: []float32{1.5, 2.5}},
		{name: "promote bf16 f16", got: func() *mx.Array {
			return mx.Add(mx.AsType(x(1), mx.BFloat16), mx.AsType(x(2), mx.Float16))
		}, dt: mx.Float32, shape: []int{1}, want: []float32{3}},
		{name: "promote int32 int64", got: func() *mx.Array {
			return mx.Multiply(xi(3), mx.FromSlice(e, []int64{1 << 20}, []int{1}, mx.Int64))
		}, dt: mx.Int64, shape: []int{1}, want: []int32{3 << 20}},
		// Scalar helpers cast the scalar to the array's dtype: bf16(0.3) = 0.30078125
		// (0.3 = 1.0011001100…₂·2⁻²; 7 mantissa bits 0011010 after rounding up).
		{name: "mul scalar bf16", got: func() *mx.Array { return mx.MulScalar(mx.AsType(x(1), mx.BFloat16), 0.3) }, dt: mx.BFloat16, shape: []int{1}, want: []float32{0.30078125}},
		{name: "add scalar int", got: func() *mx.Array { return mx.AddScalar(xi(1, 2), 3) }, dt: mx.Int32, shape: []int{2}, want: []int32{4, 5}},
	})
}

func TestComparisons(t *testing.T) {
	e := mxtest.Go(t)
	a := func() *mx.Array { return fa(e, []float32{1, 2, 3, nan}, 4) }
	b := func() *mx.Array { return fa(e, []float32{2, 2, 2, nan}, 4) }
	p := func() *mx.Array { return ba(e, []bool{true, true, false, false}, 4) }
	q := func() *mx.Array { return ba(e, []bool{true, false, true, false}, 4) }
	// NaN compares false with everything, so only not_equal is true on the last lane.
	runCases(t, []opCase{
		{name: "equal", got: func() *mx.Array { return mx.Equal(a(), b()) }, dt: mx.Bool, shape: []int{4}, want: []bool{false, true, false, false}},
		{name: "not_equal", got: func() *mx.Array { return mx.NotEqual(a(), b()) }, dt: mx.Bool, shape: []int{4}, want: []bool{true, false, true, true}},
		{name: "less", got: func() *mx.Array { return mx.Less(a(), b()) }, dt: mx.Bool, shape: []int{4}, want: []bool{true, false, false, false}},
		{name: "less_equal", got: func() *mx.Array { return mx.LessEqual(a(), b()) }, dt: mx.Bool, shape: []int{4}, want: []bool{true, true, false, false}},
		{name: "greater", got: func() *mx.Array { return mx.Greater(a(), b()) }, dt: mx.Bool, shape: []int{4}, want: []bool{false, false, true, false}},
		{name: "greater_equal", got: func() *mx.Array { return mx.GreaterEqual(a(), b()) }, dt: mx.Bool, shape: []int{4}, want: []bool{false, true, true, false}},
		{name: "logical_and", got: func() *mx.Array { return mx.LogicalAnd(p(), q()) }, dt: mx.Bool, shape: []int{4}, want: []bool{true, false, false, false}},
		{name: "logical_or", got: func() *mx.Array { return mx.LogicalOr(p(), q()) }, dt: mx.Bool, shape: []int{4}, want: []bool{true, true, true, false}},
		// [[1], [3]] < [2] broadcasts to [2,1].
		{name: "less int broadcast", got: func() *mx.Array { return mx.Less(ia(e, []int32{1, 3}, 2, 1), ia(e, []int32{2}, 1)) }, dt: mx.Bool, shape: []int{2, 1}, want: []bool{true, false}},
		// Mixed int/float compares in float: 2 ≠ 2.5.
		{name: "equal int float", got: func() *mx.Array { return mx.Equal(ia(e, []int32{1, 2}, 2), fa(e, []float32{1, 2.5}, 2)) }, dt: mx.Bool, shape: []int{2}, want: []bool{true, false}},
		// Column vs row → [2,3] table of c[i] ≥ r[j].
		{name: "greater_equal outer", got: func() *mx.Array {
			return mx.GreaterEqual(fa(e, []float32{1, 2}, 2, 1), fa(e, []float32{0, 1, 2}, 3))
		}, dt: mx.Bool, shape: []int{2, 3}, want: []bool{true, true, false, true, true, true}},
	})
}

func TestWhere(t *testing.T) {
	e := mxtest.Go(t)
	cond := func() *mx.Array { return ba(e, []bool{true, false}, 2, 1) }
	runCases(t, []opCase{
		// cond [2,1], a [3], b scalar → [2,3]: row 0 from a, row 1 from b.
		{name: "broadcast", got: func() *mx.Array {
			return mx.Where(cond(), fa(e, []float32{1, 2, 3}, 3), mx.Scalar(e, 0, mx.Float32))
		}, dt: mx.Float32, shape: []int{2, 3}, want: []float32{1, 2, 3, 0, 0, 0}},
		// cond [3] picks per column between a [2,1] and b [2,3].
		{name: "broadcast cond row", got: func() *mx.Array {
			return mx.Where(ba(e, []bool{true, false, true}, 3), fa(e, []float32{-1, -2}, 2, 1), fa(e, iota32(6), 2, 3))
		}, dt: mx.Float32, shape: []int{2, 3}, want: []float32{-1, 1, -1, -2, 4, -2}},
		{name: "int", got: func() *mx.Array { return mx.Where(cond(), ia(e, []int32{7}, 1), ia(e, []int32{-7}, 1)) }, dt: mx.Int32, shape: []int{2, 1}, want: []int32{7, -7}},
		// int32 with float32 promotes to float32.
		{name: "promote", got: func() *mx.Array { return mx.Where(cond(), ia(e, []int32{7}, 1), fa(e, []float32{0.5}, 1)) }, dt: mx.Float32, shape: []int{2, 1}, want: []float32{7, 0.5}},
		// A float condition is true where non-zero.
		{name: "float cond", got: func() *mx.Array {
			return mx.Where(fa(e, []float32{0, 2, -1}, 3), fa(e, []float32{1, 1, 1}, 3), fa(e, []float32{0, 0, 0}, 3))
		}, dt: mx.Float32, shape: []int{3}, want: []float32{0, 1, 1}},
	})
}

func TestAsType(t *testing.T) {
	e := mxtest.Go(t)
	x := func(v ...float32) *mx.Array { return fa(e, v, len(v)) }
	// bfloat16 keeps 7 mantissa bits: 1+2⁻⁸ lies exactly between 1 (mantissa 0) and
	// 1+2⁻⁷ (mantissa 1) and rounds to the even one, 1; 1+3·2⁻⁸ lies between 1+2⁻⁷ (odd)
	// and 1+2⁻⁶ (even) and rounds up to 1.015625; 1+2⁻⁸+2⁻²⁰ is past the tie and rounds
	// up to 1.0078125. float16 keeps 10 bits, so 1+2⁻⁸ is exact there, while 1+2⁻¹¹ ties
	// to 1 and 65520 (halfway between 65504, the largest finite, and 2¹⁶) rounds to +∞.
	bfIn := x(1.00390625, 1.01171875, 1+1.0/256+1.0/(1<<20), -1.00390625)
	f16In := x(1.00390625, 1+1.0/2048, 65520, 1+3.0/2048)
	runCases(t, []opCase{
		// C casts truncate toward zero.
		{name: "float to int32", got: func() *mx.Array { return mx.AsType(x(1.7, -1.7, 2.5, -0.5, 0), mx.Int32) }, dt: mx.Int32, shape: []int{5}, want: []int32{1, -1, 2, 0, 0}},
		{name: "float to int64", got: func() *mx.Array { return mx.AsType(x(-3.99, 1e9), mx.Int64) }, dt: mx.Int64, shape: []int{2}, want: []int32{-3, 1e9}},
		// Non-zero (NaN included) is true.
		{name: "float to bool", got: func() *mx.Array { return mx.AsType(x(0, float32(math.Copysign(0, -1)), 0.1, nan), mx.Bool) }, dt: mx.Bool, shape: []int{4}, want: []bool{false, false, true, true}},
		{name: "bool to float", got: func() *mx.Array { return mx.AsType(ba(e, []bool{true, false}, 2), mx.Float32) }, dt: mx.Float32, shape: []int{2}, want: []float32{1, 0}},
		{name: "int to bool", got: func() *mx.Array { return mx.AsType(ia(e, []int32{0, 3, -1}, 3), mx.Bool) }, dt: mx.Bool, shape: []int{3}, want: []bool{false, true, true}},
		// 2²⁴+1 is the first integer float32 cannot hold; ties to even gives 2²⁴.
		{name: "int to float rounds", got: func() *mx.Array { return mx.AsType(ia(e, []int32{1<<24 + 1}, 1), mx.Float32) }, dt: mx.Float32, shape: []int{1}, want: []float32{1 << 24}},
		// Integer narrowing wraps modulo 2⁸: 257 → 1, −1 → 255.
		{name: "int32 to uint8 wraps", got: func() *mx.Array { return mx.AsType(ia(e, []int32{257, -1, 200}, 3), mx.Uint8) }, dt: mx.Uint8, shape: []int{3}, want: []int32{1, 255, 200}},
		{name: "bf16 ties to even", got: func() *mx.Array { return mx.AsType(bfIn, mx.BFloat16) }, dt: mx.BFloat16, shape: []int{4}, want: []float32{1, 1.015625, 1.0078125, -1}},
		{name: "f16 rounding", got: func() *mx.Array { return mx.AsType(f16In, mx.Float16) }, dt: mx.Float16, shape: []int{4}, want: []float32{1.00390625, 1, inf, 1 + 2.0/1024}},
		{name: "bf16 to f16", got: func() *mx.Array { return mx.AsType(mx.AsType(x(0.5, -3), mx.BFloat16), mx.Float16) }, dt: mx.Float16, shape: []int{2}, want: []float32{0.5, -3}},
		{name: "float64", got: func() *mx.Array { return mx.AsType(x(0.1), mx.Float64) }, dt: mx.Float64, shape: []int{1}, want: []float32{0.1}},
	})
	// Raw half bits: bf16(1) = 0x3F80 and bf16(1.015625) = 0x3F82 (mantissa 2 of 7 bits);
	// f16(1.00390625) = 0x3C04 (mantissa 4 = 2⁻⁸·2¹⁰), f16(+∞) = 0x7C00.
	if got := mx.AsType(bfIn, mx.BFloat16).Raw().([]uint16); !slices.Equal(got, []uint16{0x3F80, 0x3F82, 0x3F81, 0xBF80}) {
		t.Errorf("bf16 bits %#04x", got)
	}
	if got := mx.AsType(f16In, mx.Float16).Raw().([]uint16); !slices.Equal(got, []uint16{0x3C04, 0x3C00, 0x7C00, 0x3C02}) {
		t.Errorf("f16 bits %#04x", got)
	}
	// AsType to the same dtype is the identity.
	a := x(1)
	if mx.AsType(a, mx.Float32) != a {
		t.Errorf("AsType to the same dtype made a new array")
	}
}

func TestCreation(t *testing.T) {
	e := mxtest.Go(t)
	runCases(t, []opCase{
		{name: "full int", got: func() *mx.Array { return mx.Full(e, []int{2, 2}, 3.9, mx.Int32) }, dt: mx.Int32, shape: []int{2, 2}, want: []int32{3, 3, 3, 3}},
		{name: "zeros like", got: func() *mx.Array { return mx.ZerosLike(ia(e, []int32{5, 6}, 2)) }, dt: mx.Int32, shape: []int{2}, want: []int32{0, 0}},
		{name: "ones bf16", got: func() *mx.Array { return mx.Ones(e, []int{3}, mx.BFloat16) }, dt: mx.BFloat16, shape: []int{3}, want: []float32{1, 1, 1}},
		{name: "scalar", got: func() *mx.Array { return mx.Scalar(e, 2.5, mx.Float32) }, dt: mx.Float32, shape: nil, want: []float32{2.5}},
		// ⌈(2 − 0)/0.5⌉ = 4 elements; ⌈(−3 − 3)/−2⌉ = 3.
		{name: "arange", got: func() *mx.Array { return mx.Arange(e, 0, 2, 0.5, mx.Float32) }, dt: mx.Float32, shape: []int{4}, want: []float32{0, 0.5, 1, 1.5}},
		{name: "arange down int", got: func() *mx.Array { return mx.Arange(e, 3, -3, -2, mx.Int32) }, dt: mx.Int32, shape: []int{3}, want: []int32{3, 1, -1}},
		{name: "arange empty", got: func() *mx.Array { return mx.Arange(e, 3, 0, 1, mx.Int32) }, dt: mx.Int32, shape: []int{0}, want: []int32{}},
		// Little-endian float32 bytes of 1.0 (0x3F800000) and −2.0 (0xC0000000).
		{name: "from bytes", got: func() *mx.Array {
			return mx.FromBytes(e, []byte{0, 0, 0x80, 0x3F, 0, 0, 0, 0xC0}, []int{2}, mx.Float32)
		}, dt: mx.Float32, shape: []int{2}, want: []float32{1, -2}},
		{name: "from bytes bf16", got: func() *mx.Array { return mx.FromBytes(e, []byte{0x80, 0x3F, 0x40, 0xC0}, []int{2}, mx.BFloat16) }, dt: mx.BFloat16, shape: []int{2}, want: []float32{1, -3}},
		{name: "from slice int64 as float", got: func() *mx.Array { return mx.FromSlice(e, []int64{-2, 5}, []int{2}, mx.Float32) }, dt: mx.Float32, shape: []int{2}, want: []float32{-2, 5}},
	})
	// Arrays are immutable: mutating the slice after FromSlice changes nothing.
	v := []float32{1, 2}
	a := fa(e, v, 2)
	v[0] = 99
	if got := a.Float32s(); got[0] != 1 {
		t.Errorf("FromSlice aliased its input: %v", got)
	}
	got := a.Float32s()
	got[1] = 99
	if a.Float32s()[1] != 2 {
		t.Errorf("Float32s aliased the array's storage")
	}
	if s := a.String(); s != "array([2], float32)" {
		t.Errorf("String() = %q", s)
	}
	if a.Dim(-1) != 2 || a.Ndim() != 1 || a.Size() != 2 || mx.Scalar(e, 4, mx.Int32).Item() != 4 {
		t.Errorf("introspection of %v", a)
	}
}

func TestShapeOps(t *testing.T) {
	e := mxtest.Go(t)
	x6 := func() *mx.Array { return fa(e, iota32(6), 2, 3) }
	// x24[i][j][k] = 12i + 4j + k.
	x24 := func() *mx.Array { return fa(e, iota32(24), 2, 3, 4) }
	// The transpose (2, 0, 1) of x24 has out[k][i][j] = x24[i][j][k] = 12i + 4j + k.
	var t201 []float32
	for k := range 4 {
		for i := range 2 {
			for j := range 3 {
				t201 = append(t201, float32(12*i+4*j+k))
			}
		}
	}
	// x20[r][c] = 5r + c on a 4×5 grid.
	x20 := func() *mx.Array { return fa(e, iota32(20), 4, 5) }
	runCases(t, []opCase{
		{name: "reshape -1", got: func() *mx.Array { return mx.Reshape(x6(), -1, 2) }, dt: mx.Float32, shape: []int{3, 2}, want: iota32(6)},
		{name: "reshape -1 middle", got: func() *mx.Array { return mx.Reshape(x6(), 2, -1, 1) }, dt: mx.Float32, shape: []int{2, 3, 1}, want: iota32(6)},
		{name: "flatten", got: func() *mx.Array { return mx.Flatten(x24()) }, dt: mx.Float32, shape: []int{24}, want: iota32(24)},
		{name: "expand_dims", got: func() *mx.Array { return mx.ExpandDims(x6(), -1) }, dt: mx.Float32, shape: []int{2, 3, 1}, want: iota32(6)},
		{name: "squeeze all", got: func() *mx.Array { return mx.Squeeze(fa(e, iota32(3), 1, 3, 1)) }, dt: mx.Float32, shape: []int{3}, want: iota32(3)},
		{name: "squeeze axis", got: func() *mx.Array { return mx.Squeeze(fa(e, iota32(3), 1, 3, 1), 0) }, dt: mx.Float32, shape: []int{3, 1}, want: iota32(3)},
		// [[0 1 2] [3 4 5]]ᵀ = [[0 3] [1 4] [2 5]].
		{name: "transpose 2-D", got: func() *mx.Array { return mx.Transpose(x6()) }, dt: mx.Float32, shape: []int{3, 2}, want: []float32{0, 3, 1, 4, 2, 5}},
		{name: "transpose 3-D", got: func() *mx.Array { return mx.Transpose(x24(), 2, 0, 1) }, dt: mx.Float32, shape: []int{4, 2, 3}, want: t201},
		{name: "transpose negative axes", got: func() *mx.Array { return mx.Transpose(x24(), -1, 0, -2) }, dt: mx.Float32, shape: []int{4, 2, 3}, want: t201},
		{name: "swapaxes", got: func() *mx.Array { return mx.SwapAxes(x6(), 0, -1) }, dt: mx.Float32, shape: []int{3, 2}, want: []float32{0, 3, 1, 4, 2, 5}},
		{name: "transpose int", got: func() *mx.Array { return mx.Transpose(ia(e, []int32{1, 2, 3, 4}, 2, 2)) }, dt: mx.Int32, shape: []int{2, 2}, want: []int32{1, 3, 2, 4}},
		{name: "broadcast_to row", got: func() *mx.Array { return mx.BroadcastTo(fa(e, []float32{1, 2, 3}, 3), 2, 3) }, dt: mx.Float32, shape: []int{2, 3}, want: []float32{1, 2, 3, 1, 2, 3}},
		{name: "broadcast_to column 3-D", got: func() *mx.Array { return mx.BroadcastTo(fa(e, []float32{1, 2}, 2, 1), 2, 2, 2) }, dt: mx.Float32, shape: []int{2, 2, 2}, want: []float32{1, 1, 2, 2, 1, 1, 2, 2}},
		{name: "broadcast_to bool", got: func() *mx.Array { return mx.BroadcastTo(ba(e, []bool{true}, 1), 3) }, dt: mx.Bool, shape: []int{3}, want: []bool{true, true, true}},
		// Negative start counts from the end: [-3:10] of 0..9 is 7, 8, 9.
		{name: "slice negative start", got: func() *mx.Array { return mx.Slice(fa(e, iota32(10), 10), []int{-3}, []int{10}, nil) }, dt: mx.Float32, shape: []int{3}, want: []float32{7, 8, 9}},
		// [1:-1:3] = indices 1, 4, 7 (stop 9).
		{name: "slice negative stop stride", got: func() *mx.Array { return mx.Slice(fa(e, iota32(10), 10), []int{1}, []int{-1}, []int{3}) }, dt: mx.Float32, shape: []int{3}, want: []float32{1, 4, 7}},
		// Rows [-3:4:2] = 1, 3; columns [0:5:2] = 0, 2, 4; value 5r + c.
		{name: "slice 2-D strided", got: func() *mx.Array { return mx.Slice(x20(), []int{-3, 0}, []int{4, 5}, []int{2, 2}) }, dt: mx.Float32, shape: []int{2, 3}, want: []float32{5, 7, 9, 15, 17, 19}},
		// Out-of-range bounds clamp; an inverted range is empty.
		{name: "slice clamps", got: func() *mx.Array { return mx.Slice(x20(), []int{-100, 3}, []int{1, 100}, nil) }, dt: mx.Float32, shape: []int{1, 2}, want: []float32{3, 4}},
		{name: "slice empty", got: func() *mx.Array { return mx.Slice(x20(), []int{3, 0}, []int{1, 5}, nil) }, dt: mx.Float32, shape: []int{0, 5}, want: []float32{}},
		{name: "slice_axis", got: func() *mx.Array { return mx.SliceAxis(x20(), -1, 1, 3) }, dt: mx.Float32, shape: []int{4, 2}, want: []float32{1, 2, 6, 7, 11, 12, 16, 17}},
		// Rows 0, 2 × columns 1, 3 of a 3×4 zero grid receive [[1 2] [3 4]].
		{name: "slice_update strided", got: func() *mx.Array {
			return mx.SliceUpdate(mx.Zeros(e, []int{3, 4}, mx.Float32), fa(e, []float32{1, 2, 3, 4}, 2, 2), []int{0, 1}, []int{3, 4}, []int{2, 2})
		}, dt: mx.Float32, shape: []int{3, 4}, want: []float32{0, 1, 0, 2, 0, 0, 0, 0, 0, 3, 0, 4}},
		// Negative start −1 is the last row; the int update is cast to float32.
		{name: "slice_update negative start", got: func() *mx.Array {
			return mx.SliceUpdate(mx.Zeros(e, []int{3, 4}, mx.Float32), ia(e, []int32{7, 8}, 1, 2), []int{-1, 0}, []int{3, 2}, nil)
		}, dt: mx.Float32, shape: []int{3, 4}, want: []float32{0, 0, 0, 0, 0, 0, 0, 0, 7, 8, 0, 0}},
		{name: "concatenate axis -1", got: func() *mx.Array {
			return mx.Concatenate([]*mx.Array{fa(e, []float32{1, 2, 3, 4}, 2, 2), fa(e, []float32{5, 6}, 2, 1)}, -1)
		}, dt: mx.Float32, shape: []int{2, 3}, want: []float32{1, 2, 5, 3, 4, 6}},
		{name: "concatenate axis 0 three", got: func() *mx.Array {
			return mx.Concatenate([]*mx.Array{ia(e, []int32{1, 2}, 1, 2), ia(e, []int32{3, 4, 5, 6}, 2, 2), ia(e, []int32{7, 8}, 1, 2)}, 0)
		}, dt: mx.Int32, shape: []int{4, 2}, want: []int32{1, 2, 3, 4, 5, 6, 7, 8}},
		// Middle axis of [2,1,2] and [2,2,2]: each outer block is a's row then b's two rows.
		{name: "concatenate middle axis", got: func() *mx.Array {
			return mx.Concatenate([]*mx.Array{fa(e, []float32{0, 1, 2, 3}, 2, 1, 2), fa(e, []float32{10, 11, 12, 13, 14, 15, 16, 17}, 2, 2, 2)}, 1)
		}, dt: mx.Float32, shape: []int{2, 3, 2}, want: []float32{0, 1, 10, 11, 12, 13, 2, 3, 14, 15, 16, 17}},
	})

	// SliceUpdate leaves its input untouched.
	z := mx.Zeros(e, []int{2}, mx.Float32)
	mx.SliceUpdate(z, fa(e, []float32{5}, 1), []int{0}, []int{1}, nil)
	if got := z.Float32s(); got[0] != 0 {
		t.Errorf("slice_update mutated its input: %v", got)
	}

	t.Run("split", func(t *testing.T) {
		// 0..5 cut at 2 and 5: [0 1] [2 3 4] [5].
		parts := mx.Split(fa(e, iota32(6), 6), []int{2, 5}, 0)
		want := [][]float32{{0, 1}, {2, 3, 4}, {5}}
		if len(parts) != 3 {
			t.Fatalf("%d parts", len(parts))
		}
		for i, p := range parts {
			expect(t, p, mx.Float32, []int{len(want[i])}, want[i], 0)
		}
		// Three equal parts of the columns of x6 = [[0 1 2] [3 4 5]]: column c is [c, 3+c].
		for c, p := range mx.SplitEqual(x6(), 3, -1) {
			expect(t, p, mx.Float32, []int{2, 1}, []float32{float32(c), float32(3 + c)}, 0)
		}
	})
}

func TestReductions(t *testing.T) {
	e := mxtest.Go(t)
	// a = [[1 2 3] [4 5 6]].
	a := func() *mx.Array { return fa(e, []float32{1, 2, 3, 4, 5, 6}, 2, 3) }
	x24 := func() *mx.Array { return fa(e, iota32(24), 2, 3, 4) }
	bools := func() *mx.Array { return ba(e, []bool{true, true, false, true, true, true}, 2, 3) }
	// logsumexp rows: log(e⁰ + e⁰) = ln 2; log(1 + 3) = ln 4; an all −∞ row is −∞;
	// 1000 + ln 2 must not overflow; log(0 + e⁰) = 0.
	lse := func() *mx.Array {
		return fa(e, []float32{0, 0, 0, ln3, ninf, ninf, 1000, 1000, ninf, 0}, 5, 2)
	}
	runCases(t, []opCase{
		{name: "sum all", got: func() *mx.Array { return mx.Sum(a(), false) }, dt: mx.Float32, shape: nil, want: []float32{21}},
		{name: "sum axis 0", got: func() *mx.Array { return mx.Sum(a(), false, 0) }, dt: mx.Float32, shape: []int{3}, want: []float32{5, 7, 9}},
		{name: "sum axis 1 keepdims", got: func() *mx.Array { return mx.Sum(a(), true, 1) }, dt: mx.Float32, shape: []int{2, 1}, want: []float32{6, 15}},
		{name: "sum axes keepdims", got: func() *mx.Array { return mx.Sum(a(), true, 0, 1) }, dt: mx.Float32, shape: []int{1, 1}, want: []float32{21}},
		// Σ_i Σ_k (12i + 4j + k) = (6 + 54) + 32j = 60 + 32j.
		{name: "sum axes 0,2", got: func() *mx.Array { return mx.Sum(x24(), false, 0, 2) }, dt: mx.Float32, shape: []int{3}, want: []float32{60, 92, 124}},
		{name: "sum axes 2,0 keepdims", got: func() *mx.Array { return mx.Sum(x24(), true, 2, -3) }, dt: mx.Float32, shape: []int{1, 3, 1}, want: []float32{60, 92, 124}},
		{name: "sum int", got: func() *mx.Array { return mx.Sum(ia(e, []int32{1, -5, 7}, 3), false) }, dt: mx.Int32, shape: nil, want: []int32{3}},
		{name: "sum bool counts", got: func() *mx.Array { return mx.Sum(bools(), false, 1) }, dt: mx.Int32, shape: []int{2}, want: []int32{2, 3}},
		{name: "mean axis 1", got: func() *mx.Array { return mx.Mean(a(), false, 1) }, dt: mx.Float32, shape: []int{2}, want: []float32{2, 5}},
		{name: "mean all keepdims", got: func() *mx.Array { return mx.Mean(a(), true) }, dt: mx.Float32, shape: []int{1, 1}, want: []float32{3.5}},
		// Mean of integers is float: (1 + 2)/2 = 1.5.
		{name: "mean int", got: func() *mx.Array { return mx.Mean(ia(e, []int32{1, 2}, 2), false) }, dt: mx.Float32, shape: nil, want: []float32{1.5}},
		// (12i + 4j + k) averaged over i and j: 6 + 4 + k.
		{name: "mean axes 0,1", got: func() *mx.Array { return mx.Mean(x24(), false, 0, 1) }, dt: mx.Float32, shape: []int{4}, want: []float32{10, 11, 12, 13}},
		{name: "max axis 0", got: func() *mx.Array { return mx.Max(a(), false, 0) }, dt: mx.Float32, shape: []int{3}, want: []float32{4, 5, 6}},
		{name: "max nan", got: func() *mx.Array { return mx.Max(fa(e, []float32{1, nan, 3}, 3), false) }, dt: mx.Float32, shape: nil, want: []float32{nan}},
		{name: "min axis 1", got: func() *mx.Array { return mx.Min(a(), false, 1) }, dt: mx.Float32, shape: []int{2}, want: []float32{1, 4}},
		{name: "min int", got: func() *mx.Array { return mx.Min(ia(e, []int32{3, -8, 2, 9}, 2, 2), true, 0) }, dt: mx.Int32, shape: []int{1, 2}, want: []int32{2, -8}},
		// 1·2·3 = 6, 4·5·6 = 120.
		{name: "prod axis 1", got: func() *mx.Array { return mx.Prod(a(), false, 1) }, dt: mx.Float32, shape: []int{2}, want: []float32{6, 120}},
		{name: "prod int", got: func() *mx.Array { return mx.Prod(ia(e, []int32{-2, 3, 4}, 3), false) }, dt: mx.Int32, shape: nil, want: []int32{-24}},
		{name: "all axis 1", got: func() *mx.Array { return mx.All(bools(), false, 1) }, dt: mx.Bool, shape: []int{2}, want: []bool{false, true}},
		{name: "all", got: func() *mx.Array { return mx.All(bools(), false) }, dt: mx.Bool, shape: nil, want: []bool{false}},
		{name: "any axis 0", got: func() *mx.Array { return mx.Any(ba(e, []bool{false, false, false, true}, 2, 2), true, 0) }, dt: mx.Bool, shape: []int{1, 2}, want: []bool{false, true}},
		// Non-zero floats count as true.
		{name: "any float", got: func() *mx.Array { return mx.Any(fa(e, []float32{0, 0, 0.5}, 3), false) }, dt: mx.Bool, shape: nil, want: []bool{true}},
		{name: "logsumexp rows", got: func() *mx.Array { return mx.LogSumExp(lse(), false, 1) }, dt: mx.Float32, shape: []int{5}, want: []float32{ln2, 2 * ln2, ninf, 1000 + ln2, 0}, tol: 1e-6},
		{name: "logsumexp keepdims", got: func() *mx.Array { return mx.LogSumExp(lse(), true, -1) }, dt: mx.Float32, shape: []int{5, 1}, want: []float32{ln2, 2 * ln2, ninf, 1000 + ln2, 0}, tol: 1e-6},
		// Over both axes of [[0 0] [0 0]]: log 4.
		{name: "logsumexp all", got: func() *mx.Array { return mx.LogSumExp(mx.Zeros(e, []int{2, 2}, mx.Float32), false) }, dt: mx.Float32, shape: nil, want: []float32{2 * ln2}, tol: 1e-6},
	})
}

func TestArgReductions(t *testing.T) {
	e := mxtest.Go(t)
	// Ties resolve to the first index: row 0 has its max 3 at 1 and 2, row 1 its min 0
	// at 1 and 2 and its max 5 at 0 and 3.
	x := func() *mx.Array { return fa(e, []float32{1, 3, 3, 2, 5, 0, 0, 5}, 2, 4) }
	runCases(t, []opCase{
		{name: "argmax axis 1", got: func() *mx.Array { return mx.Argmax(x(), 1, false) }, dt: mx.Int32, shape: []int{2}, want: []int32{1, 0}},
		{name: "argmin axis -1", got: func() *mx.Array { return mx.Argmin(x(), -1, false) }, dt: mx.Int32, shape: []int{2}, want: []int32{0, 1}},
		{name: "argmax axis 0 keepdims", got: func() *mx.Array { return mx.Argmax(x(), 0, true) }, dt: mx.Int32, shape: []int{1, 4}, want: []int32{1, 0, 0, 1}},
		// Columns [1 5], [3 0], [3 0], [2 5].
		{name: "argmin axis 0", got: func() *mx.Array { return mx.Argmin(x(), 0, false) }, dt: mx.Int32, shape: []int{4}, want: []int32{0, 1, 1, 0}},
		{name: "argmax int ties", got: func() *mx.Array { return mx.Argmax(ia(e, []int32{-1, -1, -5}, 3), 0, false) }, dt: mx.Int32, shape: nil, want: []int32{0}},
		{name: "argmin int", got: func() *mx.Array { return mx.Argmin(ia(e, []int32{-1, -1, -5}, 3), 0, false) }, dt: mx.Int32, shape: nil, want: []int32{2}},
		{name: "argmax -inf row", got: func() *mx.Array { return mx.Argmax(fa(e, []float32{ninf, ninf, ninf}, 3), 0, false) }, dt: mx.Int32, shape: nil, want: []int32{0}},
	})
}

func TestSoftmax(t *testing.T) {
	e := mxtest.Go(t)
	runCases(t, []opCase{
		// softmax [0, ln3] = [1, 3]/4.
		{name: "row", got: func() *mx.Array { return mx.Softmax(fa(e, []float32{0, ln3}, 1, 2), -1) }, dt: mx.Float32, shape: []int{1, 2}, want: []float32{0.25, 0.75}, tol: 1e-6},
		// Subtracting the row max keeps huge rows finite: [1e30, 1e30] → ½ each;
		// [3e38, −3e38, 3e38] → ½, 0, ½; a −∞ logit gets exactly 0.
		{name: "huge", got: func() *mx.Array {
			return mx.Softmax(fa(e, []float32{1e30, 1e30, 0, 3e38, -3e38, 3e38, 0, ninf, 0}, 3, 3), 1)
		}, dt: mx.Float32, shape: []int{3, 3}, want: []float32{0.5, 0.5, 0, 0.5, 0, 0.5, 0.5, 0, 0.5}, tol: 1e-6},
		// Along axis 0 the columns are normalised: column 0 is [0, ln3] → [¼, ¾], column 1
		// equal → ½, ½.
		{name: "axis 0", got: func() *mx.Array { return mx.Softmax(fa(e, []float32{0, 7, ln3, 7}, 2, 2), 0) }, dt: mx.Float32, shape: []int{2, 2}, want: []float32{0.25, 0.5, 0.75, 0.5}, tol: 1e-6},
		// bf16 in, bf16 out; ¼ and ¾ are exact in bf16.
		{name: "bf16", got: func() *mx.Array { return mx.Softmax(mx.AsType(fa(e, []float32{0, ln3}, 2), mx.BFloat16), 0) }, dt: mx.BFloat16, shape: []int{2}, want: []float32{0.25, 0.75}, tol: 1e-2},
	})
}

func TestScans(t *testing.T) {
	e := mxtest.Go(t)
	x := func() *mx.Array { return fa(e, []float32{1, 2, 3, 4}, 4) }
	m := func() *mx.Array { return fa(e, []float32{1, 3, 2, 5, 4}, 5) }
	runCases(t, []opCase{
		{name: "cumsum", got: func() *mx.Array { return mx.Cumsum(x(), 0, false, true) }, dt: mx.Float32, shape: []int{4}, want: []float32{1, 3, 6, 10}},
		{name: "cumsum exclusive", got: func() *mx.Array { return mx.Cumsum(x(), 0, false, false) }, dt: mx.Float32, shape: []int{4}, want: []float32{0, 1, 3, 6}},
		{name: "cumsum reverse", got: func() *mx.Array { return mx.Cumsum(x(), 0, true, true) }, dt: mx.Float32, shape: []int{4}, want: []float32{10, 9, 7, 4}},
		{name: "cumsum reverse exclusive", got: func() *mx.Array { return mx.Cumsum(x(), -1, true, false) }, dt: mx.Float32, shape: []int{4}, want: []float32{9, 7, 4, 0}},
		// Down the columns of [[1 2] [3 4]].
		{name: "cumsum axis 0", got: func() *mx.Array { return mx.Cumsum(fa(e, []float32{1, 2, 3, 4}, 2, 2), 0, false, true) }, dt: mx.Float32, shape: []int{2, 2}, want: []float32{1, 2, 4, 6}},
		{name: "cumsum int", got: func() *mx.Array { return mx.Cumsum(ia(e, []int32{1, -2, 3}, 3), 0, false, true) }, dt: mx.Int32, shape: []int{3}, want: []int32{1, -1, 2}},
		{name: "cumsum bool", got: func() *mx.Array { return mx.Cumsum(ba(e, []bool{true, false, true}, 3), 0, false, true) }, dt: mx.Int32, shape: []int{3}, want: []int32{1, 1, 2}},
		{name: "cummax", got: func() *mx.Array { return mx.Cummax(m(), 0, false, true) }, dt: mx.Float32, shape: []int{5}, want: []float32{1, 3, 3, 5, 5}},
		// An exclusive running max starts from the identity of max, −∞.
		{name: "cummax exclusive", got: func() *mx.Array { return mx.Cummax(m(), 0, false, false) }, dt: mx.Float32, shape: []int{5}, want: []float32{ninf, 1, 3, 3, 5}},
		{name: "cummax reverse", got: func() *mx.Array { return mx.Cummax(m(), 0, true, true) }, dt: mx.Float32, shape: []int{5}, want: []float32{5, 5, 5, 5, 4}},
		{name: "cummax reverse exclusive", got: func() *mx.Array { return mx.Cummax(m(), 0, true, false) }, dt: mx.Float32, shape: []int{5}, want: []float32{5, 5, 5, 4, ninf}},
		{name: "cummax axis 1", got: func() *mx.Array { return mx.Cummax(fa(e, []float32{2, 1, 3, 0, 5, 4}, 2, 3), 1, false, true) }, dt: mx.Float32, shape: []int{2, 3}, want: []float32{2, 2, 3, 0, 5, 5}},
		{name: "cummax int", got: func() *mx.Array { return mx.Cummax(ia(e, []int32{-5, -7, -3}, 3), 0, false, true) }, dt: mx.Int32, shape: []int{3}, want: []int32{-5, -5, -3}},
		// For integers the identity of max is the dtype's minimum, −2³¹ for int32 (MLX
		// initialises the scan with numeric_limits<int32>::min()).
		{name: "cummax int exclusive", got: func() *mx.Array { return mx.Cummax(ia(e, []int32{-5, -3}, 2), 0, false, false) }, dt: mx.Int32, shape: []int{2}, want: []int32{math.MinInt32, -5}},
	})
}

func TestSorting(t *testing.T) {
	e := mxtest.Go(t)
	runCases(t, []opCase{
		// The two 1s keep their order (1 before 3): stable.
		{name: "argsort stable", got: func() *mx.Array { return mx.Argsort(fa(e, []float32{3, 1, 2, 1}, 4), 0) }, dt: mx.Int32, shape: []int{4}, want: []int32{1, 3, 2, 0}},
		// −∞ < 1 < 2, then the NaNs in their original order.
		{name: "argsort nan last", got: func() *mx.Array { return mx.Argsort(fa(e, []float32{nan, 2, ninf, nan, 1}, 5), -1) }, dt: mx.Int32, shape: []int{5}, want: []int32{2, 4, 1, 0, 3}},
		// Columns of [[3 1] [1 2]] sorted independently.
		{name: "argsort axis 0", got: func() *mx.Array { return mx.Argsort(fa(e, []float32{3, 1, 1, 2}, 2, 2), 0) }, dt: mx.Int32, shape: []int{2, 2}, want: []int32{1, 0, 0, 1}},
		{name: "argsort int stable", got: func() *mx.Array { return mx.Argsort(ia(e, []int32{2, -1, 2, -1}, 4), 0) }, dt: mx.Int32, shape: []int{4}, want: []int32{1, 3, 0, 2}},
	})

	// Argpartition only promises the partition property, so check that instead of one order.
	part := func(t *testing.T, vals []float32, kth int) {
		t.Helper()
		idx := mx.Argpartition(fa(e, vals, len(vals)), kth, 0).Int32s()
		if kth < 0 {
			kth += len(vals)
		}
		sorted := slices.Clone(vals)
		slices.Sort(sorted)
		perm := slices.Clone(idx)
		slices.Sort(perm)
		for i, p := range perm {
			if int(p) != i {
				t.Fatalf("argpartition %v kth %d = %v: not a permutation", vals, kth, idx)
			}
		}
		pivot := vals[idx[kth]]
		if pivot != sorted[kth] {
			t.Fatalf("argpartition %v kth %d: element %v at kth, want %v", vals, kth, pivot, sorted[kth])
		}
		for i, j := range idx {
			if (i < kth && vals[j] > pivot) || (i > kth && vals[j] < pivot) {
				t.Fatalf("argpartition %v kth %d = %v: %v at %d breaks the partition", vals, kth, idx, vals[j], i)
			}
		}
	}
	t.Run("argpartition", func(t *testing.T) {
		vals := []float32{5, 1, 4, 2, 3, 0}
		for kth := range len(vals) {
			part(t, vals, kth)
		}
		part(t, vals, -1)
		part(t, []float32{2, 2, 1, 2, 0}, 2)
	})
	t.Run("argpartition axis 0", func(t *testing.T) {
		// Columns [4 1 3] and [0 2 1]: kth 1 puts the medians 3 and 1 in row 1.
		x := fa(e, []float32{4, 0, 1, 2, 3, 1}, 3, 2)
		idx := mx.Argpartition(x, 1, 0)
		expect(t, mx.TakeAlongAxis(x, mx.SliceAxis(idx, 0, 1, 2), 0), mx.Float32, []int{1, 2}, []float32{3, 1}, 0)
	})
	t.Run("topk", func(t *testing.T) {
		// Top 2 of each row: {5, 4} and {9, 8}, in some order.
		got := mx.TopK(fa(e, []float32{5, 1, 4, 2, 3, 0, 9, 8, 7, 6}, 2, 5), 2)
		if s := got.Shape(); !slices.Equal(s, []int{2, 2}) {
			t.Fatalf("shape %v", s)
		}
		v := got.Float32s()
		for r, want := range [][]float32{{4, 5}, {8, 9}} {
			row := slices.Clone(v[2*r : 2*r+2])
			slices.Sort(row)
			if !slices.Equal(row, want) {
				t.Errorf("row %d top-2 %v, want %v", r, row, want)
			}
		}
	})
}

func TestMatmul(t *testing.T) {
	e := mxtest.Go(t)
	// A = [[1 2 3] [4 5 6]], B = [[7 8] [9 10] [11 12]]:
	// AB = [[7+18+33, 8+20+36], [28+45+66, 32+50+72]] = [[58 64] [139 154]].
	A := func() *mx.Array { return fa(e, []float32{1, 2, 3, 4, 5, 6}, 2, 3) }
	B := func() *mx.Array { return fa(e, []float32{7, 8, 9, 10, 11, 12}, 3, 2) }
	// Batched broadcast: a [2,1,2,2] holds (i+1)·I, b [3,2,2] holds M_j = [[j j+1] [j+2 j+3]],
	// so out [2,3,2,2] holds (i+1)·M_j.
	aB := []float32{1, 0, 0, 1, 2, 0, 0, 2}
	var bB, outB []float32
	for j := range 3 {
		bB = append(bB, float32(j), float32(j+1), float32(j+2), float32(j+3))
	}
	for i := range 2 {
		for j := range 3 {
			for _, m := range []int{j, j + 1, j + 2, j + 3} {
				outB = append(outB, float32((i+1)*m))
			}
		}
	}
	runCases(t, []opCase{
		{name: "2x3 times 3x2", got: func() *mx.Array { return mx.Matmul(A(), B()) }, dt: mx.Float32, shape: []int{2, 2}, want: []float32{58, 64, 139, 154}},
		// BA = [[7+32, 14+40, 21+48], [9+40, 18+50, 27+60], [11+48, 22+60, 33+72]].
		{name: "3x2 times 2x3", got: func() *mx.Array { return mx.Matmul(B(), A()) }, dt: mx.Float32, shape: []int{3, 3}, want: []float32{39, 54, 69, 49, 68, 87, 59, 82, 105}},
		{name: "batched broadcast", got: func() *mx.Array { return mx.Matmul(fa(e, aB, 2, 1, 2, 2), fa(e, bB, 3, 2, 2)) }, dt: mx.Float32, shape: []int{2, 3, 2, 2}, want: outB},
		// A vector on the left is a row: [1 2 3]·B = first row of AB.
		{name: "vector left", got: func() *mx.Array { return mx.Matmul(fa(e, []float32{1, 2, 3}, 3), B()) }, dt: mx.Float32, shape: []int{2}, want: []float32{58, 64}},
		// On the right a column: A·[1 0 −1] = [1−3, 4−6].
		{name: "vector right", got: func() *mx.Array { return mx.Matmul(A(), fa(e, []float32{1, 0, -1}, 3)) }, dt: mx.Float32, shape: []int{2}, want: []float32{-2, -2}},
		// 1·4 + 2·5 + 3·6 = 32.
		{name: "vector dot", got: func() *mx.Array { return mx.Matmul(fa(e, []float32{1, 2, 3}, 3), fa(e, []float32{4, 5, 6}, 3)) }, dt: mx.Float32, shape: nil, want: []float32{32}},
		// A vector against a batch [2,3,2]: both batches are B and 2B.
		{name: "vector batched", got: func() *mx.Array {
			return mx.Matmul(fa(e, []float32{1, 0, 0}, 3), fa(e, []float32{7, 8, 9, 10, 11, 12, 14, 16, 18, 20, 22, 24}, 2, 3, 2))
		}, dt: mx.Float32, shape: []int{2, 2}, want: []float32{7, 8, 14, 16}},
		{name: "int operands give float32", got: func() *mx.Array { return mx.Matmul(ia(e, []int32{1, 2}, 1, 2), ia(e, []int32{3, 4}, 2, 1)) }, dt: mx.Float32, shape: []int{1, 1}, want: []float32{11}},
		{name: "bf16 stays bf16", got: func() *mx.Array { return mx.Matmul(mx.AsType(A(), mx.BFloat16), mx.AsType(B(), mx.BFloat16)) }, dt: mx.BFloat16, shape: []int{2, 2}, want: []float32{58, 64, 139, 154}},
		{name: "empty inner", got: func() *mx.Array {
			return mx.Matmul(mx.Zeros(e, []int{2, 0}, mx.Float32), mx.Zeros(e, []int{0, 3}, mx.Float32))
		}, dt: mx.Float32, shape: []int{2, 3}, want: make([]float32, 6)},
	})
}

func TestIndexing(t *testing.T) {
	e := mxtest.Go(t)
	// x[r][c] = 3r + c on a 3×3 grid.
	x := func() *mx.Array { return fa(e, iota32(9), 3, 3) }
	runCases(t, []opCase{
		// Rows 2, −1 (= 2) and 0.
		{name: "take negative", got: func() *mx.Array { return mx.Take(x(), ia(e, []int32{2, -1, 0}, 3), 0) }, dt: mx.Float32, shape: []int{3, 3}, want: []float32{6, 7, 8, 6, 7, 8, 0, 1, 2}},
		{name: "take -3 is first", got: func() *mx.Array { return mx.Take(x(), ia(e, []int32{-3}, 1), 0) }, dt: mx.Float32, shape: []int{1, 3}, want: []float32{0, 1, 2}},
		// Indices [[0 2] [1 1]] along axis 1 replace it: out[r][i][j] = 3r + idx[i][j].
		{name: "take multi-dim", got: func() *mx.Array { return mx.Take(x(), ia(e, []int32{0, 2, 1, 1}, 2, 2), 1) }, dt: mx.Float32, shape: []int{3, 2, 2},
			want: []float32{0, 2, 1, 1, 3, 5, 4, 4, 6, 8, 7, 7}},
		// A 0-d index removes the axis.
		{name: "take scalar index", got: func() *mx.Array { return mx.Take(x(), mx.Scalar(e, 1, mx.Int32), 0) }, dt: mx.Float32, shape: []int{3}, want: []float32{3, 4, 5}},
		{name: "take int64 indices int data", got: func() *mx.Array {
			return mx.Take(ia(e, []int32{10, 20, 30}, 3), mx.FromSlice(e, []int64{2, 0}, []int{2}, mx.Int64), 0)
		}, dt: mx.Int32, shape: []int{2}, want: []int32{30, 10}},
		// Embedding-style lookup of rows of a bf16 table keeps the dtype.
		{name: "take bf16", got: func() *mx.Array { return mx.Take(mx.AsType(x(), mx.BFloat16), ia(e, []int32{1}, 1), 0) }, dt: mx.BFloat16, shape: []int{1, 3}, want: []float32{3, 4, 5}},
		// y = [[10 20 30] [40 50 60]] with idx [[2 0] [1 1]] along axis 1.
		{name: "take_along_axis", got: func() *mx.Array {
			return mx.TakeAlongAxis(fa(e, []float32{10, 20, 30, 40, 50, 60}, 2, 3), ia(e, []int32{2, 0, 1, 1}, 2, 2), 1)
		}, dt: mx.Float32, shape: []int{2, 2}, want: []float32{30, 10, 50, 50}},
		// idx [1,2] broadcasts over the rows; −1 is the last column.
		{name: "take_along_axis broadcast", got: func() *mx.Array {
			return mx.TakeAlongAxis(fa(e, []float32{10, 20, 30, 40, 50, 60}, 2, 3), ia(e, []int32{0, -1}, 1, 2), 1)
		}, dt: mx.Float32, shape: []int{2, 2}, want: []float32{10, 30, 40, 60}},
		// Along axis 0 each column picks a row: rows 1, 0, 1.
		{name: "take_along_axis axis 0", got: func() *mx.Array {
			return mx.TakeAlongAxis(fa(e, []float32{10, 20, 30, 40, 50, 60}, 2, 3), ia(e, []int32{1, 0, 1}, 1, 3), 0)
		}, dt: mx.Float32, shape: []int{1, 3}, want: []float32{40, 20, 60}},
	})
}

func TestRMSNorm(t *testing.T) {
	e := mxtest.Go(t)
	// Row [3 4 0 0]: mean of squares 25/4, rms 2.5 → [1.2 1.6 0 0]; times w = [1 2 3 4]
	// gives [1.2 3.2 0 0]. Row [1 1 1 1]: rms 1 → w itself. Row [−2 −2 −2 −2]: rms 2 → −w.
	x := func() *mx.Array { return fa(e, []float32{3, 4, 0, 0, 1, 1, 1, 1, -2, -2, -2, -2}, 3, 4) }
	w := func() *mx.Array { return fa(e, []float32{1, 2, 3, 4}, 4) }
	runCases(t, []opCase{
		{name: "weight", got: func() *mx.Array { return mx.RMSNorm(x(), w(), 1e-6) }, dt: mx.Float32, shape: []int{3, 4},
			want: []float32{1.2, 3.2, 0, 0, 1, 2, 3, 4, -1, -2, -3, -4}, tol: 1e-6},
		{name: "no weight", got: func() *mx.Array { return mx.RMSNorm(x(), nil, 1e-6) }, dt: mx.Float32, shape: []int{3, 4},
			want: []float32{1.2, 1.6, 0, 0, 1, 1, 1, 1, -1, -1, -1, -1}, tol: 1e-6},
		// eps matters on a zero-ish row: x = [0.001 0.001], mean x² = 1e-6, eps = 3e-6 →
		// rms = 2e-3 → 0.5.
		{name: "eps", got: func() *mx.Array { return mx.RMSNorm(fa(e, []float32{0.001, 0.001}, 1, 2), nil, 3e-6) }, dt: mx.Float32, shape: []int{1, 2}, want: []float32{0.5, 0.5}, tol: 1e-5},
		{name: "bf16", got: func() *mx.Array { return mx.RMSNorm(mx.AsType(x(), mx.BFloat16), mx.AsType(w(), mx.BFloat16), 1e-6) }, dt: mx.BFloat16, shape: []int{3, 4},
			want: []float32{1.203125, 3.203125, 0, 0, 1, 2, 3, 4, -1, -2, -3, -4}, tol: 1e-2},
	})
}

// ropeWant builds the expected rotation of one feature row at the given angles: for every
// pair (a, b) with angle θ, out[a] = x[a]cosθ − x[b]sinθ and out[b] = x[b]cosθ + x[a]sinθ.
func ropeWant(row []float32, pairs [][2]int, theta []float64) []float32 {
	out := slices.Clone(row)
	for i, p := range pairs {
		c, s := math.Cos(theta[i]), math.Sin(theta[i])
		x1, x2 := float64(row[p[0]]), float64(row[p[1]])
		out[p[0]] = float32(x1*c - x2*s)
		out[p[1]] = float32(x2*c + x1*s)
	}
	return out
}

func TestRoPE(t *testing.T) {
	e := mxtest.Go(t)
	// One row per position t of shape [1, 1, S=2, D=8]; the same features at each position.
	row := []float32{1, 0, 0, 0, 0, 2, 0, 0}
	x := func() *mx.Array { return fa(e, append(slices.Clone(row), row...), 1, 1, 2, 8) }
	// base 16 over dims 8: inverse frequency of pair i is 16^(−2i/8) = 2^−i.
	// Offset 3 makes the positions 3 and 4; angle θ_i = pos·2^−i.
	thetas := func(pos float64, inv []float64) []float64 {
		out := make([]float64, len(inv))
		for i, f := range inv {
			out[i] = pos * f
		}
		return out
	}
	both := func(pairs [][2]int, r []float32, inv []float64, pos0 float64) []float32 {
		return append(ropeWant(r, pairs, thetas(pos0, inv)), ropeWant(r, pairs, thetas(pos0+1, inv))...)
	}
	inv8 := []float64{1, 0.5, 0.25, 0.125}
	// Rotate-half pairs (i, i+4); traditional pairs (2i, 2i+1).
	half8 := [][2]int{{0, 4}, {1, 5}, {2, 6}, {3, 7}}
	trad8 := [][2]int{{0, 1}, {2, 3}, {4, 5}, {6, 7}}
	// dims 4 of 8: base 16 gives 16^(−2i/4) = 4^−i; rotate-half pairs (0,2), (1,3),
	// traditional (0,1), (2,3); features 4..7 pass through.
	prow := []float32{1, 0, 0, 3, 5, 6, 7, 8}
	px := func() *mx.Array { return fa(e, append(slices.Clone(prow), prow...), 1, 2, 8) }
	inv4 := []float64{1, 0.25}
	// Explicit freqs [2, +∞] with scale 2 over dims 4, D 4: pair 0 turns by pos·2/2 = pos,
	// pair 1 by pos·2/∞ = 0 (identity).
	frow := []float32{1, 2, 3, 4}
	fx := func() *mx.Array { return fa(e, append(slices.Clone(frow), frow...), 2, 4) }
	freqs := func() *mx.Array { return fa(e, []float32{2, inf}, 2) }
	runCases(t, []opCase{
		{name: "rotate-half offset", got: func() *mx.Array { return mx.RoPE(x(), 8, false, 16, 1, 3, nil) }, dt: mx.Float32, shape: []int{1, 1, 2, 8},
			want: both(half8, row, inv8, 3), tol: 1e-6},
		{name: "traditional offset", got: func() *mx.Array { return mx.RoPE(x(), 8, true, 16, 1, 3, nil) }, dt: mx.Float32, shape: []int{1, 1, 2, 8},
			want: both(trad8, row, inv8, 3), tol: 1e-6},
		// Scale multiplies the position: scale ½ at offset 6 gives positions 3 and 3.5.
		{name: "scale", got: func() *mx.Array { return mx.RoPE(x(), 8, false, 16, 0.5, 6, nil) }, dt: mx.Float32, shape: []int{1, 1, 2, 8},
			want: append(ropeWant(row, half8, thetas(3, inv8)), ropeWant(row, half8, thetas(3.5, inv8))...), tol: 1e-6},
		{name: "partial rotate-half", got: func() *mx.Array { return mx.RoPE(px(), 4, false, 16, 1, 0, nil) }, dt: mx.Float32, shape: []int{1, 2, 8},
			want: both([][2]int{{0, 2}, {1, 3}}, prow, inv4, 0), tol: 1e-6},
		{name: "partial traditional", got: func() *mx.Array { return mx.RoPE(px(), 4, true, 16, 1, 0, nil) }, dt: mx.Float32, shape: []int{1, 2, 8},
			want: both([][2]int{{0, 1}, {2, 3}}, prow, inv4, 0), tol: 1e-6},
		{name: "freqs inf is identity", got: func() *mx.Array { return mx.RoPE(fx(), 4, false, 0, 2, 5, freqs()) }, dt: mx.Float32, shape: []int{2, 4},
			want: both([][2]int{{0, 2}, {1, 3}}, frow, []float64{1, 0}, 5), tol: 1e-6},
		// Position 0 is the identity whatever the frequencies.
		{name: "position 0", got: func() *mx.Array { return mx.RoPE(fa(e, row, 1, 8), 8, false, 10000, 1, 0, nil) }, dt: mx.Float32, shape: []int{1, 8}, want: row},
	})
}

func TestScaledDotProductAttention(t *testing.T) {
	e := mxtest.Go(t)
	// One head: q = [1 0], keys k0 = [1 0], k1 = [0 1], values v0 = [4 0], v1 = [0 8].
	// Scores q·k·scale = [ln3, 0] at scale ln3, so the weights are [3, 1]/4 and the
	// output ¾·v0 + ¼·v1 = [3, 2].
	kv := []float32{1, 0, 0, 1}
	vv := []float32{4, 0, 0, 8}
	// kv head 1 swaps its keys: scores [0, ln3], weights [1, 3]/4, output [1, 6].
	kSwap := []float32{0, 1, 1, 0}
	k2 := append(slices.Clone(kv), kSwap...)
	v2 := append(slices.Clone(vv), vv...)
	q1 := []float32{1, 0}
	runCases(t, []opCase{
		{name: "one head", got: func() *mx.Array {
			return mx.ScaledDotProductAttention(fa(e, q1, 1, 1, 1, 2), fa(e, kv, 1, 1, 2, 2), fa(e, vv, 1, 1, 2, 2), ln3, nil)
		}, dt: mx.Float32, shape: []int{1, 1, 1, 2}, want: []float32{3, 2}, tol: 1e-6},
		// GQA with 4 query heads over 2 kv heads: head h reads kv head h/2, so heads 0, 1
		// give [3 2] and heads 2, 3 give [1 6] (h mod 2 would interleave them).
		{name: "gqa", got: func() *mx.Array {
			q := fa(e, []float32{1, 0, 1, 0, 1, 0, 1, 0}, 1, 4, 1, 2)
			return mx.ScaledDotProductAttention(q, fa(e, k2, 1, 2, 2, 2), fa(e, v2, 1, 2, 2, 2), ln3, nil)
		}, dt: mx.Float32, shape: []int{1, 4, 1, 2}, want: []float32{3, 2, 3, 2, 1, 6, 1, 6}, tol: 1e-6},
		// Causal mask [[T F] [T T]] (shape [2,2], broadcast): query 0 sees only k0 → v0;
		// query 1 sees both → [3 2].
		{name: "mask", got: func() *mx.Array {
			mask := ba(e, []bool{true, false, true, true}, 2, 2)
			return mx.ScaledDotProductAttention(fa(e, []float32{1, 0, 1, 0}, 1, 1, 2, 2), fa(e, kv, 1, 1, 2, 2), fa(e, vv, 1, 1, 2, 2), ln3, mask)
		}, dt: mx.Float32, shape: []int{1, 1, 2, 2}, want: []float32{4, 0, 3, 2}, tol: 1e-6},
		// A per-head mask [1,4,1,2] under GQA: heads 1 and 3 may only see key 1, so they
		// return v1 = [0 8]; heads 0 and 2 see both keys as above.
		{name: "gqa per-head mask", got: func() *mx.Array {
			q := fa(e, []float32{1, 0, 1, 0, 1, 0, 1, 0}, 1, 4, 1, 2)
			mask := ba(e, []bool{true, true, false, true, true, true, false, true}, 1, 4, 1, 2)
			return mx.ScaledDotProductAttention(q, fa(e, k2, 1, 2, 2, 2), fa(e, v2, 1, 2, 2, 2), ln3, mask)
		}, dt: mx.Float32, shape: []int{1, 4, 1, 2}, want: []float32{3, 2, 0, 8, 1, 6, 0, 8}, tol: 1e-6},
		// Batch 2, Lq 1, Lk 1: the single key gets weight 1 whatever the score, so each
		// batch returns its own value.
		{name: "batch", got: func() *mx.Array {
			return mx.ScaledDotProductAttention(fa(e, []float32{5, -5, 1, 1}, 2, 1, 1, 2), fa(e, []float32{1, 2, 3, 4}, 2, 1, 1, 2), fa(e, []float32{7, 8, 9, 10}, 2, 1, 1, 2), 1, nil)
		}, dt: mx.Float32, shape: []int{2, 1, 1, 2}, want: []float32{7, 8, 9, 10}, tol: 1e-6},
	})
}

func TestQuantization(t *testing.T) {
	e := mxtest.Go(t)
	// Row 0 is −2 + 0.25·(j mod 16): |min| = 2 > |max| = 1.75, so the minimum is the
	// edge: scale = 3.75/15 = 0.25, q0 = rint(−2/0.25) = −8, scale = −2/−8 = 0.25,
	// bias = −2 and code(j) = (w + 2)/0.25 = j mod 16.
	// Row 1 is 3.75 − 0.25·(j mod 16): |max| ≥ |min| so the maximum is the edge and the
	// scale is negative: scale = −0.25, bias = 3.75, code(j) = j mod 16 again.
	// Codes 0..15 pack 8 to a word, element j at bit 4·(j mod 8): 0x76543210, 0xFEDCBA98.
	w := make([]float32, 128)
	for j := range 64 {
		w[j] = -2 + 0.25*float32(j%16)
		w[64+j] = 3.75 - 0.25*float32(j%16)
	}
	W := fa(e, w, 2, 64)
	wq, scales, biases := mx.Quantize(W, 32, 4)
	t.Run("exact", func(t *testing.T) {
		if wq.DType() != mx.Uint32 || !slices.Equal(wq.Shape(), []int{2, 8}) {
			t.Fatalf("packed %v", wq)
		}
		words := wq.Raw().([]uint32)
		for i, got := range words {
			want := uint32(0x76543210)
			if i%2 == 1 {
				want = 0xFEDCBA98
			}
			if got != want {
				t.Fatalf("word %d = %#08x, want %#08x (all %#08x)", i, got, want, words)
			}
		}
		expect(t, scales, mx.Float32, []int{2, 2}, []float32{0.25, 0.25, -0.25, -0.25}, 0)
		expect(t, biases, mx.Float32, []int{2, 2}, []float32{-2, -2, 3.75, 3.75}, 0)
		expect(t, mx.Dequantize(wq, scales, biases, 32, 4), mx.Float32, []int{2, 64}, w, 0)
	})

	// Random weights. An element whose exact code c = (w − bias)/scale lies inside the code
	// range [0, n], n = 2^bits − 1, comes back within half a step |scale|/2. Outside it the
	// code is clamped: MLX snaps the scale s0 = range/n to s = edge/q0 with
	// |q0| = rint(|edge|/s0) ≤ |edge|/s0 + ½ and |edge| ≥ range/2, so s ≥ s0·n/(n+1); code n
	// then sits n·s ≥ range·n/(n+1) from the edge and the far end misses by at most
	// range/(n+1) = s0·n/(n+1) ≤ |s|: one step.
	rng := newRand(7)
	for _, bits := range []int{2, 3, 4, 5, 6, 8} {
		n := float64(int(1)<<bits - 1)
		for _, gs := range []int{32, 64, 128} {
			R := mxtest.RandN(e, rng, 3, 128)
			q, s, b := mx.Quantize(R, gs, bits)
			back := mx.Dequantize(q, s, b, gs, bits).Float32s()
			orig, sv, bv := R.Float32s(), s.Float32s(), b.Float32s()
			for i := range orig {
				scale, bias := float64(sv[i/gs]), float64(bv[i/gs])
				c := (float64(orig[i]) - bias) / scale
				bound := math.Abs(scale)*(1+1e-4) + 1e-7
				if c >= -0.5 && c <= n+0.5 {
					bound = math.Abs(scale)/2*(1+1e-4) + 1e-7
				}
				if d := math.Abs(float64(back[i] - orig[i])); d > bound {
					t.Fatalf("bits %d group %d: element %d (code %.3f) off by %g, bound %g", bits, gs, i, c, d, bound)
				}
			}
		}
	}

	// quantized_matmul is matmul against the dequantized weight, in both layouts.
	x := mxtest.RandN(e, rng, 3, 64)
	WN := mxtest.RandN(e, rng, 5, 64) // [N, K] for transpose
	qT, sT, bT := mx.Quantize(WN, 32, 4)
	dT := mx.Dequantize(qT, sT, bT, 32, 4)
	t.Run("quantized_matmul transpose", func(t *testing.T) {
		want := mx.Matmul(x, mx.Transpose(dT)).Float32s()
		expect(t, mx.QuantizedMatmul(x, qT, sT, bT, true, 32, 4), mx.Float32, []int{3, 5}, want, 1e-5)
	})
	WK := mxtest.RandN(e, rng, 64, 96) // [K, N] for no transpose
	qN, sN, bN := mx.Quantize(WK, 32, 8)
	dN := mx.Dequantize(qN, sN, bN, 32, 8)
	t.Run("quantized_matmul", func(t *testing.T) {
		want := mx.Matmul(x, dN).Float32s()
		expect(t, mx.QuantizedMatmul(x, qN, sN, bN, false, 32, 8), mx.Float32, []int{3, 96}, want, 1e-5)
	})
	t.Run("quantized_matmul batched x", func(t *testing.T) {
		x3 := mx.Reshape(mx.Concatenate([]*mx.Array{x, x}, 0), 2, 3, 64)
		want := mx.Matmul(x3, mx.Transpose(dT)).Float32s()
		expect(t, mx.QuantizedMatmul(x3, qT, sT, bT, true, 32, 4), mx.Float32, []int{2, 3, 5}, want, 1e-5)
	})

	// gather_qmm: row m of x times the dequantized expert idx[m].
	experts := mxtest.RandN(e, rng, 3, 6, 64) // [E, N, K] for transpose
	eq, es, eb := mx.Quantize(experts, 64, 4)
	ed := mx.Dequantize(eq, es, eb, 64, 4)
	xs := mxtest.RandN(e, rng, 2, 2, 64)
	ids := []int32{2, 0, 2, 1}
	t.Run("gather_qmm transpose", func(t *testing.T) {
		var want []float32
		for m, id := range ids {
			row := mx.Reshape(mx.SliceAxis(mx.Reshape(xs, 4, 64), 0, m, m+1), 1, 64)
			wExp := mx.Reshape(mx.SliceAxis(ed, 0, int(id), int(id)+1), 6, 64)
			want = append(want, mx.Matmul(row, mx.Transpose(wExp)).Float32s()...)
		}
		got := mx.GatherQMM(xs, eq, es, eb, ia(e, ids, 2, 2), true, 64, 4, false)
		expect(t, got, mx.Float32, []int{2, 2, 6}, want, 1e-5)
	})
	expertsN := mxtest.RandN(e, rng, 3, 64, 32) // [E, K, N]
	nq, ns, nb := mx.Quantize(expertsN, 32, 4)
	nd := mx.Dequantize(nq, ns, nb, 32, 4)
	t.Run("gather_qmm", func(t *testing.T) {
		var want []float32
		for m, id := range ids {
			row := mx.SliceAxis(mx.Reshape(xs, 4, 64), 0, m, m+1)
			wExp := mx.Reshape(mx.SliceAxis(nd, 0, int(id), int(id)+1), 64, 32)
			want = append(want, mx.Matmul(row, wExp).Float32s()...)
		}
		got := mx.GatherQMM(mx.Reshape(xs, 4, 64), nq, ns, nb, ia(e, ids, 4), false, 32, 4, false)
		expect(t, got, mx.Float32, []int{4, 32}, want, 1e-5)
	})
}

func TestRandom(t *testing.T) {
	e := mxtest.Go(t)
	t.Run("key", func(t *testing.T) {
		// mlx.core.random.key puts the high 32 bits of the seed first.
		expect(t, mx.Key(e, 0), mx.Uint32, []int{2}, []int32{0, 0}, 0)
		expect(t, mx.Key(e, 1<<32+5), mx.Uint32, []int{2}, []int32{1, 5}, 0)
	})
	t.Run("mlx seed 0 randint", func(t *testing.T) {
		// mx.random.seed(0); mx.random.randint(0, 262144, (1, 256)) in MLX: the global key
		// is split in two and the second half drawn from. Reference ids from MLX.
		k := mx.SplitKey(mx.Key(e, 0), 2)[1]
		got := mx.Randint(k, []int{1, 256}, 0, 262144, mx.Int32)
		if got.DType() != mx.Int32 || !slices.Equal(got.Shape(), []int{1, 256}) {
			t.Fatalf("randint gave %v", got)
		}
		v := got.Int32s()
		if first := v[:8]; !slices.Equal(first, []int32{185000, 41720, 189586, 58903, 148497, 10569, 138740, 40704}) {
			t.Errorf("first ids %v", first)
		}
		if last := v[252:]; !slices.Equal(last, []int32{113009, 52994, 195024, 100784}) {
			t.Errorf("last ids %v", last)
		}
	})
	t.Run("split", func(t *testing.T) {
		ks := mx.SplitKey(mx.Key(e, 3), 3)
		if len(ks) != 3 {
			t.Fatalf("%d keys", len(ks))
		}
		seen := map[[2]int32]bool{}
		for _, k := range ks {
			if !slices.Equal(k.Shape(), []int{2}) || k.DType() != mx.Uint32 {
				t.Fatalf("key %v", k)
			}
			v := k.Int32s()
			seen[[2]int32{v[0], v[1]}] = true
		}
		if len(seen) != 3 {
			t.Errorf("split keys repeat: %v", seen)
		}
		// Same key, same bits; different keys, different bits.
		a := mx.RandomBits(ks[0], 4, 4).Int32s()
		if b := mx.RandomBits(ks[0], 4, 4).Int32s(); !slices.Equal(a, b) {
			t.Errorf("RandomBits is not a function of its key")
		}
		if c := mx.RandomBits(ks[1], 4, 4).Int32s(); slices.Equal(a, c) {
			t.Errorf("two keys gave the same bits")
		}
	})
	t.Run("uniform", func(t *testing.T) {
		u := mx.Uniform(mx.Key(e, 1), []int{2000}, -2, 3, mx.Float32)
		v := u.Float32s()
		lo, hi, sum := float32(math.Inf(1)), float32(math.Inf(-1)), 0.0
		for _, x := range v {
			if x < -2 || x >= 3 {
				t.Fatalf("uniform draw %v outside [-2, 3)", x)
			}
			lo, hi, sum = min(lo, x), max(hi, x), sum+float64(x)
		}
		// 2000 draws of U[−2, 3): mean ½ with standard error 5/√12/√2000 ≈ 0.032; the
		// chance that no draw falls in the outer 1% at either end is 0.99²⁰⁰⁰ ≈ 2e-9.
		if mean := sum / 2000; math.Abs(mean-0.5) > 0.15 {
			t.Errorf("uniform mean %v, want ≈ 0.5", mean)
		}
		if lo > -1.95 || hi < 2.95 {
			t.Errorf("uniform range [%v, %v] does not cover [-2, 3)", lo, hi)
		}
		if b := mx.Uniform(mx.Key(e, 1), []int{2, 3}, 0, 1, mx.BFloat16); b.DType() != mx.BFloat16 || !slices.Equal(b.Shape(), []int{2, 3}) {
			t.Errorf("uniform bf16 gave %v", b)
		}
	})
	t.Run("normal", func(t *testing.T) {
		v := mx.Normal(mx.Key(e, 2), []int{4000}, mx.Float32).Float32s()
		var s, s2 float64
		for _, x := range v {
			s += float64(x)
			s2 += float64(x) * float64(x)
		}
		// Mean 0 (s.e. 0.016) and variance 1 (s.e. ≈ √(2/4000) = 0.022).
		if m, va := s/4000, s2/4000; math.Abs(m) > 0.08 || math.Abs(va-1) > 0.1 {
			t.Errorf("normal mean %v variance %v", m, va)
		}
	})
	t.Run("randint range", func(t *testing.T) {
		for _, x := range mx.Randint(mx.Key(e, 4), []int{500}, -3, 4, mx.Int32).Int32s() {
			if x < -3 || x >= 4 {
				t.Fatalf("randint draw %d outside [-3, 4)", x)
			}
		}
	})
	t.Run("categorical", func(t *testing.T) {
		k := mx.Key(e, 5)
		logits := mxtest.RandN(e, newRand(1), 3, 5)
		if c := mx.Categorical(k, logits, -1); c.DType() != mx.Int32 || !slices.Equal(c.Shape(), []int{3}) {
			t.Errorf("categorical axis -1 gave %v", c)
		}
		if c := mx.Categorical(k, logits, 0); !slices.Equal(c.Shape(), []int{5}) {
			t.Errorf("categorical axis 0 gave %v", c)
		}
		if c := mx.Categorical(k, mxtest.RandN(e, newRand(2), 2, 3, 4), 1); !slices.Equal(c.Shape(), []int{2, 4}) {
			t.Errorf("categorical 3-D axis 1 gave %v", c)
		}
		// −∞ logits are never drawn: each row has one finite logit.
		one := fa(e, []float32{ninf, ninf, 0, ninf, 3, ninf, ninf, ninf, ninf, ninf, ninf, -1}, 3, 4)
		for s := range uint64(10) {
			expect(t, mx.Categorical(mx.Key(e, s), one, 1), mx.Int32, []int{3}, []int32{2, 0, 3}, 0)
		}
		// Drawn ids stay in range.
		for _, id := range mx.Categorical(k, mx.Zeros(e, []int{200, 7}, mx.Float32), -1).Int32s() {
			if id < 0 || id >= 7 {
				t.Fatalf("categorical id %d outside [0, 7)", id)
			}
		}
	})
}

// TestShapeErrors checks that every misuse panics with a message naming the op.
func TestShapeErrors(t *testing.T) {
	e := mxtest.Go(t)
	z := func(shape ...int) *mx.Array { return mx.Zeros(e, shape, mx.Float32) }
	wq, ws, wb := mx.Quantize(z(4, 64), 32, 4)
	eq, es, eb := mx.Quantize(z(2, 4, 64), 32, 4)
	cases := []struct {
		name  string
		f     func()
		parts []string
	}{
		{"matmul", func() { mx.Matmul(z(2, 3), z(4, 5)) }, []string{"matmul", "[2 3]", "[4 5]"}},
		{"matmul batch", func() { mx.Matmul(z(2, 2, 3), z(3, 3, 4)) }, []string{"matmul", "[2 2 3]", "[3 3 4]"}},
		{"matmul scalar", func() { mx.Matmul(z(), z(3)) }, []string{"matmul", "scalar"}},
		{"reshape", func() { mx.Reshape(z(2, 3), 4) }, []string{"reshape", "[2 3]", "[4]"}},
		{"reshape -1", func() { mx.Reshape(z(2, 3), -1, 4) }, []string{"reshape", "[2 3]"}},
		{"reshape two -1", func() { mx.Reshape(z(2, 3), -1, -1) }, []string{"reshape", "-1"}},
		{"sum axis", func() { mx.Sum(z(2, 3), false, 2) }, []string{"sum", "axis"}},
		{"mean axis", func() { mx.Mean(z(2, 3), false, -3) }, []string{"mean", "axis"}},
		{"max repeated axis", func() { mx.Max(z(2, 3), false, 1, -1) }, []string{"max", "repeated axis"}},
		{"argmax axis", func() { mx.Argmax(z(2), 1, false) }, []string{"argmax", "axis"}},
		{"softmax axis", func() { mx.Softmax(z(2), 3) }, []string{"softmax", "axis"}},
		{"cumsum axis", func() { mx.Cumsum(z(2), -2, false, true) }, []string{"cumsum", "axis"}},
		{"add", func() { mx.Add(z(2, 3), z(4)) }, []string{"add", "[2 3]", "[4]"}},
		{"where", func() { mx.Where(ba(e, []bool{true, false}, 2), z(3), z(3)) }, []string{"where"}},
		{"transpose", func() { mx.Transpose(z(2, 3), 0) }, []string{"transpose", "[2 3]"}},
		{"transpose repeated", func() { mx.Transpose(z(2, 3), 1, 1) }, []string{"transpose", "repeated"}},
		{"broadcast_to", func() { mx.BroadcastTo(z(2), 3) }, []string{"broadcast_to", "[2]", "[3]"}},
		{"slice stride", func() { mx.Slice(z(4), []int{3}, []int{0}, []int{-1}) }, []string{"slice", "stride"}},
		{"slice rank", func() { mx.Slice(z(4, 4), []int{0}, []int{1}, nil) }, []string{"slice", "[4 4]"}},
		{"slice_update", func() { mx.SliceUpdate(z(4), z(3), []int{0}, []int{2}, nil) }, []string{"slice_update", "[3]", "[2]"}},
		{"concatenate", func() { mx.Concatenate([]*mx.Array{z(2, 3), z(3, 3)}, 1) }, []string{"concatenate", "[2 3]", "[3 3]"}},
		{"concatenate dtype", func() { mx.Concatenate([]*mx.Array{z(2), ia(e, []int32{1}, 1)}, 0) }, []string{"concatenate", "int32"}},
		{"concatenate none", func() { mx.Concatenate(nil, 0) }, []string{"concatenate"}},
		{"split", func() { mx.SplitEqual(z(4), 3, 0) }, []string{"split", "3"}},
		{"split indices decreasing", func() { mx.Split(z(6), []int{4, 2}, 0) }, []string{"split", "[4 2]", "6"}},
		{"split index past the axis", func() { mx.Split(z(6), []int{7}, 0) }, []string{"split", "[7]", "6"}},
		{"squeeze", func() { mx.Squeeze(z(2, 3), 0) }, []string{"squeeze"}},
		{"argpartition kth", func() { mx.Argpartition(z(4), 4, 0) }, []string{"argpartition", "kth 4"}},
		{"take float indices", func() { mx.Take(z(4), z(2), 0) }, []string{"take", "float32"}},
		{"take out of range", func() { mx.Take(z(4), ia(e, []int32{4}, 1), 0) }, []string{"take", "index 4"}},
		{"take below range", func() { mx.Take(z(4), ia(e, []int32{-5}, 1), 0) }, []string{"take", "-5"}},
		{"take_along_axis rank", func() { mx.TakeAlongAxis(z(2, 3), ia(e, []int32{0}, 1), 1) }, []string{"take_along_axis", "[2 3]"}},
		{"take_along_axis range", func() { mx.TakeAlongAxis(z(2, 3), ia(e, []int32{3}, 1, 1), 1) }, []string{"take_along_axis", "index 3"}},
		{"rms_norm weight", func() { mx.RMSNorm(z(2, 4), z(3), 1e-6) }, []string{"rms_norm", "[3]", "[2 4]"}},
		{"rope odd dims", func() { mx.RoPE(z(1, 2, 8), 3, false, 10000, 1, 0, nil) }, []string{"rope", "dims 3"}},
		{"rope dims too big", func() { mx.RoPE(z(1, 2, 8), 10, false, 10000, 1, 0, nil) }, []string{"rope", "dims 10"}},
		{"rope freqs shape", func() { mx.RoPE(z(1, 2, 8), 8, false, 0, 1, 0, z(3)) }, []string{"rope", "freqs"}},
		{"rope no base", func() { mx.RoPE(z(1, 2, 8), 8, false, 0, 1, 0, nil) }, []string{"rope", "base"}},
		{"sdpa head dim", func() { mx.ScaledDotProductAttention(z(1, 2, 3, 4), z(1, 2, 5, 8), z(1, 2, 5, 8), 1, nil) }, []string{"sdpa", "[1 2 3 4]"}},
		{"sdpa gqa", func() { mx.ScaledDotProductAttention(z(1, 3, 3, 4), z(1, 2, 5, 4), z(1, 2, 5, 4), 1, nil) }, []string{"sdpa", "[1 3 3 4]"}},
		{"sdpa mask dtype", func() { mx.ScaledDotProductAttention(z(1, 1, 2, 4), z(1, 1, 2, 4), z(1, 1, 2, 4), 1, z(2, 2)) }, []string{"sdpa", "bool"}},
		{"sdpa mask shape", func() {
			mx.ScaledDotProductAttention(z(1, 1, 2, 4), z(1, 1, 2, 4), z(1, 1, 2, 4), 1, ba(e, []bool{true, true, true}, 3))
		}, []string{"sdpa", "mask [3]"}},
		{"quantize bits", func() { mx.Quantize(z(2, 64), 32, 7) }, []string{"quantize", "bits 7"}},
		{"quantize group", func() { mx.Quantize(z(2, 64), 48, 4) }, []string{"quantize", "group size 48"}},
		{"quantize cols", func() { mx.Quantize(z(2, 48), 32, 4) }, []string{"quantize", "48"}},
		{"dequantize scales", func() { mx.Dequantize(wq, ws, z(4, 3), 32, 4) }, []string{"dequantize", "[4 3]"}},
		{"dequantize packed dtype", func() { mx.Dequantize(z(4, 8), ws, wb, 32, 4) }, []string{"dequantize", "uint32"}},
		{"quantized_matmul K", func() { mx.QuantizedMatmul(z(2, 32), wq, ws, wb, true, 32, 4) }, []string{"quantized_matmul", "[2 32]"}},
		{"quantized_matmul no transpose K", func() { mx.QuantizedMatmul(z(2, 64), wq, ws, wb, false, 32, 4) }, []string{"quantized_matmul", "[2 64]"}},
		{"gather_qmm 2-D", func() { mx.GatherQMM(z(2, 64), wq, ws, wb, ia(e, []int32{0, 0}, 2), true, 32, 4, false) }, []string{"gather_qmm", "[4 8]"}},
		{"gather_qmm indices", func() { mx.GatherQMM(z(2, 64), eq, es, eb, ia(e, []int32{0}, 1), true, 32, 4, false) }, []string{"gather_qmm", "[1]"}},
		{"gather_qmm expert", func() { mx.GatherQMM(z(1, 64), eq, es, eb, ia(e, []int32{2}, 1), true, 32, 4, false) }, []string{"gather_qmm", "2"}},
		{"randint range", func() { mx.Randint(mx.Key(e, 0), []int{2}, 5, 5, mx.Int32) }, []string{"randint", "[5, 5)"}},
		{"split key", func() { mx.SplitKey(mx.Key(e, 0), 0) }, []string{"split", "0"}},
		{"categorical axis", func() { mx.Categorical(mx.Key(e, 0), z(2, 3), 2) }, []string{"categorical", "axis"}},
		{"from slice length", func() { fa(e, []float32{1, 2, 3}, 2, 2) }, []string{"FromSlice", "3", "[2 2]"}},
		{"from slice negative", func() { mx.Full(e, []int{2, -1}, 0, mx.Float32) }, []string{"Full", "negative"}},
		{"from bytes length", func() { mx.FromBytes(e, []byte{1, 2, 3}, []int{1}, mx.Float32) }, []string{"FromBytes", "3 bytes"}},
		{"item", func() { z(2).Item() }, []string{"Item", "[2]"}},
		{"arange step", func() { mx.Arange(e, 0, 1, 0, mx.Float32) }, []string{"Arange", "step"}},
		{"value_and_grad non-scalar", func() {
			mx.Grad(func(a []*mx.Array) *mx.Array { return a[0] })([]*mx.Array{z(2)})
		}, []string{"value_and_grad", "[2]"}},
		{"value_and_grad argnum", func() {
			mx.Grad(func(a []*mx.Array) *mx.Array { return mx.Sum(a[0], false) }, 1)([]*mx.Array{z(2)})
		}, []string{"value_and_grad", "argnum 1"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { mustPanic(t, c.f, c.parts...) })
	}
}
