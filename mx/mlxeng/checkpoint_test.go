//go:build mlx

package mlxeng_test

import (
	"testing"

	"github.com/dgtune/dgtune/mx"
)

// TestGradCheckpointPanics: a Go panic in a checkpointed function reaches the caller
// whether MLX runs it in the forward pass (GradCheckpoint re-raises it) or re-runs it
// while differentiating (the value_and_grad that asked re-raises it), and the engine
// keeps working afterwards.
func TestGradCheckpointPanics(t *testing.T) {
	e := mlxEngine(t)
	x := mx.FromFloat32(e, []float32{1, 2}, 2)
	for _, failOn := range []int{1, 2} {
		runs := 0
		f := mx.GradCheckpoint(func(a []*mx.Array) []*mx.Array {
			runs++
			if runs == failOn {
				panic("boom")
			}
			return []*mx.Array{mx.Square(a[0])}
		})
		r := panicOf(func() {
			mx.ValueAndGrad(func(a []*mx.Array) []*mx.Array {
				return []*mx.Array{mx.Sum(f(a)[0], false)}
			})([]*mx.Array{x})
		})
		if r != "boom" {
			t.Errorf("failing on run %d: panic %v, want boom", failOn, r)
		}
	}
	// d/dx Σx² = 2x = [2, 4].
	_, g := mx.ValueAndGrad(func(a []*mx.Array) []*mx.Array {
		return []*mx.Array{mx.Sum(mx.GradCheckpoint(func(b []*mx.Array) []*mx.Array {
			return []*mx.Array{mx.Square(b[0])}
		})(a)[0], false)}
	})([]*mx.Array{x})
	if got := g[0].Float32s(); got[0] != 2 || got[1] != 4 {
		t.Errorf("gradient after the failures = %v, want [2 4]", got)
	}
}
