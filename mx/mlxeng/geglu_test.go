//go:build mlx

package mlxeng

import (
	"fmt"
	"math"
	"testing"

	"github.com/dgtune/dgtune/mx"
)

// TestGeGLUKernelChoice: the GeGLU kernels are made only on CUDA, unless MLXENG_GEGLU=mlx
// (the CUDA cases run where the engine has one), and GeGLU and GeGLUSplit take them for
// bfloat16 values whose width (each half's, split) is a multiple of 8 and nothing else.
// The shape logic runs on any device with the kernels' switch forced on.
func TestGeGLUKernelChoice(t *testing.T) {
	checkKernelSwitch(t, gegluEnv, []kernelSwitch{{"cpu", "", false}, {"cpu", "kernel", false}, {"gpu", "", true}, {"gpu", "mlx", false}},
		func(device, value string) bool { return newGeGLUKernels(device, value).ok })
	e, err := open()
	if err != nil {
		t.Fatal(err)
	}
	saved := e.geglu.ok
	t.Cleanup(func() { e.geglu.ok = saved })
	e.geglu.ok = true
	for _, c := range []struct {
		name     string
		gate, up []int // up nil: split
		gdt, udt mx.DType
		want     bool
	}{
		{"real experts, split", []int{3072, 1408}, nil, mx.BFloat16, 0, true},
		{"real dense MLP", []int{1, 384, 2112}, []int{1, 384, 2112}, mx.BFloat16, mx.BFloat16, true},
		{"float32 split", []int{4, 64}, nil, mx.Float32, 0, false},
		{"float32 pair", []int{4, 64}, []int{4, 64}, mx.Float32, mx.Float32, false},
		{"halves not a multiple of 8", []int{4, 72}, nil, mx.BFloat16, 0, false},
		{"width not a multiple of 8", []int{4, 36}, []int{4, 36}, mx.BFloat16, mx.BFloat16, false},
		{"up of another shape", []int{4, 64}, []int{1, 64}, mx.BFloat16, mx.BFloat16, false},
		{"up of another dtype", []int{4, 64}, []int{4, 64}, mx.BFloat16, mx.Float32, false},
		{"no rows", []int{0, 64}, nil, mx.BFloat16, 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			gate := get(mx.Zeros(e, c.gate, c.gdt).Handle())
			var up *array
			if c.up != nil {
				up = get(mx.Zeros(e, c.up, c.udt).Handle())
			}
			if got := e.gegluThroughKernels(gate, up, c.up == nil); got != c.want {
				t.Errorf("gegluThroughKernels = %v, want %v", got, c.want)
			}
		})
	}
}

