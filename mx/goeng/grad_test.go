package goeng_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
)

// gradCase checks one op: args are drawn uniform in [-1, 1) (positive [0.5, 1.5) when
// pos is set); the scalar is Σ op(args)⊙R.
type gradCase struct {
	name   string
	shapes [][]int
	pos    bool
	op     func(a []*mx.Array) *mx.Array
	opt    mxtest.GradCheckOptions
}

func TestGradients(t *testing.T) {
	e := mxtest.Go(t)
	idx := func(v []int32, shape ...int) *mx.Array { return mx.FromInt32(e, v, shape...) }
	mask := mx.FromBool(e, []bool{true, false, true, true, true, false, true, true, false, true, true, true}, 1, 1, 3, 4)
	freqs := mx.FromFloat32(e, []float32{1, 3.5, 1e30, 2}, 4)
	wq, ws, wb := mx.Quantize(mx.MulScalar(mxtest.RandN(e, rand.New(rand.NewPCG(5, 5)), 6, 64), 0.5), 32, 4)
	eq, es, eb := mx.Quantize(mxtest.RandN(e, rand.New(rand.NewPCG(6, 6)), 3, 6, 64), 64, 8)
	cases := []gradCase{
		{name: "negative", shapes: [][]int{{3, 4}}, op: func(a []*mx.Array) *mx.Array { return mx.Negative(a[0]) }},
		{name: "exp", shapes: [][]int{{3, 4}}, op: func(a []*mx.Array) *mx.Array { return mx.Exp(a[0]) }},
		{name: "log", shapes: [][]int{{3, 4}}, pos: true, op: func(a []*mx.Array) *mx.Array { return mx.Log(a[0]) }},
		{name: "sqrt", shapes: [][]int{{3, 4}}, pos: true, op: func(a []*mx.Array) *mx.Array { return mx.Sqrt(a[0]) }},
		{name: "rsqrt", shapes: [][]int{{3, 4}}, pos: true, op: func(a []*mx.Array) *mx.Array { return mx.Rsqrt(a[0]) }},
		{name: "tanh", shapes: [][]int{{3, 4}}, op: func(a []*mx.Array) *mx.Array { return mx.Tanh(a[0]) }},
		{name: "sigmoid", shapes: [][]int{{3, 4}}, op: func(a []*mx.Array) *mx.Array { return mx.Sigmoid(a[0]) }},
		{name: "abs", shapes: [][]int{{3, 4}}, pos: true, op: func(a []*mx.Array) *mx.Array { return mx.Abs(a[0]) }},
		{name: "square", shapes: [][]int{{3, 4}}, op: func(a []*mx.Array) *mx.Array { return mx.Square(a[0]) }},
		{name: "sin", shapes: [][]int{{3, 4}}, op: func(a []*mx.Array) *mx.Array { return mx.Sin(a[0]) }},
		{name: "cos", shapes: [][]int{{3, 4}}, op: func(a []*mx.Array) *mx.Array { return mx.Cos(a[0]) }},
		{name: "erf", shapes: [][]int{{3, 4}}, op: func(a []*mx.Array) *mx.Array { return mx.Erf(a[0]) }},
		{name: "log1p", shapes: [][]int{{3, 4}}, pos: true, op: func(a []*mx.Array) *mx.Array { return mx.Log1p(a[0]) }},
		{name: "reciprocal", shapes: [][]int{{3, 4}}, pos: true, op: func(a []*mx.Array) *mx.Array { return mx.Reciprocal(a[0]) }},
		{name: "add broadcast", shapes: [][]int{{2, 3, 4}, {3, 1}}, op: func(a []*mx.Array) *mx.Array { return mx.Add(a[0], a[1]) }},
		{name: "subtract", shapes: [][]int{{3, 4}, {4}}, op: func(a []*mx.Array) *mx.Array { return mx.Subtract(a[0], a[1]) }},
		{name: "multiply", shapes: [][]int{{2, 1, 4}, {3, 1}}, op: func(a []*mx.Array) *mx.Array { return mx.Multiply(a[0], a[1]) }},
		{name: "divide", shapes: [][]int{{3, 4}, {3, 4}}, pos: true, op: func(a []*mx.Array) *mx.Array { return mx.Divide(a[0], a[1]) }},
		{name: "maximum", shapes: [][]int{{3, 4}, {3, 4}}, op: func(a []*mx.Array) *mx.Array { return mx.Maximum(a[0], a[1]) }},
		{name: "minimum", shapes: [][]int{{3, 4}, {4}}, op: func(a []*mx.Array) *mx.Array { return mx.Minimum(a[0], a[1]) }},
		{name: "power", shapes: [][]int{{3, 4}, {3, 4}}, pos: true, op: func(a []*mx.Array) *mx.Array { return mx.Power(a[0], a[1]) }},
		{name: "where", shapes: [][]int{{3, 4}, {1, 4}}, op: func(a []*mx.Array) *mx.Array {
			return mx.Where(mx.Greater(a[0], a[1]), a[0], mx.MulScalar(a[1], 3))
		}},
		// A round trip through a 16-bit float passes the gradient straight through. The
		// central difference sees the rounding: at most half a unit in the last place on
		// each side, over a step of 2·Eps (f16: 2^-11/2e-2 ≈ 2.4%; bf16 with Eps 0.1:
		// 2^-8/0.2 ≈ 2%).
		{name: "astype bf16", shapes: [][]int{{3, 4}}, op: func(a []*mx.Array) *mx.Array { return mx.AsType(mx.AsType(a[0], mx.BFloat16), mx.Float32) }, opt: mxtest.GradCheckOptions{Eps: 0.1, RTol: 5e-2, ATol: 2e-2}},
		{name: "reshape", shapes: [][]int{{3, 4}}, op: func(a []*mx.Array) *mx.Array { return mx.Reshape(a[0], 2, 6) }},
		{name: "transpose", shapes: [][]int{{2, 3, 4}}, op: func(a []*mx.Array) *mx.Array { return mx.Transpose(a[0], 2, 0, 1) }},
		{name: "broadcast_to", shapes: [][]int{{3, 1}}, op: func(a []*mx.Array) *mx.Array { return mx.BroadcastTo(a[0], 2, 3, 4) }},
		{name: "slice strided", shapes: [][]int{{5, 6}}, op: func(a []*mx.Array) *mx.Array {
			return mx.Slice(a[0], []int{1, 0}, []int{5, 6}, []int{2, 3})
		}},
		{name: "slice_update", shapes: [][]int{{4, 5}, {2, 3}}, op: func(a []*mx.Array) *mx.Array {
			return mx.SliceUpdate(a[0], a[1], []int{1, 1}, []int{3, 4}, nil)
		}},
		{name: "concatenate", shapes: [][]int{{2, 3}, {2, 2}}, op: func(a []*mx.Array) *mx.Array { return mx.Concatenate(a, 1) }},
		{name: "sum axes", shapes: [][]int{{2, 3, 4}}, op: func(a []*mx.Array) *mx.Array { return mx.Sum(a[0], false, 0, 2) }},
		{name: "mean keepdims", shapes: [][]int{{2, 3, 4}}, op: func(a []*mx.Array) *mx.Array { return mx.Mean(a[0], true, 1) }},
		{name: "max", shapes: [][]int{{3, 5}}, op: func(a []*mx.Array) *mx.Array { return mx.Max(a[0], false, 1) }},
		{name: "min", shapes: [][]int{{3, 5}}, op: func(a []*mx.Array) *mx.Array { return mx.Min(a[0], false, 0) }},
		{name: "prod", shapes: [][]int{{3, 4}}, pos: true, op: func(a []*mx.Array) *mx.Array { return mx.Prod(a[0], false, 1) }},
		{name: "logsumexp", shapes: [][]int{{3, 5}}, op: func(a []*mx.Array) *mx.Array { return mx.LogSumExp(a[0], false, -1) }},
		{name: "softmax axis 0", shapes: [][]int{{4, 3}}, op: func(a []*mx.Array) *mx.Array { return mx.Softmax(a[0], 0) }},
		{name: "cumsum", shapes: [][]int{{3, 5}}, op: func(a []*mx.Array) *mx.Array { return mx.Cumsum(a[0], 1, false, true) }},
		{name: "cumsum reverse exclusive", shapes: [][]int{{3, 5}}, op: func(a []*mx.Array) *mx.Array { return mx.Cumsum(a[0], 1, true, false) }},
		{name: "matmul batched broadcast", shapes: [][]int{{2, 3, 4}, {4, 5}}, op: func(a []*mx.Array) *mx.Array { return mx.Matmul(a[0], a[1]) }},
		{name: "matmul vector", shapes: [][]int{{4}, {2, 4, 3}}, op: func(a []*mx.Array) *mx.Array { return mx.Matmul(a[0], a[1]) }},
		{name: "take", shapes: [][]int{{5, 3}}, op: func(a []*mx.Array) *mx.Array { return mx.Take(a[0], idx([]int32{4, 0, 4, 2}, 2, 2), 0) }},
		{name: "take_along_axis", shapes: [][]int{{3, 4}}, op: func(a []*mx.Array) *mx.Array {
			return mx.TakeAlongAxis(a[0], idx([]int32{3, 3, 0, 1, 2, 1}, 3, 2), 1)
		}},
		{name: "rms_norm", shapes: [][]int{{3, 8}, {8}}, op: func(a []*mx.Array) *mx.Array { return mx.RMSNorm(a[0], a[1], 1e-6) }},
		{name: "rms_norm no scale", shapes: [][]int{{2, 3, 8}}, op: func(a []*mx.Array) *mx.Array { return mx.RMSNorm(a[0], nil, 1e-6) }},
		{name: "rope", shapes: [][]int{{1, 2, 3, 8}}, op: func(a []*mx.Array) *mx.Array { return mx.RoPE(a[0], 8, false, 10000, 1, 5, nil) }},
		{name: "rope partial traditional", shapes: [][]int{{2, 3, 8}}, op: func(a []*mx.Array) *mx.Array { return mx.RoPE(a[0], 4, true, 100, 1, 0, nil) }},
		{name: "rope freqs", shapes: [][]int{{1, 3, 8}}, op: func(a []*mx.Array) *mx.Array { return mx.RoPE(a[0], 8, false, 0, 1, 2, freqs) }},
		{name: "sdpa gqa mask", shapes: [][]int{{1, 4, 3, 4}, {1, 2, 4, 4}, {1, 2, 4, 4}}, op: func(a []*mx.Array) *mx.Array {
			return mx.ScaledDotProductAttention(a[0], a[1], a[2], 0.5, mask)
		}},
		{name: "quantized_matmul transpose", shapes: [][]int{{2, 64}}, op: func(a []*mx.Array) *mx.Array {
			return mx.QuantizedMatmul(a[0], wq, ws, wb, true, 32, 4)
		}},
		{name: "quantized_matmul", shapes: [][]int{{3, 6}}, op: func(a []*mx.Array) *mx.Array {
			return mx.QuantizedMatmul(a[0], wq, ws, wb, false, 32, 4)
		}},
		{name: "gather_qmm", shapes: [][]int{{4, 64}}, op: func(a []*mx.Array) *mx.Array {
			return mx.GatherQMM(a[0], eq, es, eb, idx([]int32{2, 0, 2, 1}, 4), true, 64, 8, false)
		}},
		{name: "gelu_tanh", shapes: [][]int{{3, 4}}, op: func(a []*mx.Array) *mx.Array { return mx.GELUTanh(a[0]) }},
		{name: "addmm", shapes: [][]int{{2, 3, 5}, {2, 3, 4}, {4, 5}}, op: func(a []*mx.Array) *mx.Array { return mx.AddMM(a[0], a[1], a[2], 1.5, -0.5) }},
		{name: "geglu", shapes: [][]int{{3, 4}, {3, 4}}, op: func(a []*mx.Array) *mx.Array { return mx.GeGLU(a[0], mx.MulScalar(a[1], 2)) }},
		// Expert 1 has no rows: its weight gradient is zero, which the finite differences
		// check too.
		{name: "gather_mm", shapes: [][]int{{5, 4}, {3, 4, 6}}, op: func(a []*mx.Array) *mx.Array {
			return mx.GatherMM(a[0], a[1], idx([]int32{2, 0, 2, 0, 0}, 5), false)
		}},
		{name: "gather_mm sorted", shapes: [][]int{{2, 3, 4}, {3, 4, 6}}, op: func(a []*mx.Array) *mx.Array {
			return mx.GatherMM(a[0], a[1], idx([]int32{0, 0, 1, 1, 1, 2}, 2, 3), true)
		}},
		{name: "gather_mm swapped stack", shapes: [][]int{{5, 4}, {3, 6, 4}}, op: func(a []*mx.Array) *mx.Array {
			return mx.GatherMM(a[0], mx.SwapAxes(a[1], 1, 2), idx([]int32{1, 2, 2, 0, 1}, 5), false)
		}},
		// Appended, not next to astype bf16: each case's inputs are seeded by its index.
		{name: "astype f16", shapes: [][]int{{3, 4}}, op: func(a []*mx.Array) *mx.Array { return mx.AsType(mx.AsType(a[0], mx.Float16), mx.Float32) }, opt: mxtest.GradCheckOptions{RTol: 5e-2, ATol: 2e-2}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(i), 11))
			args := make([]*mx.Array, len(c.shapes))
			nums := make([]int, len(c.shapes))
			for j, s := range c.shapes {
				a := mxtest.RandN(e, rng, s...)
				if c.pos {
					a = mx.AddScalar(mx.MulScalar(mx.Abs(a), 1), 0.5)
				}
				args[j], nums[j] = a, j
			}
			f := func(a []*mx.Array) *mx.Array { return mxtest.Project(c.op(a), uint64(i)) }
			mxtest.GradCheck(t, f, args, nums, c.opt)
		})
	}
}

