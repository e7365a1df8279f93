package goeng_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
)

// TestGatherMM: every row equals that row times its expert's matrix through Matmul, bit
// for bit, whether the indices come sorted or not, and whether the stack is stored
// [E, K, N] or is a swapped [E, N, K]; the leading shape is kept.
func TestGatherMM(t *testing.T) {
	e := mxtest.Go(t)
	rng := rand.New(rand.NewPCG(31, 32))
	const E, K, N = 4, 70, 45
	x := mxtest.RandN(e, rng, 3, 7, K)
	w := mxtest.RandN(e, rng, E, K, N)
	wt := mx.Transpose(w, 0, 2, 1) // [E, N, K], elements computed
	wt = mx.Add(wt, mx.Scalar(e, 0, mx.Float32))
	ids := make([]int32, 21)
	for i := range ids {
		ids[i] = int32(rng.IntN(E - 1)) // expert 3 gets no rows
	}
	idx := mx.FromInt32(e, ids, 3, 7)
	rows := mx.Reshape(x, 21, 1, K)
	want := make([]float32, 0, 21*N)
	for r, id := range ids {
		xr := mx.Reshape(mx.SliceAxis(rows, 0, r, r+1), 1, K)
		we := mx.Reshape(mx.SliceAxis(w, 0, int(id), int(id)+1), K, N)
		want = append(want, mx.Matmul(xr, we).Float32s()...)
	}
	check := func(name string, got *mx.Array) {
		t.Helper()
		if !slices.Equal(got.Shape(), []int{3, 7, N}) {
			t.Fatalf("%s: shape %v", name, got.Shape())
		}
		if !slices.Equal(got.Float32s(), want) {
			t.Fatalf("%s: rows differ from per-row matmuls", name)
		}
	}
	check("unsorted", mx.GatherMM(x, w, idx, false))
	check("swapped stack", mx.GatherMM(x, mx.SwapAxes(wt, 1, 2), idx, false))

	// Sorted: the same rows permuted into expert order give the same rows, permuted.
	order := mx.Argsort(mx.Reshape(idx, 21), 0)
	xs := mx.Take(mx.Reshape(x, 21, K), order, 0)
	ys := mx.GatherMM(xs, w, mx.Take(mx.Reshape(idx, 21), order, 0), true)
	back := mx.Take(ys, mx.Argsort(order, 0), 0)
	if !slices.Equal(back.Float32s(), want) {
		t.Fatal("sorted: rows differ from per-row matmuls")
	}
}

// TestGatherMMBadInput: shape, index and sortedness errors panic with a message naming
// the op and the problem.
func TestGatherMMBadInput(t *testing.T) {
	e := mxtest.Go(t)
	z := func(s ...int) *mx.Array { return mx.Zeros(e, s, mx.Float32) }
	ix := func(v ...int32) *mx.Array { return mx.FromInt32(e, v, len(v)) }
	tests := []struct {
		name string
		call func()
		want []string
	}{
		{"inner size", func() { mx.GatherMM(z(2, 3), z(2, 4, 5), ix(0, 1), false) }, []string{"gather_mm", "[2 3]", "[2 4 5]"}},
		{"index count", func() { mx.GatherMM(z(2, 4), z(2, 4, 5), ix(0), false) }, []string{"gather_mm", "[1]"}},
		{"2-D weight", func() { mx.GatherMM(z(2, 4), z(4, 5), ix(0, 1), false) }, []string{"gather_mm", "[4 5]"}},
		{"float indices", func() { mx.GatherMM(z(2, 4), z(2, 4, 5), z(2), false) }, []string{"gather_mm", "float32"}},
		{"expert out of range", func() { mx.GatherMM(z(2, 4), z(2, 4, 5), ix(0, 2), false) }, []string{"gather_mm", "expert index 2 of 2"}},
		{"unsorted", func() { mx.GatherMM(z(3, 4), z(2, 4, 5), ix(1, 0, 1), true) }, []string{"gather_mm", "sorted indices decrease at row 1"}},
		{"gather_qmm unsorted", func() {
			wq, s, b := mx.Quantize(z(2, 8, 64), 64, 4)
			mx.GatherQMM(z(2, 64), wq, s, b, ix(1, 0), true, 64, 4, true)
		}, []string{"GatherMatmulT", "sorted indices decrease"}},
	}
	for _, tc := range tests {
		msg := func() (msg string) {
			defer func() { msg = fmt.Sprint(recover()) }()
			tc.call()
			return "no panic"
		}()
		for _, w := range tc.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: panic %q, want it to contain %q", tc.name, msg, w)
			}
		}
	}
}

// TestGatherQMMSorted: with rows already grouped by expert, the sorted path (rows used in
// place) gives the unsorted path's bits, forward and backward.
func TestGatherQMMSorted(t *testing.T) {
	e := mxtest.Go(t)
	rng := rand.New(rand.NewPCG(33, 34))
	wq, s, b := mx.Quantize(mxtest.RandN(e, rng, 3, 40, 64), 64, 4)
	x := mxtest.RandN(e, rng, 9, 64)
	idx := mx.FromInt32(e, []int32{0, 0, 0, 0, 1, 2, 2, 2, 2}, 9)
	for _, transpose := range []bool{true, false} {
		xin, ws, ss, bs := x, wq, s, b
		if !transpose {
			xin = mxtest.RandN(e, rng, 9, 40)
			ws, ss, bs = mx.Quantize(mxtest.RandN(e, rng, 3, 40, 64), 64, 4)
		}
		f := func(sorted bool) func(a []*mx.Array) *mx.Array {
			return func(a []*mx.Array) *mx.Array {
				return mx.Sum(mx.Square(mx.GatherQMM(a[0], ws, ss, bs, idx, transpose, 64, 4, sorted)), false)
			}
		}
		v0, g0 := mx.ValueAndGrad(func(a []*mx.Array) []*mx.Array { return []*mx.Array{f(false)(a)} }, 0)([]*mx.Array{xin})
		v1, g1 := mx.ValueAndGrad(func(a []*mx.Array) []*mx.Array { return []*mx.Array{f(true)(a)} }, 0)([]*mx.Array{xin})
		if !slices.Equal(v0[0].Float32s(), v1[0].Float32s()) || !slices.Equal(g0[0].Float32s(), g1[0].Float32s()) {
			t.Fatalf("transpose=%v: sorted path differs from unsorted", transpose)
		}
	}
}