// TestGeGLUKernelMatchesComposition: on a CUDA GPU, GeGLUSplit and GeGLU through the
// kernels give the composition's values bit for bit (the real 26B-A4B geometry's experts
// rows and dense MLP, gates spread over both tails of the tanh), and gradients within one
// rounding to bfloat16 of the float64 derivative of the same bfloat16 inputs, and near
// the composition's own (which rounds every step of its chain to bfloat16). MLX's CPU
// backend has no custom kernels.
func TestGeGLUKernelMatchesComposition(t *testing.T) {
	e, err := open()
	if err != nil {
		t.Fatal(err)
	}
	if !isCUDA(e.device) {
		t.Skip("custom CUDA kernels run on a GPU only")
	}
	k := newGeGLUKernels(e.device, "")
	if !k.ok {
		t.Fatal("could not make the GeGLU kernels")
	}
	saved := e.geglu
	t.Cleanup(func() { e.geglu = saved })
	for _, c := range []struct {
		split bool
		shape []int // gate's (split: x's, gate and up its halves)
	}{
		{true, []int{3072, 1408}},
		{false, []int{1, 384, 2112}},
		{true, []int{5, 16}},
	} {
		t.Run(fmt.Sprintf("split=%v_%v", c.split, c.shape), func(t *testing.T) {
			bf := func(seed uint64, scale float64) *mx.Array {
				return mx.AsType(mx.MulScalar(mx.Normal(mx.Key(e, seed), c.shape, mx.Float32), scale), mx.BFloat16)
			}
			x, up := bf(1, 2.5), bf(2, 1)
			outShape := append([]int(nil), c.shape...)
			if c.split {
				outShape[len(outShape)-1] /= 2
			}
			g := mx.AsType(mx.Normal(mx.Key(e, 3), outShape, mx.Float32), mx.BFloat16)
			run := func(kernel bool) (y []float32, grads [][]float32) {
				e.geglu = k
				e.geglu.ok = kernel
				vals, gs := mx.ValueAndGrad(func(p []*mx.Array) []*mx.Array {
					var y *mx.Array
					if c.split {
						y = mx.GeGLUSplit(p[0])
					} else {
						y = mx.GeGLU(p[0], p[1])
					}
					return []*mx.Array{mx.Sum(mx.Multiply(mx.AsType(y, mx.Float32), mx.AsType(g, mx.Float32)), false), y}
				})([]*mx.Array{x, up})
				f := func(a *mx.Array) []float32 { return mx.AsType(a, mx.Float32).Float32s() }
				return f(vals[1]), [][]float32{f(gs[0]), f(gs[1])}
			}
			ky, kg := run(true)
			my, mg := run(false)
			for i := range my {
				if math.Float32bits(ky[i]) != math.Float32bits(my[i]) {
					t.Fatalf("y[%d] = %v through the kernel, %v through the composition", i, ky[i], my[i])
				}
			}
			// The float64 derivative of the same bfloat16 values, laid out as the gradients
			// are: split, x's [..., 2I]; else d gate's values, then d up's.
			xs, us, gv := mx.AsType(x, mx.Float32).Float32s(), mx.AsType(up, mx.Float32).Float32s(), mx.AsType(g, mx.Float32).Float32s()
			n, w := len(gv), c.shape[len(c.shape)-1]
			half := w / 2
			gateAt, upAt := func(i int) int { return i }, func(i int) int { return n + i }
			got, comp := append(append([]float32(nil), kg[0]...), kg[1]...), append(append([]float32(nil), mg[0]...), mg[1]...)
			if c.split {
				gateAt = func(i int) int { return i/half*w + i%half }
				upAt = func(i int) int { return i/half*w + half + i%half }
				got, comp = kg[0], mg[0]
			}
			ref, mag, under := make([]float64, 2*n), make([]float64, 2*n), make([]float64, 2*n)
			for i := range gv {
				xv, uv, cv := float64(xs[gateAt(i)]), float64(us[i]), float64(gv[i])
				if c.split {
					uv = float64(xs[upAt(i)])
				}
				const a, cc = 0.044715, 0.7978845608028654
				// σ(2u) = (1 + tanh u)/2, without the cancellation of 1 + tanh u in the tail.
				s := 1 / (1 + math.Exp(-2*cc*(xv+a*xv*xv*xv)))
				q := 2 * cc * (1 + 3*a*xv*xv)
				ref[gateAt(i)], mag[gateAt(i)] = cv*uv*(s+xv*s*(1-s)*q), math.Abs(cv*uv)*(s+math.Abs(xv*s*(1-s)*q))
				ref[upAt(i)], mag[upAt(i)] = cv*xv*s, math.Abs(cv*xv*s)
				// Where s is below float32's smallest normal the kernel's float32 arithmetic
				// has it as 0 (expf overflows to +inf past 88, and MLX's kernels flush
				// subnormals), where float64 still has a value: the gradients then lose s's
				// terms, at most their factors times 2⁻¹²⁶. Measured on the H200: 0 against
				// −2.0e-39 (session 17) and −7.4e-37 (session 18, x ≈ −10, where x·q ≈ 230).
				under[gateAt(i)] = math.Abs(cv*uv) * (1 + math.Abs(xv*q)) * 0x1p-126
				under[upAt(i)] = math.Abs(cv*xv) * 0x1p-126
			}
			scale := 0.0
			for _, v := range ref {
				scale = math.Max(scale, math.Abs(v))
			}
			for i, want := range ref {
				if d := math.Abs(float64(got[i]) - want); d > math.Abs(want)/256+mag[i]/(1<<18)+under[i] {
					t.Fatalf("gradient [%d] = %v through the kernel, float64 %v", i, got[i], want)
				}
				if d := math.Abs(float64(got[i] - comp[i])); d > math.Abs(want)/16+scale/128 {
					t.Fatalf("gradient [%d] = %v through the kernel, %v through the composition (scale %v)", i, got[i], comp[i], scale)
				}
			}
		})
	}
}
