//go:build amd64 && !purego

package goeng

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/dgtune/dgtune/mx"
)

// TestBinaryKernelsMatchGo: the AVX2 elementwise kernels give the bits of Go's float32
// operators, for every op and operand form, over lengths around multiples of 8 and 32
// and values that include zeros of both signs, infinities, subnormals and NaN.
func TestBinaryKernelsMatchGo(t *testing.T) {
	if !binaryAVX2 {
		t.Skip("CPU without AVX2")
	}
	rng := rand.New(rand.NewPCG(12, 13))
	special := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), 1e-40, -3e-39, float32(math.NaN()), 1, -1}
	val := func() float32 {
		if rng.IntN(6) == 0 {
			return special[rng.IntN(len(special))]
		}
		return float32(rng.NormFloat64() * 100)
	}
	goOp := map[mx.BinaryOp]func(a, b float32) float32{
		mx.OpAdd:      func(a, b float32) float32 { return a + b },
		mx.OpSubtract: func(a, b float32) float32 { return a - b },
		mx.OpMultiply: func(a, b float32) float32 { return a * b },
		mx.OpDivide:   func(a, b float32) float32 { return a / b },
	}
	same := func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) || (a != a && b != b) }
	for op, f := range goOp {
		for _, n := range []int{0, 1, 7, 8, 9, 31, 32, 33, 64, 71, 1000} {
			x, y := make([]float32, n), make([]float32, n)
			for i := range x {
				x[i], y[i] = val(), val()
			}
			s := val()
			forms := []struct {
				name string
				run  func(dst []float32) int
				want func(i int) float32
			}{
				{"x op y", func(d []float32) int { return vecVV(op, d, x, y) }, func(i int) float32 { return f(x[i], y[i]) }},
				{"x op s", func(d []float32) int { return vecVS(op, d, x, s) }, func(i int) float32 { return f(x[i], s) }},
				{"s op y", func(d []float32) int { return vecSV(op, d, s, y) }, func(i int) float32 { return f(s, y[i]) }},
			}
			for _, form := range forms {
				dst := make([]float32, n)
				done := form.run(dst)
				if done != n/8*8 {
					t.Fatalf("%s %s n=%d: kernel did %d elements, want %d", op, form.name, n, done, n/8*8)
				}
				for i := range done {
					if w := form.want(i); !same(dst[i], w) {
						t.Fatalf("%s %s n=%d: element %d = %v, Go gives %v", op, form.name, n, i, dst[i], w)
					}
				}
			}
		}
	}
}
