package diffusiongemma_test

import (
	"math/rand/v2"
	"testing"

	"github.com/dgtune/dgtune/lora"
	dg "github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/model/diffusiongemma/dgtest"
	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
	"github.com/dgtune/dgtune/objective"
	"github.com/dgtune/dgtune/optim"
)

// BenchmarkTrainStep is one LoRA training step (rank 8 on the default keys, AdamW) as
// `probe bench` times it: encoder over a 64-token prompt, decoder over a 64-token canvas,
// the reference loss, the backward pass through both and the update — on the small
// preset with a 4-bit and an unquantized base, plain and with grad_checkpoint.
func BenchmarkTrainStep(b *testing.B) {
	for _, c := range []struct {
		name, bits string
		ckpt       bool
	}{
		{"small/4bit", dg.Bits4, false},
		{"small/f32", dg.BitsNone, false},
		{"small/4bit/grad_checkpoint", dg.Bits4, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			step := newTrainStep(b, dg.PresetSmall, c.bits, 64, 64)
			step.m.GradCheckpoint = c.ckpt
			step.run(b, 0) // warm-up
			i := 1
			for b.Loop() {
				step.run(b, i)
				i++
			}
			b.ReportMetric(float64(128*b.N)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}

type trainStep struct {
	e   mx.Engine
	m   *dg.Model
	a   *lora.Adapter
	opt optim.Optimizer
	ex  objective.Example
	obj objective.Objective
	// afterForward, when set, runs once the loss of a step is evaluated, before the
	// backward pass (the memory tests read the live heap there).
	afterForward func()
}

func newTrainStep(b testing.TB, preset, bits string, promptLen, canvasLen int) *trainStep {
	return newTrainStepE(b, mxtest.Go(b), preset, bits, promptLen, canvasLen)
}

func newTrainStepE(b testing.TB, e mx.Engine, preset, bits string, promptLen, canvasLen int) *trainStep {
	m := dgtest.Spec{Preset: preset, Seed: 1, Bits: bits}.Model(b, e)
	return newTrainStepM(b, e, m, promptLen, canvasLen)
}

// newTrainStepM is newTrainStepE on a model already built (a checkpoint loaded from disk).
func newTrainStepM(b testing.TB, e mx.Engine, m *dg.Model, promptLen, canvasLen int) *trainStep {
	cfg := m.Config
	a, err := lora.Attach(m, lora.DefaultConfig(), 1)
	if err != nil {
		b.Fatal(err)
	}
	opt, err := optim.NewAdamW(optim.Params(a.Params()), optim.AdamWDefaults(1e-4))
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	ids := func(n int) []int32 {
		v := make([]int32, n)
		for i := range v {
			v[i] = int32(rng.IntN(cfg.TextConfig.VocabSize))
		}
		return v
	}
	return &trainStep{e: e, m: m, a: a, opt: opt, ex: objective.Example{Prompt: ids(promptLen), Target: ids(canvasLen)},
		obj: objective.Reference(0.4, 0.8)}
}

func (s *trainStep) run(b testing.TB, i int) {
	vocab := s.m.Config.TextConfig.VocabSize
	c := s.obj.Draw(mx.Key(s.e, uint64(i)), s.ex.Target, vocab)
	params := optim.Params(s.a.Params())
	_, g, err := optim.ValueAndGrad(s.a, params, func() *mx.Array {
		loss, _ := objective.BatchLoss([]objective.Terms{s.obj.ExampleTerms(s.m, s.ex, c)})
		if s.afterForward != nil {
			mx.Eval(loss)
			s.afterForward()
		}
		return loss
	})
	if err != nil {
		b.Fatal(err)
	}
	if err := s.a.SetParams(s.opt.Update(params, g)); err != nil {
		b.Fatal(err)
	}
}