// TestGELUTanhGradValues checks the fused VJP at hand-derived points:
// d/dx = 0.5·(1 + t) + 0.5·x·(1 − t²)·√(2/π)·(1 + 3·0.044715·x²), t = tanh u (values of
// u and t as in TestUnary):
//
//	x = 0: 0.5 + 0 = 0.5;
//	x = 1: 0.5·1.6823839812 + 0.5·0.5343521022·0.9049167852 = 0.8411919906 + 0.2417720932 = 1.0829640838;
//	x = 2: 0.5·1.9545976941 + 1·0.0887432424·1.2260134584 = 0.9772988471 + 0.1088004096 = 1.0860992566;
//	GELU(x) − GELU(−x) = x makes d(x) + d(−x) = 1: d(−1) = −0.0829640838, d(−2) = −0.0860992566;
//	x = ±100: t = ±1 exactly, so 1 and 0 (no NaN from x³ or 1 + t).
func TestGELUTanhGradValues(t *testing.T) {
	e := mxtest.Go(t)
	x := mx.FromFloat32(e, []float32{0, 1, -1, 2, -2, 100, -100}, 7)
	g := mx.Grad(func(a []*mx.Array) *mx.Array { return mx.Sum(mx.GELUTanh(a[0]), false) })([]*mx.Array{x})[0].Float32s()
	want := []float64{0.5, 1.0829640838, -0.0829640838, 1.0860992566, -0.0860992566, 1, 0}
	for i, w := range want {
		if d := math.Abs(float64(g[i]) - w); !(d <= 1e-6) {
			t.Errorf("grad[%d] = %v, want %v", i, g[i], w)
		}
	}
}

