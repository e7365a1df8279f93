//go:build mlx

package mlxeng_test

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
)

// gradCase is a scalar function of some arrays; both engines differentiate it with
// respect to every float argument.
type gradCase struct {
	name string
	args func(e mx.Engine) []*mx.Array
	f    func(a []*mx.Array) *mx.Array
}

// weighted is Σ y⊙R for a fixed R, so every element of y carries its own weight.
func weighted(y *mx.Array, seed uint64) *mx.Array {
	r := mx.FromFloat32(y.Engine(), floats(seed, y.Size(), -1, 1), y.Shape()...)
	return mx.Sum(mx.Multiply(mx.AsType(y, mx.Float32), r), false)
}

func gradCases() []gradCase {
	unary := []struct {
		name string
		f    func(*mx.Array) *mx.Array
		pos  bool
	}{
		{"negative", mx.Negative, false}, {"exp", mx.Exp, false}, {"log", mx.Log, true},
		{"sqrt", mx.Sqrt, true}, {"rsqrt", mx.Rsqrt, true}, {"tanh", mx.Tanh, false},
		{"sigmoid", mx.Sigmoid, false}, {"abs", mx.Abs, false}, {"square", mx.Square, false},
		{"sin", mx.Sin, false}, {"cos", mx.Cos, false}, {"erf", mx.Erf, false},
		{"log1p", mx.Log1p, true}, {"reciprocal", mx.Reciprocal, true}, {"gelu_tanh", mx.GELUTanh, false},
	}
	var cases []gradCase
	for _, u := range unary {
		cases = append(cases, gradCase{u.name, func(e mx.Engine) []*mx.Array {
			if u.pos {
				return []*mx.Array{pos(e, 201, 3, 4)}
			}
			return []*mx.Array{mx.MulScalar(rf(e, 201, 3, 4), 2)}
		}, func(a []*mx.Array) *mx.Array { return weighted(u.f(a[0]), 202) }})
	}
	binary := []struct {
		name string
		f    func(a, b *mx.Array) *mx.Array
	}{
		{"add", mx.Add}, {"subtract", mx.Subtract}, {"multiply", mx.Multiply}, {"divide", mx.Divide},
		{"maximum", mx.Maximum}, {"minimum", mx.Minimum}, {"power", mx.Power},
	}
	for _, b := range binary {
		// Broadcast [3,1] with [4], so both VJPs un-broadcast; positive bases for power.
		cases = append(cases, gradCase{b.name, func(e mx.Engine) []*mx.Array {
			return []*mx.Array{pos(e, 203, 3, 1), pos(e, 204, 4)}
		}, func(a []*mx.Array) *mx.Array { return weighted(b.f(a[0], a[1]), 205) }})
	}
	cases = append(cases,
		gradCase{"where", func(e mx.Engine) []*mx.Array { return []*mx.Array{rf(e, 206, 3, 4), rf(e, 207, 4)} },
			func(a []*mx.Array) *mx.Array {
				c := mx.Greater(a[0], mx.Scalar(a[0].Engine(), 0, mx.Float32))
				return weighted(mx.Where(c, mx.Square(a[0]), a[1]), 208)
			}},
		gradCase{"shapes", func(e mx.Engine) []*mx.Array { return []*mx.Array{rf(e, 209, 2, 3, 4)} },
			func(a []*mx.Array) *mx.Array {
				x := mx.Transpose(mx.Reshape(a[0], 6, 4))
				x = mx.Concatenate([]*mx.Array{mx.SliceAxis(x, 1, 1, 5), mx.BroadcastTo(mx.SliceAxis(x, 1, 0, 1), 4, 2)}, 1)
				return weighted(mx.Squeeze(mx.ExpandDims(x, 0), 0), 210)
			}},
		gradCase{"slice_update", func(e mx.Engine) []*mx.Array { return []*mx.Array{rf(e, 211, 4, 5), rf(e, 212, 2, 2)} },
			func(a []*mx.Array) *mx.Array {
				return weighted(mx.SliceUpdate(mx.Exp(a[0]), mx.Square(a[1]), []int{1, 0}, []int{4, 4}, []int{2, 3}), 213)
			}},
		gradCase{"strided slice", func(e mx.Engine) []*mx.Array { return []*mx.Array{rf(e, 214, 5, 6)} },
			func(a []*mx.Array) *mx.Array {
				return weighted(mx.Slice(a[0], []int{0, 1}, []int{5, 6}, []int{2, 2}), 215)
			}},
		gradCase{"reductions", func(e mx.Engine) []*mx.Array { return []*mx.Array{rf(e, 216, 3, 5)} },
			func(a []*mx.Array) *mx.Array {
				x := a[0]
				y := mx.Add(mx.Sum(x, true, 1), mx.Max(x, true, 1))
				y = mx.Add(y, mx.Min(x, true, 1))
				y = mx.Add(y, mx.LogSumExp(x, true, 1))
				y = mx.Add(y, mx.Prod(mx.AddScalar(x, 2), true, 1))
				return weighted(mx.Add(y, mx.Mean(x, true, 1)), 217)
			}},
		gradCase{"softmax", func(e mx.Engine) []*mx.Array { return []*mx.Array{rf(e, 218, 3, 6)} },
			func(a []*mx.Array) *mx.Array { return weighted(mx.Softmax(mx.MulScalar(a[0], 3), -1), 219) }},
		gradCase{"cumsum", func(e mx.Engine) []*mx.Array { return []*mx.Array{rf(e, 220, 3, 6)} },
			func(a []*mx.Array) *mx.Array {
				return weighted(mx.Add(mx.Cumsum(a[0], 1, true, false), mx.Cumsum(a[0], 0, false, true)), 221)
			}},
		gradCase{"matmul", func(e mx.Engine) []*mx.Array { return []*mx.Array{rf(e, 222, 2, 1, 3, 5), rf(e, 223, 4, 5, 2)} },
			func(a []*mx.Array) *mx.Array { return weighted(mx.Matmul(a[0], a[1]), 224) }},
		gradCase{"take", func(e mx.Engine) []*mx.Array { return []*mx.Array{rf(e, 225, 6, 3)} },
			func(a []*mx.Array) *mx.Array {
				idx := mx.FromInt32(a[0].Engine(), []int32{0, 5, 5, 2, 0, 0}, 2, 3) // repeats accumulate
				return weighted(mx.Take(a[0], idx, 0), 226)
			}},
		gradCase{"take_along_axis", func(e mx.Engine) []*mx.Array { return []*mx.Array{rf(e, 227, 3, 5)} },
			func(a []*mx.Array) *mx.Array {
				idx := mx.FromInt32(a[0].Engine(), []int32{4, 4, 0, 1, 2, 3, 0, 0, 0}, 3, 3)
				return weighted(mx.TakeAlongAxis(a[0], idx, 1), 228)
			}},
		gradCase{"rms_norm", func(e mx.Engine) []*mx.Array { return []*mx.Array{rf(e, 229, 2, 3, 8), rf(e, 230, 8)} },
			func(a []*mx.Array) *mx.Array {
				return weighted(mx.Add(mx.RMSNorm(a[0], a[1], 1e-6), mx.RMSNorm(a[0], nil, 1e-5)), 231)
			}},
		gradCase{"rope", func(e mx.Engine) []*mx.Array { return []*mx.Array{rf(e, 232, 1, 2, 5, 8)} },
			func(a []*mx.Array) *mx.Array {
				e := a[0].Engine()
				f := mx.FromFloat32(e, []float32{1, 4, float32(math.Inf(1))}, 3)
				y := mx.Add(mx.RoPE(a[0], 8, false, 10000, 1, 2, nil), mx.RoPE(a[0], 6, true, 0, 1, 1, f))
				return weighted(y, 233)
			}},
		gradCase{"sdpa", func(e mx.Engine) []*mx.Array {
			return []*mx.Array{rf(e, 234, 1, 4, 3, 8), rf(e, 235, 1, 2, 5, 8), rf(e, 236, 1, 2, 5, 8)}
		}, func(a []*mx.Array) *mx.Array {
			m := mx.FromBool(a[0].Engine(), []bool{true, true, false, false, true, true, true, true, false, true, false, true, false, true, true}, 1, 1, 3, 5)
			return weighted(mx.ScaledDotProductAttention(a[0], a[1], a[2], 0.35, m), 237)
		}},
		gradCase{"quantized_matmul", func(e mx.Engine) []*mx.Array { return []*mx.Array{rf(e, 238, 3, 64)} },
			func(a []*mx.Array) *mx.Array {
				e := a[0].Engine()
				wq, s, b := mx.Quantize(rf(e, 239, 8, 64), 64, 4)
				y := mx.QuantizedMatmul(a[0], wq, s, b, true, 64, 4) // [3, 8]
				wq2, s2, b2 := mx.Quantize(rf(e, 240, 8, 32), 32, 8)
				return weighted(mx.QuantizedMatmul(y, wq2, s2, b2, false, 32, 8), 241)
			}},
		gradCase{"gather_qmm", func(e mx.Engine) []*mx.Array { return []*mx.Array{rf(e, 242, 2, 3, 32)} },
			func(a []*mx.Array) *mx.Array {
				e := a[0].Engine()
				wq, s, b := mx.Quantize(rf(e, 243, 3, 4, 32), 32, 4)
				idx := mx.FromInt32(e, []int32{2, 0, 1, 1, 2, 0}, 2, 3)
				return weighted(mx.GatherQMM(a[0], wq, s, b, idx, true, 32, 4, false), 244)
			}},
		gradCase{"gather_qmm sorted", func(e mx.Engine) []*mx.Array { return []*mx.Array{rf(e, 270, 6, 32)} },
			func(a []*mx.Array) *mx.Array {
				e := a[0].Engine()
				wq, s, b := mx.Quantize(rf(e, 271, 3, 4, 32), 32, 4)
				idx := mx.FromInt32(e, []int32{0, 0, 1, 2, 2, 2}, 6)
				return weighted(mx.GatherQMM(a[0], wq, s, b, idx, true, 32, 4, true), 272)
			}},
		// x and the expert stack both get gradients; expert 3 has no rows.
		// N = 8: MLX-CUDA v0.32.1's unsorted gather_mm backward fails with "misaligned
		// address" for N = 5 (seen on the H200), and the CUDA context is lost with it.
		gradCase{"gather_mm", func(e mx.Engine) []*mx.Array { return []*mx.Array{rf(e, 273, 2, 3, 8), rf(e, 274, 4, 8, 8)} },
			func(a []*mx.Array) *mx.Array {
				idx := mx.FromInt32(a[0].Engine(), []int32{2, 0, 1, 1, 2, 0}, 2, 3)
				return weighted(mx.GatherMM(a[0], a[1], idx, false), 275)
			}},
		gradCase{"gather_mm sorted swapped", func(e mx.Engine) []*mx.Array { return []*mx.Array{rf(e, 276, 6, 8), rf(e, 277, 3, 5, 8)} },
			func(a []*mx.Array) *mx.Array {
				idx := mx.FromInt32(a[0].Engine(), []int32{0, 0, 0, 2, 2, 2}, 6)
				return weighted(mx.GatherMM(a[0], mx.SwapAxes(a[1], 1, 2), idx, true), 278)
			}},
		gradCase{"addmm", func(e mx.Engine) []*mx.Array {
			return []*mx.Array{rf(e, 282, 3, 5), rf(e, 283, 3, 4), rf(e, 284, 4, 5)}
		},
			func(a []*mx.Array) *mx.Array { return weighted(mx.AddMM(a[0], a[1], a[2], 8, 1), 285) }},
		gradCase{"geglu", func(e mx.Engine) []*mx.Array { return []*mx.Array{mx.MulScalar(rf(e, 279, 3, 5), 3), rf(e, 280, 3, 5)} },
			func(a []*mx.Array) *mx.Array { return weighted(mx.GeGLU(a[0], a[1]), 281) }},
		gradCase{"take_weighted_sum", func(e mx.Engine) []*mx.Array { return []*mx.Array{rf(e, 288, 5, 7), rf(e, 289, 3, 2)} },
			func(a []*mx.Array) *mx.Array {
				idx := mx.FromInt32(a[0].Engine(), []int32{4, 0, 2, 2, 1, 3}, 3, 2)
				return weighted(mx.TakeWeightedSum(a[0], idx, a[1]), 290)
			}},
		gradCase{"geglu_split", func(e mx.Engine) []*mx.Array { return []*mx.Array{mx.MulScalar(rf(e, 286, 3, 10), 3)} },
			func(a []*mx.Array) *mx.Array { return weighted(mx.GeGLUSplit(a[0]), 287) }},
		gradCase{"astype bfloat16", func(e mx.Engine) []*mx.Array { return []*mx.Array{rf(e, 245, 4, 4)} },
			func(a []*mx.Array) *mx.Array {
				return weighted(mx.AsType(mx.Exp(mx.AsType(a[0], mx.BFloat16)), mx.Float32), 246)
			}},
		gradCase{"stop_gradient", func(e mx.Engine) []*mx.Array { return []*mx.Array{rf(e, 247, 5)} },
			func(a []*mx.Array) *mx.Array {
				// d/dx Σ x·sg(x)·R = sg(x)·R: the stopped factor is a constant.
				return weighted(mx.Multiply(a[0], mx.StopGradient(a[0])), 248)
			}},
		gradCase{"mlp", func(e mx.Engine) []*mx.Array {
			return []*mx.Array{rf(e, 249, 4, 8), rf(e, 250, 8, 16), rf(e, 251, 16), rf(e, 252, 16, 5)}
		}, func(a []*mx.Array) *mx.Array {
			h := mx.GELUTanh(mx.Add(mx.Matmul(a[0], a[1]), a[2]))
			logits := mx.Matmul(mx.RMSNorm(h, nil, 1e-6), a[3])
			tgt := mx.FromInt32(a[0].Engine(), []int32{1, 4, 0, 2}, 4, 1)
			ce := mx.Subtract(mx.LogSumExp(logits, false, -1), mx.Squeeze(mx.TakeAlongAxis(logits, tgt, -1), -1))
			return mx.Mean(ce, false)
		}},
	)
	return cases
}

