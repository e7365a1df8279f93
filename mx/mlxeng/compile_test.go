//go:build mlx

package mlxeng_test

import (
	"slices"
	"testing"

	"github.com/dgtune/dgtune/mx"
)

// TestCompile: a compiled function gives the uncompiled values on every call — new
// inputs of the traced shapes (a replay), a new shape (a second trace) — keeps captured
// arrays as constants, and differentiates inside (value_and_grad under compile, as a
// training step is compiled).
func TestCompile(t *testing.T) {
	e := mlxEngine(t)
	w := rf(e, 300, 5, 3) // captured: a frozen weight
	traces := 0
	f := func(a []*mx.Array) []*mx.Array {
		traces++
		vg := mx.ValueAndGrad(func(p []*mx.Array) []*mx.Array {
			y := mx.Tanh(mx.Matmul(mx.Multiply(a[1], p[0]), w)) // x·s, then ·w
			return []*mx.Array{mx.Sum(mx.Multiply(y, y), false)}
		})
		vals, grads := vg([]*mx.Array{a[0]})
		return []*mx.Array{vals[0], grads[0]}
	}
	compiled, release := mx.Compile(e, f)
	defer release()
	for i, shape := range [][]int{{4, 5}, {4, 5}, {2, 5}, {4, 5}} {
		mx.Tidy(e, func() []*mx.Array {
			s, x := rf(e, uint64(310+i), 5), rf(e, uint64(320+i), shape...)
			got := compiled([]*mx.Array{s, x})
			want := f([]*mx.Array{s, x})
			for k := range want {
				g, w := got[k].Float32s(), want[k].Float32s()
				if len(g) != len(w) {
					t.Fatalf("call %d output %d: %d values, want %d", i, k, len(g), len(w))
				}
				for j := range g {
					if d := g[j] - w[j]; d > 1e-5 || d < -1e-5 {
						t.Fatalf("call %d output %d [%d]: compiled %v, uncompiled %v", i, k, j, g[j], w[j])
					}
				}
			}
			return nil
		})
	}
	// Two traces (shapes [4 5] and [2 5]) plus the four uncompiled calls.
	if traces != 6 {
		t.Errorf("f ran %d times, want 6 (2 traces + 4 uncompiled calls)", traces)
	}
}

// TestCompilePanics: a panic while tracing reaches the caller, and the engine works after.
func TestCompilePanics(t *testing.T) {
	e := mlxEngine(t)
	compiled, release := mx.Compile(e, func(a []*mx.Array) []*mx.Array { panic("boom") })
	defer release()
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Fatalf("recovered %v, want boom", r)
			}
		}()
		compiled([]*mx.Array{rf(e, 1, 2)})
	}()
	if got := mx.AddScalar(rf(e, 2, 2), 0).Float32s(); !slices.Equal(got, rf(e, 2, 2).Float32s()) {
		t.Fatalf("engine broken after a failed trace: %v", got)
	}
}
