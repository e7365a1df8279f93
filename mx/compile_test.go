package mx_test

import (
	"slices"
	"testing"

	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
)

// TestCompileWithoutCompiler: on an engine that cannot compile (the go engine), Compile
// runs the function itself on every call, with the same results.
func TestCompileWithoutCompiler(t *testing.T) {
	e := mxtest.Go(t)
	calls := 0
	f := func(a []*mx.Array) []*mx.Array {
		calls++
		return []*mx.Array{mx.Multiply(a[0], a[1]), mx.Sum(a[0], false)}
	}
	compiled, release := mx.Compile(e, f)
	defer release()
	for i := range 3 {
		x := mx.FromFloat32(e, []float32{1, 2, float32(i)}, 3)
		y := mx.FromFloat32(e, []float32{4, 5, 6}, 3)
		out := compiled([]*mx.Array{x, y})
		if got, want := out[0].Float32s(), []float32{4, 10, 6 * float32(i)}; !slices.Equal(got, want) {
			t.Fatalf("call %d: product %v, want %v", i, got, want)
		}
		if got := out[1].Item(); got != float64(3+i) {
			t.Fatalf("call %d: sum %v, want %v", i, got, 3+i)
		}
	}
	if calls != 3 {
		t.Fatalf("f ran %d times, want 3", calls)
	}
}
