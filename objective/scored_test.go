package objective

import (
	"testing"

	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
)

// ExampleTerms runs the tied head only on the scored rows. This pins that against the
// plain formulation — every position's logits, Σ wᵢ·ceᵢ — for the loss and for every
// adapter gradient, on the single and the two-pass step, with some, all and no
// positions scored (the last takes the all-rows path, a differentiable zero).
func TestScoredRowsMatchFullHead(t *testing.T) {
	e := mxtest.Go(t)
	m, a, names, _ := loraTiny(t, e)
	base, _ := argsOf(a, names)
	ex := Example{Prompt: []int32{2, 105, 40, 41, 42, 43, 106, 107, 105}, Target: []int32{300, 301, 302, 303, 304, 305}}
	noise := []int32{17, 3, 450, 99, 8, 12}
	for _, tc := range []struct {
		name     string
		mask     []bool
		selfCond bool
		pos      Positions
	}{
		{"some", []bool{true, false, true, true, false, true}, false, Corrupted},
		{"one", []bool{false, false, false, true, false, false}, false, Corrupted},
		{"all corrupted", []bool{true, true, true, true, true, true}, false, Corrupted},
		{"none", []bool{false, false, false, false, false, false}, false, Corrupted},
		{"all positions", []bool{true, false, true, true, false, true}, false, All},
		{"two-pass", []bool{true, false, true, true, false, true}, true, Corrupted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := Objective{TMin: 0.5, TMax: 0.5, Positions: tc.pos, Weighting: NoWeighting}
			c := handCorruption(0.5, ex.Target, tc.mask, noise)
			c.SelfCond = tc.selfCond
			scored := func(args []*mx.Array) *mx.Array {
				setArgs(t, a, names, args)
				return o.ExampleTerms(m, ex, c).Sum
			}
			full := func(args []*mx.Array) *mx.Array {
				setArgs(t, a, names, args)
				prompt, canvas := mx.FromInt32(e, ex.Prompt, 1, len(ex.Prompt)), mx.FromInt32(e, c.Canvas, 1, len(c.Canvas))
				var logits *mx.Array
				if c.SelfCond {
					cache := m.NewCache()
					m.Encode(prompt, cache)
					logits = SelfConditioned(m, canvas, cache)
				} else {
					logits = m.Logits(m.EncodeDecodeHidden(prompt, canvas))
				}
				w := o.weights(c)
				return mx.Sum(mx.Multiply(CrossEntropy(logits, ex.Target), mx.FromFloat32(e, w, 1, len(w))), false)
			}
			gotLoss, wantLoss := scored(base).Float32s()[0], full(base).Float32s()[0]
			if !near(float64(gotLoss), float64(wantLoss), 1e-6) {
				t.Errorf("loss %.9g, want %.9g", gotLoss, wantLoss)
			}
			got, want := mx.Grad(scored)(base), mx.Grad(full)(base)
			nonzero := false
			for i, n := range names {
				g, w := got[i].Float32s(), want[i].Float32s()
				if ok, at := mxtest.Close(g, w, 1e-5, 1e-7); !ok {
					t.Errorf("%s: gradient %g at %d, want %g", n, g[at], at, w[at])
				}
				for _, v := range w {
					nonzero = nonzero || v != 0
				}
			}
			if none := tc.name == "none"; nonzero == none {
				t.Errorf("some gradient non-zero: %v, want %v", nonzero, !none)
			}
		})
	}
}
