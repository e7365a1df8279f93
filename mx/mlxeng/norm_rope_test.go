//go:build mlx

package mlxeng

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/dgtune/dgtune/mx"
)

// TestNormRoPEKernelChoice: the NormRoPE kernels are made only on CUDA and there unless
// MLXENG_NORM_ROPE=mlx (the CUDA case runs where the engine has CUDA), and take
// bfloat16 rows of a head size that is a multiple of 64 up to 1024, all of it rotated,
// at positions from 0, and nothing else. The shape logic runs on any device with the
// kernels' switch forced on.
func TestNormRoPEKernelChoice(t *testing.T) {
	checkKernelSwitch(t, normRoPEEnv, []kernelSwitch{{"cpu", "", false}, {"cpu", "mlx", false}, {"gpu", "", true}, {"gpu", "kernel", true}, {"gpu", "mlx", false}},
		func(device, value string) bool { return newNormRoPEKernels(device, value).ok })
	e, err := open()
	if err != nil {
		t.Fatal(err)
	}
	saved := e.normRoPE.ok
	t.Cleanup(func() { e.normRoPE.ok = saved })
	e.normRoPE.ok = true
	for _, c := range []struct {
		name    string
		x       []int
		dt, fdt mx.DType
		dims    int
		offset  int
		want    bool
	}{
		{"real sliding q", []int{1, 384, 16, 256}, mx.BFloat16, mx.Float32, 256, 0, true},
		{"real global k", []int{1, 384, 2, 512}, mx.BFloat16, mx.Float32, 512, 128, true},
		{"float32", []int{1, 8, 2, 64}, mx.Float32, mx.Float32, 64, 0, false},
		{"head size not a multiple of 64", []int{1, 8, 2, 96}, mx.BFloat16, mx.Float32, 96, 0, false},
		{"partial rotation", []int{1, 8, 2, 128}, mx.BFloat16, mx.Float32, 64, 0, false},
		{"bfloat16 freqs", []int{1, 8, 2, 64}, mx.BFloat16, mx.BFloat16, 64, 0, false},
		{"no rows", []int{1, 0, 2, 64}, mx.BFloat16, mx.Float32, 64, 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := c.x[3]
			x := get(mx.Zeros(e, c.x, c.dt).Handle())
			w := get(mx.Zeros(e, []int{d}, c.dt).Handle())
			fr := get(mx.Zeros(e, []int{c.dims / 2}, c.fdt).Handle())
			p := mx.RoPEParams{Dims: c.dims, Scale: 1, Offset: c.offset}
			if got := e.normRoPEThroughKernels(x, w, fr, p); got != c.want {
				t.Errorf("normRoPEThroughKernels = %v, want %v", got, c.want)
			}
		})
	}
}

// TestNormRoPEMatchesComposition: mx.NormRoPE on this engine gives its composition
// (RMSNorm, Transpose, RoPE) — on MLX's CPU, and on a GPU with the kernels off, bit for
// bit; on a CUDA GPU with the kernels on, the forward within one rounding of bfloat16 of
// it (the norm's sum in another order may move a normed value by one unit), x's gradient
// within two roundings (the composition rounds the turned-back cotangent in between), at
// the real 26B-A4B geometry's sliding (256) and global (512) head sizes and a small one,
// with periods up to 10⁴ and some pairs not turned. MLX's CPU backend has no custom
// kernels.
func TestNormRoPEMatchesComposition(t *testing.T) {
	e, err := open()
	if err != nil {
		t.Fatal(err)
	}
	kernels := []bool{false}
	saved := e.normRoPE
	t.Cleanup(func() { e.normRoPE = saved })
	if isCUDA(e.device) {
		k := newNormRoPEKernels(e.device, "kernel")
		if !k.ok {
			t.Fatal("could not make the NormRoPE kernels")
		}
		e.normRoPE = k
		kernels = append(kernels, true)
	}
	for _, c := range []struct {
		shape  []int
		offset int
	}{{[]int{1, 384, 16, 256}, 0}, {[]int{1, 256, 2, 512}, 128}, {[]int{2, 5, 3, 64}, 3}} {
		d := c.shape[3]
		dt := mx.BFloat16
		if !isCUDA(e.device) {
			dt = mx.Float32 // MLX's CPU: the composition either way
		}
		periods := make([]float32, d/2)
		for i := range periods {
			periods[i] = float32(math.Pow(10000, 2*float64(i)/float64(d)))
			if i >= d*3/8 {
				periods[i] = float32(math.Inf(1))
			}
		}
		freqs := mx.FromFloat32(e, periods, d/2)
		x := mx.AsType(mx.Normal(mx.Key(e, 1), c.shape, mx.Float32), dt)
		w := mx.AsType(mx.AddScalar(mx.MulScalar(mx.Normal(mx.Key(e, 2), []int{d}, mx.Float32), 0.3), 1), dt)
		g := mx.AsType(mx.Normal(mx.Key(e, 3), []int{c.shape[0], c.shape[2], c.shape[1], d}, mx.Float32), dt)
		run := func(f func(x, w *mx.Array) *mx.Array) (y, dx []float32) {
			vals, grads := mx.ValueAndGrad(func(a []*mx.Array) []*mx.Array {
				y := f(a[0], a[1])
				return []*mx.Array{mx.Sum(mx.Multiply(mx.AsType(y, mx.Float32), mx.AsType(g, mx.Float32)), false), y}
			})([]*mx.Array{x, w})
			return mx.AsType(vals[1], mx.Float32).Float32s(), mx.AsType(grads[0], mx.Float32).Float32s()
		}
		e.normRoPE.ok = false
		wantY, wantDX := run(func(x, w *mx.Array) *mx.Array {
			return mx.RoPE(mx.Transpose(mx.RMSNorm(x, w, 1e-6), 0, 2, 1, 3), d, false, 0, 1, c.offset, freqs)
		})
		for _, kernel := range kernels {
			t.Run(fmt.Sprintf("%v_off%d_kernel%v", c.shape, c.offset, kernel), func(t *testing.T) {
				e.normRoPE.ok = kernel
				y, dx := run(func(x, w *mx.Array) *mx.Array { return mx.NormRoPE(x, w, 1e-6, 1, c.offset, freqs) })
				if !kernel {
					if !slices.Equal(y, wantY) || !slices.Equal(dx, wantDX) {
						t.Fatal("the composition through the engine's NormRoPE differs from mx's")
					}
					return
				}
				nearScaled(t, "y (against the composition)", y, wantY, 1.0/128)
				nearScaled(t, "dx (against the composition)", dx, wantDX, 1.0/64)
			})
		}
	}
}