// gradTol: both engines run float32 chains of the same ops, differing in libm
// rounding and summation order; gradients are compared relative to the largest one.
const gradTol = 5e-5

// gradTols overrides gradTol. MLX keeps a cotangent in its primal's dtype, so the
// gradient through a bfloat16 exp is rounded to bfloat16 (2⁻⁸ relative); the go
// engine's cotangents are float32 throughout.
var gradTols = map[string]float64{"astype bfloat16": half}

// TestGradParity differentiates each case on both engines and compares value and
// gradients.
func TestGradParity(t *testing.T) {
	g, m := engines(t)
	for _, c := range gradCases() {
		t.Run(c.name, func(t *testing.T) {
			run := func(e mx.Engine) (float32, [][]float32) {
				args := c.args(e)
				nums := make([]int, len(args))
				for i := range nums {
					nums[i] = i
				}
				vals, grads := mx.ValueAndGrad(func(a []*mx.Array) []*mx.Array { return []*mx.Array{c.f(a)} }, nums...)(args)
				out := make([][]float32, len(grads))
				for i, gr := range grads {
					if gr.DType() != args[i].DType() || !slices.Equal(gr.Shape(), args[i].Shape()) {
						t.Errorf("%s: gradient %d is %s %v for argument %s %v", e.Name(), i, gr.DType(), gr.Shape(), args[i].DType(), args[i].Shape())
					}
					out[i] = gr.Float32s()
				}
				return vals[0].Float32s()[0], out
			}
			wv, wg := run(g)
			var gv float32
			var gg [][]float32
			mx.Tidy(m, func() []*mx.Array { gv, gg = run(m); return nil })
			closeFloats(t, "value", []float32{wv}, []float32{gv}, gradTol)
			for i := range wg {
				scale := 0.0
				for _, v := range wg[i] {
					scale = math.Max(scale, math.Abs(float64(v)))
				}
				tol, ok := gradTols[c.name]
				if !ok {
					tol = gradTol
				}
				if d := maxAbsDiff(wg[i], gg[i]); d > tol*math.Max(1, scale) {
					t.Errorf("gradient %d: max |mlx − go| = %g (largest |go| %g); mlx %v, go %v", i, d, scale, clip(gg[i]), clip(wg[i]))
				}
			}
		})
	}
}

