package goeng

import (
	"math/rand/v2"
	"testing"

	"github.com/dgtune/dgtune/mx"
)

// TestRMSNormVJPOnlyTraced: rms_norm's VJP returns a cotangent exactly for the traced
// inputs, and each one it returns has the bits of the full computation.
func TestRMSNormVJPOnlyTraced(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	const rows, d = 70, 96
	x := newTensor([]int{rows, d}, mx.Float32, randF32(rng, rows*d))
	w := newTensor([]int{d}, mx.Float32, randF32(rng, d))
	g := newTensor([]int{rows, d}, mx.Float32, randF32(rng, rows*d))
	traced := func(v *tensor, on bool) *tensor {
		a := v.alias()
		if on {
			a.node = &node{op: "leaf", leaf: true}
		}
		return a
	}
	_, inv := rmsNormKernel(x, w, 1e-6)
	full := rmsNormVJP(traced(x, true), traced(w, true), inv)(g)
	for _, c := range []struct{ x, w bool }{{true, true}, {true, false}, {false, true}, {false, false}} {
		got := rmsNormVJP(traced(x, c.x), traced(w, c.w), inv)(g)
		for i, want := range []bool{c.x, c.w} {
			if (got[i] != nil) != want {
				t.Fatalf("x traced %v, w traced %v: cotangent %d present %v, want %v", c.x, c.w, i, got[i] != nil, want)
			}
			if want {
				if at := sameBits(got[i].f32(), full[i].f32()); at >= 0 {
					t.Fatalf("x traced %v, w traced %v: cotangent %d element %d differs from the full VJP", c.x, c.w, i, at)
				}
			}
		}
	}
}
