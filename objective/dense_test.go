package objective

import (
	"math"
	"testing"

	"github.com/dgtune/dgtune/lora"
	dg "github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/model/diffusiongemma/dgtest"
	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
	"github.com/dgtune/dgtune/optim"
)

// TestDenseMatchesExampleTerms: the dense form of a step (every canvas row scored with
// its weight, the compiled step's inputs) gives ExampleTerms' loss share and LoRA
// gradients up to summation order, for both weightings and position rules, and refuses
// the steps it has no form for.
func TestDenseMatchesExampleTerms(t *testing.T) {
	e := mxtest.Go(t)
	m := dgtest.Tiny(5, dg.Bits4).Model(t, e)
	a, err := lora.Attach(m, lora.Config{Rank: 2, Scale: 4, Keys: dg.DefaultLoRAKeys(), NumLayers: -1}, 11)
	if err != nil {
		t.Fatal(err)
	}
	ex := Example{Prompt: []int32{2, 17, 40, 99, 5, 300}, Target: []int32{7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18}}
	for _, tc := range []struct {
		name string
		obj  Objective
	}{
		{"reference", Reference(0.4, 0.8)},
		{"inv_t all positions", Objective{TMin: 0.2, TMax: 0.9, Weighting: InvT, Positions: All}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.obj.Draw(mx.Key(e, 3), ex.Target, m.Config.TextConfig.VocabSize)
			params := optim.Params(a.Params())
			want, wantG, err := optim.ValueAndGrad(a, params, func() *mx.Array {
				return ShareLoss([]Terms{tc.obj.ExampleTerms(m, ex, c)}, tc.obj.Count(c), 0)
			})
			if err != nil {
				t.Fatal(err)
			}
			d, err := tc.obj.DenseInputs(e, ex, c, tc.obj.Count(c))
			if err != nil {
				t.Fatal(err)
			}
			got, gotG, err := optim.ValueAndGrad(a, params, func() *mx.Array { return DenseLoss(m, d.Arrays()) })
			if err != nil {
				t.Fatal(err)
			}
			if g, w := got.Item(), want.Item(); math.Abs(g-w) > 1e-5*math.Abs(w) {
				t.Fatalf("dense loss %v, ExampleTerms %v", g, w)
			}
			for n, wg := range wantG {
				gv, wv := gotG[n].Float32s(), wg.Float32s()
				big := 0.0
				for _, v := range wv {
					big = max(big, math.Abs(float64(v)))
				}
				for i := range wv {
					if math.Abs(float64(gv[i]-wv[i])) > 1e-5*big+1e-7 {
						t.Fatalf("%s[%d]: dense %v, ExampleTerms %v", n, i, gv[i], wv[i])
					}
				}
			}
		})
	}
	nemo := Objective{TMin: 0.4, TMax: 0.8, EncoderWeight: 1}
	c := nemo.Draw(mx.Key(e, 4), ex.Target, m.Config.TextConfig.VocabSize)
	if _, err := nemo.DenseInputs(e, ex, c, 1); err == nil || err.Error() != "objective: the step has no dense form (encoder loss, self-conditioning or images)" {
		t.Fatalf("encoder loss: err %v", err)
	}
}
