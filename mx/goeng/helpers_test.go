package goeng_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/dgtune/dgtune/mx"
)

// Small constructors: the tests spell out every input by hand.
func fa(e mx.Engine, v []float32, shape ...int) *mx.Array { return mx.FromFloat32(e, v, shape...) }
func ia(e mx.Engine, v []int32, shape ...int) *mx.Array   { return mx.FromInt32(e, v, shape...) }
func ba(e mx.Engine, v []bool, shape ...int) *mx.Array    { return mx.FromBool(e, v, shape...) }

var (
	inf  = float32(math.Inf(1))
	ninf = float32(math.Inf(-1))
	nan  = float32(math.NaN())
)

// opCase is one forward check: got builds the result, and want is []float32, []int32 or
// []bool holding the hand-derived expected elements in row-major order.
type opCase struct {
	name  string
	got   func() *mx.Array
	dt    mx.DType
	shape []int
	want  any
	tol   float64 // float results: |got-want| ≤ tol·(1+|want|); 0 means exact
}

func runCases(t *testing.T, cases []opCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			expect(t, c.got(), c.dt, c.shape, c.want, c.tol)
		})
	}
}

// expect checks dtype, shape and elements. NaN matches only NaN and an infinity only
// the same infinity, whatever the tolerance.
func expect(t *testing.T, got *mx.Array, dt mx.DType, shape []int, want any, tol float64) {
	t.Helper()
	if got.DType() != dt {
		t.Errorf("dtype %s, want %s", got.DType(), dt)
	}
	if gs := got.Shape(); !slices.Equal(gs, shape) && !(len(gs) == 0 && len(shape) == 0) {
		t.Fatalf("shape %v, want %v", gs, shape)
	}
	switch w := want.(type) {
	case []float32:
		g := got.Float32s()
		if len(g) != len(w) {
			t.Fatalf("%d elements, want %d", len(g), len(w))
		}
		for i := range w {
			if !closeF32(g[i], w[i], tol) {
				t.Errorf("element %d = %v, want %v (all: %v)", i, g[i], w[i], g)
				return
			}
		}
	case []int32:
		if g := got.Int32s(); !slices.Equal(g, w) {
			t.Errorf("= %v, want %v", g, w)
		}
	case []bool:
		if g := got.Bools(); !slices.Equal(g, w) {
			t.Errorf("= %v, want %v", g, w)
		}
	default:
		t.Fatalf("bad want type %T", want)
	}
}

func closeF32(g, w float32, tol float64) bool {
	gf, wf := float64(g), float64(w)
	switch {
	case math.IsNaN(wf) || math.IsNaN(gf):
		return math.IsNaN(wf) && math.IsNaN(gf)
	case math.IsInf(wf, 0) || math.IsInf(gf, 0):
		return gf == wf
	}
	return math.Abs(gf-wf) <= tol*(1+math.Abs(wf))
}

// mustPanic runs f and fails unless it panics with a message containing every part.
func mustPanic(t *testing.T, f func(), parts ...string) {
	t.Helper()
	msg := func() (msg string) {
		defer func() {
			if r := recover(); r != nil {
				msg = fmt.Sprint(r)
			}
		}()
		f()
		return ""
	}()
	if msg == "" {
		t.Fatalf("no panic, want one mentioning %q", parts)
	}
	for _, p := range parts {
		if !strings.Contains(msg, p) {
			t.Fatalf("panic %q does not mention %q", msg, p)
		}
	}
}

// iota32 returns 0, 1, ..., n-1 as float32.
func iota32(n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(i)
	}
	return v
}

// newRand is a fixed-seed generator for test data.
func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 3)) }