func TestStopGradientBlocks(t *testing.T) {
	e := mxtest.Go(t)
	x := mx.FromFloat32(e, []float32{1, 2, 3}, 3)
	// f = Σ x·stop(x) has gradient stop(x) = x, not 2x.
	g := mx.Grad(func(a []*mx.Array) *mx.Array {
		return mx.Sum(mx.Multiply(a[0], mx.StopGradient(a[0])), false)
	})([]*mx.Array{x})[0].Float32s()
	for i, want := range []float32{1, 2, 3} {
		if g[i] != want {
			t.Fatalf("grad[%d] = %v, want %v", i, g[i], want)
		}
	}
}

func TestIntegerArgumentsGetNoGradient(t *testing.T) {
	e := mxtest.Go(t)
	x := mx.FromFloat32(e, []float32{1, 2, 3}, 3)
	i := mx.FromInt32(e, []int32{2, 0}, 2)
	_, g := mx.ValueAndGrad(func(a []*mx.Array) []*mx.Array {
		return []*mx.Array{mx.Sum(mx.Take(a[0], a[1], 0), false)}
	})([]*mx.Array{x, i})
	if g[1] != nil {
		t.Fatalf("integer argument got a gradient")
	}
	// Σ x[[2,0]] → d/dx = [1, 0, 1].
	got := g[0].Float32s()
	for k, want := range []float32{1, 0, 1} {
		if got[k] != want {
			t.Fatalf("grad = %v, want [1 0 1]", got)
		}
	}
}

