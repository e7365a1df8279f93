//go:build mlx

package mlxeng

import (
	"fmt"
	"math"
	"testing"

	"github.com/dgtune/dgtune/mx"
)

// TestQuantizedKernelsMatchDequantized: on the kernel route quantized_matmul and
// gather_qmm (MLX's own, whatever kernel the device picks for the shape and dtype, except
// on CUDA for rows of one quantization group: oneGroupRows) give the product of the
// dequantized weight, for float32 and bfloat16 rows, few rows (the
// matrix-vector kernels) and many, both orientations and the packings the model uses.
// The bound on each value is relative to Σ|x|·|w| over its contraction: 1e-5 for
// float32, 2⁻⁶ for bfloat16 (MLX's CPU kernel adds in bfloat16). A kernel that drops or
// misplaces a product misses it by about |y| itself, far above either.
func TestQuantizedKernelsMatchDequantized(t *testing.T) {
	e := engineOnRoute(t, routeKernel)
	for _, dt := range []mx.DType{mx.Float32, mx.BFloat16} {
		for _, q := range []struct{ bits, group int }{{4, 64}, {8, 64}, {4, 32}} {
			for _, nk := range [][2]int{{24, 64}, {96, 256}} {
				for _, rows := range []int{1, 6, 64, 200} {
					for _, transpose := range []bool{true, false} {
						name := fmt.Sprintf("%s/bits=%d_group=%d/n=%d_k=%d/rows=%d/transpose=%v", dt, q.bits, q.group, nk[0], nk[1], rows, transpose)
						t.Run(name, func(t *testing.T) {
							checkQuantizedMatmul(t, e, dt, q.bits, q.group, nk[0], nk[1], rows, transpose)
						})
					}
				}
				for _, sorted := range []bool{false, true} {
					name := fmt.Sprintf("%s/bits=%d_group=%d/n=%d_k=%d/gather_sorted=%v", dt, q.bits, q.group, nk[0], nk[1], sorted)
					t.Run(name, func(t *testing.T) {
						checkGatherQMM(t, e, dt, q.bits, q.group, nk[0], nk[1], sorted)
					})
				}
			}
		}
	}
}

// engineOnRoute is the engine with its quantized route set to route until the test ends.
func engineOnRoute(t *testing.T, route quantizedRoute) *Engine {
	t.Helper()
	e, err := open()
	if err != nil {
		t.Fatal(err)
	}
	saved := e.quantized
	t.Cleanup(func() { e.quantized = saved })
	e.quantized = route
	return e
}

// lcg fills n values in [-1, 1] from seed, the same on every engine and device.
func lcg(seed uint64, n int) []float32 {
	v := make([]float32, n)
	x := seed
	for i := range v {
		x = x*6364136223846793005 + 1442695040888963407
		v[i] = float32(int64(x>>40)%2001-1000) / 1000
	}
	return v
}

// checkQuantizedMatmul: x [rows, K] (transpose: W [N, K], y = x·Wᵀ) or x [rows, N]
// (W [N, K], y = x·W), against the dequantized W in float32.
func checkQuantizedMatmul(t *testing.T, e *Engine, dt mx.DType, bits, group, n, k, rows int, transpose bool) {
	wq, s, b := mx.Quantize(mx.FromFloat32(e, lcg(1, n*k), n, k), group, bits)
	w := mx.Dequantize(wq, s, b, group, bits) // float32 [N, K]
	inner := k
	if !transpose {
		inner = n
	}
	x := mx.AsType(mx.FromFloat32(e, lcg(2, rows*inner), rows, inner), dt)
	got := mx.AsType(mx.QuantizedMatmul(x, wq, s, b, transpose, group, bits), mx.Float32)
	xf := mx.AsType(x, mx.Float32)
	wt := w
	if transpose {
		wt = mx.Transpose(w, 1, 0)
	}
	want := mx.Matmul(xf, wt)
	scale := mx.Matmul(mx.Abs(xf), mx.Abs(wt))
	compareBounded(t, got, want, scale, dt)
}

// checkGatherQMM: 3 experts of W [N, K], x [6, 1, K] routed row by row, against each
// row's product with its expert's dequantized weight.
func checkGatherQMM(t *testing.T, e *Engine, dt mx.DType, bits, group, n, k int, sorted bool) {
	const experts, rows = 3, 6
	wq, s, b := mx.Quantize(mx.FromFloat32(e, lcg(3, experts*n*k), experts, n, k), group, bits)
	w := mx.Dequantize(wq, s, b, group, bits) // float32 [E, N, K]
	idx := []int32{2, 0, 1, 1, 2, 0}
	if sorted {
		idx = []int32{0, 0, 1, 1, 2, 2}
	}
	x := mx.AsType(mx.FromFloat32(e, lcg(4, rows*k), rows, 1, k), dt)
	got := mx.AsType(mx.GatherQMM(x, wq, s, b, mx.FromInt32(e, idx, rows), true, group, bits, sorted), mx.Float32)
	xf := mx.AsType(x, mx.Float32)
	wr := mx.Transpose(mx.Take(w, mx.FromInt32(e, idx, rows), 0), 0, 2, 1) // [rows, K, N]
	want := mx.Matmul(xf, wr)
	scale := mx.Matmul(mx.Abs(xf), mx.Abs(wr))
	compareBounded(t, got, want, scale, dt)
}

func compareBounded(t *testing.T, got, want, scale *mx.Array, dt mx.DType) {
	t.Helper()
	tol := 1e-5
	if dt != mx.Float32 {
		tol = 1.0 / 64
	}
	g, w, sc := got.Float32s(), want.Float32s(), scale.Float32s()
	if len(g) != len(w) {
		t.Fatalf("%d values, want %d (shape %v, want %v)", len(g), len(w), got.Shape(), want.Shape())
	}
	bad := 0
	for i := range w {
		if d := math.Abs(float64(g[i] - w[i])); !(d <= tol*float64(sc[i])+1e-6) {
			if bad < 3 {
				t.Errorf("value %d: %v, dequantized product %v (Σ|x||w| %v)", i, g[i], w[i], sc[i])
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d values outside the bound", bad, len(w))
	}
}
