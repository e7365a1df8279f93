//go:build mlx

package mlxeng

import (
	"testing"

	"github.com/dgtune/dgtune/mx"
)

// TestQuantizedRouteChoice: dequant on a non-Apple GPU (CUDA), kernel on the CPU, and
// the environment variable wins over both.
func TestQuantizedRouteChoice(t *testing.T) {
	for _, c := range []struct {
		env, device string
		want        quantizedRoute
	}{
		{"", "cpu", routeKernel},
		{"", "gpu", routeDequant}, // these tests run on Linux
		{"kernel", "gpu", routeKernel},
		{"dequant", "cpu", routeDequant},
		{"other", "cpu", routeKernel},
	} {
		t.Setenv(quantizedRouteEnv, c.env)
		if got := chooseQuantizedRoute(c.device); got != c.want {
			t.Errorf("%s=%q on %s: route %d, want %d", quantizedRouteEnv, c.env, c.device, got, c.want)
		}
	}
}

// TestDequantRouteMatchesKernels: on the dequant route, quantized linears and experts
// give MLX's quantized kernels' values and input gradients (float32, where both
// dequantize the same weights exactly), for both sorted and unsorted experts.
func TestDequantRouteMatchesKernels(t *testing.T) {
	e, err := open()
	if err != nil {
		t.Fatal(err)
	}
	saved := e.quantized
	defer func() { e.quantized = saved }()
	data := func(seed uint64, shape ...int) *mx.Array {
		n := 1
		for _, d := range shape {
			n *= d
		}
		v := make([]float32, n)
		x := seed
		for i := range v {
			x = x*6364136223846793005 + 1442695040888963407
			v[i] = float32(int64(x>>40)%2001-1000) / 1000
		}
		return mx.FromFloat32(e, v, shape...)
	}
	wq, s, b := mx.Quantize(data(1, 24, 64), 64, 4)
	ewq, es, eb := mx.Quantize(data(2, 3, 16, 64), 32, 4)
	for _, sorted := range []bool{false, true} {
		idx := []int32{2, 0, 1, 1, 2, 0}
		if sorted {
			idx = []int32{0, 0, 1, 1, 2, 2}
		}
		f := func(a []*mx.Array) *mx.Array {
			y := mx.QuantizedMatmul(a[0], wq, s, b, true, 64, 4) // [6, 24]
			z := mx.GatherQMM(a[1], ewq, es, eb, mx.FromInt32(e, idx, 6), true, 32, 4, sorted)
			return mx.Add(mx.Sum(mx.Multiply(y, y), false), mx.Sum(mx.Tanh(z), false))
		}
		var vals [2][]float32
		var grads [2][][]float32
		for r, route := range []quantizedRoute{routeKernel, routeDequant} {
			e.quantized = route
			v, g := mx.ValueAndGrad(func(a []*mx.Array) []*mx.Array { return []*mx.Array{f(a)} })([]*mx.Array{data(3, 6, 64), data(4, 6, 64)})
			vals[r] = v[0].Float32s()
			grads[r] = [][]float32{g[0].Float32s(), g[1].Float32s()}
		}
		if d := vals[0][0] - vals[1][0]; d > 1e-3 || d < -1e-3 {
			t.Errorf("sorted=%v: loss %v on kernels, %v dequantized", sorted, vals[0][0], vals[1][0])
		}
		for k := range grads[0] {
			for i := range grads[0][k] {
				if d := grads[0][k][i] - grads[1][k][i]; d > 1e-4 || d < -1e-4 {
					t.Fatalf("sorted=%v: gradient %d [%d]: %v on kernels, %v dequantized", sorted, k, i, grads[0][k][i], grads[1][k][i])
				}
			}
		}
	}
}