func TestAuxOutputsAndUnusedArgs(t *testing.T) {
	e := mxtest.Go(t)
	x := mx.FromFloat32(e, []float32{3}, 1)
	y := mx.FromFloat32(e, []float32{5}, 1)
	vals, g := mx.ValueAndGrad(func(a []*mx.Array) []*mx.Array {
		sq := mx.Square(a[0])
		return []*mx.Array{mx.Sum(sq, false), sq}
	})([]*mx.Array{x, y})
	if vals[0].Item() != 9 || vals[1].Item() != 9 {
		t.Fatalf("values %v %v", vals[0].Item(), vals[1].Item())
	}
	if g[0].Item() != 6 || g[1].Item() != 0 {
		t.Fatalf("grads %v %v, want 6 0", g[0].Item(), g[1].Item())
	}
}

func TestNoVJPPanicsWithName(t *testing.T) {
	e := mxtest.Go(t)
	x := mx.FromFloat32(e, []float32{1, 2}, 2)
	defer func() {
		r := recover()
		if r == nil || !contains(r.(string), "cummax") {
			t.Fatalf("panic %v, want one naming cummax", r)
		}
	}()
	mx.Grad(func(a []*mx.Array) *mx.Array { return mx.Sum(mx.Cummax(a[0], 0, false, true), false) })([]*mx.Array{x})
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}
