package diffusiongemma_test

import (
	"math"
	"runtime"
	"slices"
	"testing"

	dg "github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/objective"
	"github.com/dgtune/dgtune/optim"
)

// TestTrainStepIndependentOfThreads runs two LoRA training steps (forward, backward,
// AdamW) on the small preset with a 4-bit base at GOMAXPROCS 1 and 8 and wants the same
// bits in every loss and gradient: however the go engine splits its work, the result
// must not depend on the number of cores.
func TestTrainStepIndependentOfThreads(t *testing.T) {
	if testing.Short() {
		t.Skip("two training steps twice")
	}
	run := func(procs int) [][]float32 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
		s := newTrainStep(t, dg.PresetSmall, dg.Bits4, 48, 32)
		var out [][]float32
		for i := range 2 {
			vocab := s.m.Config.TextConfig.VocabSize
			c := s.obj.Draw(mx.Key(s.e, uint64(i)), s.ex.Target, vocab)
			params := optim.Params(s.a.Params())
			loss, g, err := optim.ValueAndGrad(s.a, params, func() *mx.Array {
				l, _ := objective.BatchLoss([]objective.Terms{s.obj.ExampleTerms(s.m, s.ex, c)})
				return l
			})
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, loss.Float32s())
			names := g.Names()
			slices.Sort(names)
			for _, n := range names {
				out = append(out, g[n].Float32s())
			}
			if err := s.a.SetParams(s.opt.Update(params, g)); err != nil {
				t.Fatal(err)
			}
		}
		return out
	}
	one, many := run(1), run(8)
	if len(one) != len(many) {
		t.Fatalf("%d arrays at GOMAXPROCS 1, %d at 8", len(one), len(many))
	}
	for i := range one {
		if len(one[i]) != len(many[i]) {
			t.Fatalf("array %d: %d elements at GOMAXPROCS 1, %d at 8", i, len(one[i]), len(many[i]))
		}
		for j := range one[i] {
			if math.Float32bits(one[i][j]) != math.Float32bits(many[i][j]) {
				t.Fatalf("array %d element %d: %v at GOMAXPROCS 1, %v at 8", i, j, one[i][j], many[i][j])
			}
		}
	}
}
