//go:build mlx

package mlxeng_test

import (
	"math"
	"testing"

	"github.com/dgtune/dgtune/mx"
)

// TestAdamStepAllMatchesComposition: the engine's compiled AdamW update over several
// parameters gives mx.AdamCompose's values op by op, uncompiled — to the bit on MLX's CPU
// backend — with and without weight decay, and a second call with a new learning rate
// (the schedule's next step: a replay of the trace) uses the new rate, not the traced one.
func TestAdamStepAllMatchesComposition(t *testing.T) {
	e := mlxEngine(t)
	if _, ok := mx.Engine(e).(mx.AdamStepperAll); !ok {
		t.Fatal("the mlx engine has no AdamStepAll")
	}
	shapes := [][]int{{8, 3}, {3, 5}, {17}, {4, 4}}
	arrs := func(seed uint64, lo, hi float64) []*mx.Array {
		out := make([]*mx.Array, len(shapes))
		for i, s := range shapes {
			n := 1
			for _, d := range s {
				n *= d
			}
			out[i] = mx.FromFloat32(e, floats(seed+uint64(i), n, lo, hi), s...)
		}
		return out
	}
	ps, gs, ms, vs := arrs(1, -2, 2), arrs(11, -0.5, 0.5), arrs(21, -0.1, 0.1), arrs(31, 0, 0.2)
	d, _ := mx.Device(e)
	gpu := d.Kind == "gpu"
	for _, wd := range []float32{0, 0.05} {
		for _, lr := range []float32{3e-3, 1e-4} { // the second call replays the first's trace
			c := mx.AdamConstants{LR: lr, B1: 0.9, OneMinusB1: float32(1 - 0.9), B2: 0.999, OneMinusB2: float32(1 - 0.999), Eps: 1e-8}
			if wd != 0 {
				c.HasDecay, c.WeightDecay, c.Decay = true, wd, 1-float32(lr*wd)
			}
			np, nm, nv, ok := mx.AdamStepAll(ps, gs, ms, vs, c)
			if !ok {
				t.Fatal("AdamStepAll refused float32 parameters")
			}
			for i := range ps {
				wp, wm, wv := mx.AdamCompose(ps[i], gs[i], ms[i], vs[i], mx.Scalar(e, float64(lr), mx.Float32), c)
				for k, pair := range [][2]*mx.Array{{np[i], wp}, {nm[i], wm}, {nv[i], wv}} {
					got, want := pair[0].Float32s(), pair[1].Float32s()
					for j := range want {
						same := math.Float32bits(got[j]) == math.Float32bits(want[j])
						// A GPU's fused kernel may contract a product and a sum into one FMA.
						close := math.Abs(float64(got[j]-want[j])) <= 1e-6*(1+math.Abs(float64(want[j])))
						if !same && !(gpu && close) {
							t.Fatalf("wd %g lr %g param %d output %d [%d]: %v, want %v", wd, lr, i, k, j, got[j], want[j])
						}
					}
				}
			}
		}
	}
}
