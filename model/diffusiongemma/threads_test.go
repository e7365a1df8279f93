package diffusiongemma_test

import (
	"fmt"
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
// AdamW) at GOMAXPROCS 1 and at many and wants the same bits in every loss and gradient:
// however the go engine splits its work, the result must not depend on the number of
// cores. The small preset with a 4-bit base at 8; the bench preset's 384 rows at 16, which
// cut the linears' products into row tiles sharing one packed A (a float32 B's row tiles
// are sgemm's TestRowTilesSharingA).
func TestTrainStepIndependentOfThreads(t *testing.T) {
	if testing.Short() {
		t.Skip("two training steps twice")
	}
	for _, tc := range []struct {
		preset         string
		bits           string
		prompt, canvas int
		procs          int
	}{
		{dg.PresetSmall, dg.Bits4, 48, 32, 8},
		{dg.PresetBench, dg.Bits4, 128, 256, 16},
	} {
		t.Run(fmt.Sprintf("%s_bits%s_%d", tc.preset, tc.bits, tc.procs), func(t *testing.T) {
			sameStepsAt(t, tc.preset, tc.bits, tc.prompt, tc.canvas, tc.procs)
		})
	}
}

// sameStepsAt wants two training steps at GOMAXPROCS procs bitwise those at 1.
func sameStepsAt(t *testing.T, preset, bits string, prompt, canvas, procs int) {
	run := func(procs int) [][]float32 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
		s := newTrainStep(t, preset, bits, prompt, canvas)
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
	one, many := run(1), run(procs)
	if len(one) != len(many) {
		t.Fatalf("%d arrays at GOMAXPROCS 1, %d at %d", len(one), len(many), procs)
	}
	for i := range one {
		if len(one[i]) != len(many[i]) {
			t.Fatalf("array %d: %d elements at GOMAXPROCS 1, %d at %d", i, len(one[i]), len(many[i]), procs)
		}
		for j := range one[i] {
			if math.Float32bits(one[i][j]) != math.Float32bits(many[i][j]) {
				t.Fatalf("array %d element %d: %v at GOMAXPROCS 1, %v at %d", i, j, one[i][j], many[i][j], procs)
			}
		}
	}
}