func maxAbsDiff(a, b []float32) float64 {
	d := 0.0
	for i := range a {
		d = math.Max(d, math.Abs(float64(a[i])-float64(b[i])))
	}
	return d
}

// TestGradCheck checks MLX's gradients against central differences with the shared
// helper, independently of the go engine.
func TestGradCheck(t *testing.T) {
	m := mlxEngine(t)
	x, w := rf(m, 261, 3, 8), rf(m, 262, 8)
	mxtest.GradCheck(t, func(a []*mx.Array) *mx.Array {
		return weighted(mx.Tanh(mx.RMSNorm(a[0], a[1], 1e-6)), 263)
	}, []*mx.Array{x, w}, []int{0, 1}, mxtest.GradCheckOptions{})
}

// TestValueAndGradContract covers the mx contract beyond the numbers: auxiliary
// outputs, a size-1 first output that is not 0-d, integer arguments, argnums order
// and repeats, and arrays freed after the call.
func TestValueAndGradContract(t *testing.T) {
	m := mlxEngine(t)
	x := mx.FromFloat32(m, []float32{1, 2, 3}, 3)
	n := mx.FromInt32(m, []int32{4}, 1)
	y := mx.FromFloat32(m, []float32{0.5}, 1, 1)
	before := m.Live()
	var made *mx.Array
	vg := mx.ValueAndGrad(func(a []*mx.Array) []*mx.Array {
		made = mx.Multiply(a[0], a[2])
		// loss = Σ x·y·n = 6·0.5·4 = 12, shaped [1, 1]; aux = x·y.
		loss := mx.Reshape(mx.Sum(mx.Multiply(made, mx.AsType(a[1], mx.Float32)), false), 1, 1)
		return []*mx.Array{loss, made}
	}, 2, 1, 0, 2)
	vals, grads := vg([]*mx.Array{x, n, y})
	if len(vals) != 2 || !slices.Equal(vals[0].Shape(), []int{1, 1}) || vals[0].Item() != 12 {
		t.Fatalf("values %v, want loss [[12]] and the auxiliary output", vals)
	}
	if got := vals[1].Float32s(); !slices.Equal(got, []float32{0.5, 1, 1.5}) {
		t.Errorf("aux = %v, want x·y = [0.5 1 1.5]", got)
	}
	// d/dy = Σ x·n = 24 (twice: argnum 2 is listed twice); int argument: nil;
	// d/dx = y·n = 2 each.
	if len(grads) != 4 || grads[1] != nil {
		t.Fatalf("grads %v, want 4 with nil for the int32 argument", grads)
	}
	for _, i := range []int{0, 3} {
		if got := grads[i].Float32s(); !slices.Equal(got, []float32{24}) || !slices.Equal(grads[i].Shape(), []int{1, 1}) {
			t.Errorf("grads[%d] = %v %v, want [[24]]", i, grads[i].Shape(), got)
		}
	}
	if got := grads[2].Float32s(); !slices.Equal(got, []float32{2, 2, 2}) {
		t.Errorf("d/dx = %v, want [2 2 2]", got)
	}
	grads[3].Free() // each slot is its own reference
	if got := grads[0].Item(); got != 24 {
		t.Errorf("grads[0] after freeing grads[3] = %v", got)
	}
	if r := panicOf(func() { made.Float32s() }); r == nil {
		t.Errorf("an array made inside the function outlived ValueAndGrad")
	}
	if m.Live() != before {
		t.Errorf("scopes hold %d arrays, want %d", m.Live(), before)
	}
}

// TestValueAndGradPanics: a panic inside the function reaches the caller unchanged,
// through MLX's C++ frames, and the engine keeps working.
func TestValueAndGradPanics(t *testing.T) {
	m := mlxEngine(t)
	x := mx.FromFloat32(m, []float32{1, 2}, 2)
	boom := errors.New("boom")
	r := panicOf(func() {
		mx.Grad(func(a []*mx.Array) *mx.Array { panic(boom) })([]*mx.Array{x})
	})
	if r != boom {
		t.Errorf("panic %v, want the function's own value", r)
	}
	r = panicOf(func() {
		mx.Grad(func(a []*mx.Array) *mx.Array { return a[0] })([]*mx.Array{x})
	})
	if s := fmt.Sprint(r); r == nil || !containsAll(s, "value_and_grad", "scalar") {
		t.Errorf("non-scalar loss: panic %v", r)
	}
	// d/dx Σ x² = 2x = [2 4].
	g := mx.Grad(func(a []*mx.Array) *mx.Array { return mx.Sum(mx.Square(a[0]), false) })([]*mx.Array{x})
	if got := g[0].Float32s(); !slices.Equal(got, []float32{2, 4}) {
		t.Errorf("gradient after the panics = %v, want [2 4]", got)
	}
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
