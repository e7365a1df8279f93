package objective

import (
	"testing"

	"github.com/dgtune/dgtune/mx/mxtest"
)

// TestShareLoss: the parts of a batch spread over processes, each divided by the whole
// batch's counts, add up to BatchLoss; one part holding every example is BatchLoss to
// the bit; Count and EncoderCount are known before the model runs and equal the Terms'
// counts. NeMo's objective (no block choice here) adds the encoder's next-token terms.
func TestShareLoss(t *testing.T) {
	e := mxtest.Go(t)
	m := tinyModel(t, e)
	for _, o := range []Objective{Reference(0.4, 0.8), {TMin: 0.4, TMax: 0.8, Positions: All, Weighting: InvT}, NeMo(0)} {
		ex1 := Example{Prompt: []int32{2, 105, 40, 106}, Target: []int32{300, 301, 302, 303, 304, 305, 306}}
		ex2 := Example{Prompt: []int32{2, 105, 40, 41, 42, 43, 44, 45, 46, 106}, Target: []int32{310, 311, 312}}
		c1 := handCorruption(0.5, ex1.Target, []bool{true, true, false, true, false, true, true}, []int32{9, 8, 0, 7, 0, 6, 5})
		c2 := handCorruption(0.25, ex2.Target, []bool{false, true, false}, []int32{0, 200, 0})
		t1, t2 := o.ExampleTerms(m, ex1, c1), o.ExampleTerms(m, ex2, c2)
		if o.Count(c1) != t1.Count || o.Count(c2) != t2.Count {
			t.Fatalf("%+v: Count %v, %v; terms say %v, %v", o, o.Count(c1), o.Count(c2), t1.Count, t2.Count)
		}
		enc1, enc2 := o.EncoderCount(ex1, m.Config.ImageTokenID), o.EncoderCount(ex2, m.Config.ImageTokenID)
		if enc1 != t1.EncCount || enc2 != t2.EncCount || (o.EncoderWeight > 0 && enc1 != 10) {
			t.Fatalf("%+v: EncoderCount %v, %v; terms say %v, %v (want 10 = 4 + 7 − 1 pairs)", o, enc1, enc2, t1.EncCount, t2.EncCount)
		}
		whole, count := BatchLoss([]Terms{t1, t2})
		encCount := enc1 + enc2
		if got, want := ShareLoss([]Terms{t1, t2}, count, encCount).Item(), whole.Item(); got != want {
			t.Errorf("%+v: one part %v, BatchLoss %v", o, got, want)
		}
		parts := ShareLoss([]Terms{t1}, count, encCount).Item() + ShareLoss([]Terms{t2}, count, encCount).Item()
		if !near(parts, whole.Item(), 1e-6) {
			t.Errorf("%+v: parts add up to %v, BatchLoss %v", o, parts, whole.Item())
		}
	}
}
