//go:build mlx

package mlxeng_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mlxeng"
	"github.com/dgtune/dgtune/mx/mxtest"
)

// engines returns the go engine (the oracle, following the MLX release this binary
// runs on) and the MLX engine.
func engines(t testing.TB) (mx.Engine, mx.Engine) {
	t.Helper()
	m, err := mx.Open("mlx")
	if err != nil {
		t.Fatalf("open mlx: %v", err)
	}
	return mxtest.GoFollowing(t, m), m
}

func mlxEngine(t testing.TB) *mlxeng.Engine {
	t.Helper()
	e, err := mlxeng.Open()
	if err != nil {
		t.Fatalf("open mlx: %v", err)
	}
	return e
}

// floats returns n values uniform in [lo, hi) from a fixed seed, so both engines see
// the same inputs.
func floats(seed uint64, n int, lo, hi float64) []float32 {
	rng := rand.New(rand.NewPCG(seed, 7))
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(lo + (hi-lo)*rng.Float64())
	}
	return v
}

func ints(seed uint64, n int, lo, hi int) []int32 {
	rng := rand.New(rand.NewPCG(seed, 9))
	v := make([]int32, n)
	for i := range v {
		v[i] = int32(lo + rng.IntN(hi-lo))
	}
	return v
}

func numel(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// rf is a float32 array of the shape with values in [-1, 1) from seed.
func rf(e mx.Engine, seed uint64, shape ...int) *mx.Array {
	return mx.FromFloat32(e, floats(seed, numel(shape), -1, 1), shape...)
}

// ri is an int32 array of the shape with values in [lo, hi) from seed.
func ri(e mx.Engine, seed uint64, lo, hi int, shape ...int) *mx.Array {
	return mx.FromInt32(e, ints(seed, numel(shape), lo, hi), shape...)
}

// sameArrays fails unless got (MLX) matches want (go): same dtype and shape; integer
// and bool elements equal; float elements within tol·max(1, |want|), NaN matching NaN
// and infinities matching exactly. tol 0 asks for bit-identical floats.
func sameArrays(t testing.TB, what string, want, got *mx.Array, tol float64) {
	t.Helper()
	if got.DType() != want.DType() {
		t.Errorf("%s: dtype %s on mlx, %s on go", what, got.DType(), want.DType())
		return
	}
	if !slices.Equal(got.Shape(), want.Shape()) {
		t.Errorf("%s: shape %v on mlx, %v on go", what, got.Shape(), want.Shape())
		return
	}
	if !want.DType().IsFloat() {
		if w, g := want.Raw(), got.Raw(); !reflect.DeepEqual(w, g) {
			t.Errorf("%s: mlx %v, go %v", what, clip(g), clip(w))
		}
		return
	}
	closeFloats(t, what, want.Float32s(), got.Float32s(), tol)
}

func closeFloats(t testing.TB, what string, want, got []float32, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d values on mlx, %d on go", what, len(got), len(want))
		return
	}
	bad := 0
	for i := range want {
		w, g := float64(want[i]), float64(got[i])
		ok := false
		switch {
		case math.IsNaN(w) || math.IsNaN(g):
			ok = math.IsNaN(w) && math.IsNaN(g)
		case math.IsInf(w, 0) || math.IsInf(g, 0):
			ok = w == g
		case tol == 0:
			ok = math.Float32bits(want[i]) == math.Float32bits(got[i])
		default:
			ok = math.Abs(w-g) <= tol*math.Max(1, math.Abs(w))
		}
		if !ok {
			if bad < 4 {
				t.Errorf("%s[%d]: mlx %v, go %v (tolerance %g)", what, i, g, w, tol)
			}
			bad++
		}
	}
	if bad > 4 {
		t.Errorf("%s: %d of %d values differ", what, bad, len(want))
	}
}

func clip(v any) string {
	s := fmt.Sprint(v)
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// panicOf runs f and returns what it panicked with (nil if it returned).
func panicOf(f func()) (r any) {
	defer func() { r = recover() }()
	f()
	return nil
}
