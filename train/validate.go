package train

import (
	"fmt"
	"math"
	"time"

	"github.com/dgtune/dgtune/data"
	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/objective"
	"github.com/dgtune/dgtune/session"
)

// evaluate computes the val loss at step over the whole valid split (or val_batches
// batches), each example with its fixed corruption, and reports it. A better loss than
// any before is saved as best_adapters.safetensors; stop says that early stopping is due
// (early_stopping_patience evaluations without one). Without a valid split it does nothing.
func (r *run) evaluate(step int) (loss float64, stop bool, err error) {
	if len(r.val) == 0 {
		return 0, false, nil
	}
	start := time.Now()
	n := len(r.val)
	if r.cfg.ValBatches > 0 {
		n = min(n, r.cfg.ValBatches*r.cfg.BatchSize)
	}
	// Each rank scores its share (example i is rank i mod size's), with the same fixed
	// corruption as a run of one; the sums add up over the ranks.
	sum, count := validationSums(r.s, r.val[:n], r.cfg.Seed, r.c.mine)
	sums, err := r.c.sumHost(r.s.Engine, []float64{sum, count})
	if err != nil {
		return 0, false, err
	}
	loss = sums[0] / max(sums[1], 1)
	r.reporter.Val(ValReport{Iteration: step, ValLoss: loss, Examples: n, Seconds: time.Since(start).Seconds()})
	if math.IsNaN(loss) || math.IsInf(loss, 0) {
		return loss, false, fmt.Errorf("%w: validation loss %v at step %d; %s", ErrNonFinite, loss, step, r.state.keptCheckpoints())
	}
	if !r.state.observeVal(loss) {
		return loss, r.cfg.EarlyStoppingPatience > 0 && r.state.EvalsSinceBest >= r.cfg.EarlyStoppingPatience, nil
	}
	// Step 0 counts too: if training never beats the initial adapter, that is the best.
	if r.c.rank == 0 {
		if err := r.c.saving(-1, func() error { return r.saveWeights(BestAdapterFile) }); err != nil {
			return loss, false, err
		}
	}
	return loss, false, nil
}

// ValidationLoss is the token-weighted denoising loss over pairs, each corrupted (and,
// for a long target, its block chosen) by keys derived from its index only, so the
// number is comparable across steps and runs. It is single-pass: no self-conditioning
// and no encoder loss, whatever the training objective adds.
func ValidationLoss(s *session.Session, pairs []data.Pair, seed uint64) float64 {
	sum, count := validationSums(s, pairs, seed, func(int) bool { return true })
	return sum / max(count, 1)
}

// validationSums is ValidationLoss's Σ scale·terms and Σ scored positions over the
// pairs i for which keep(i) holds.
func validationSums(s *session.Session, pairs []data.Pair, seed uint64, keep func(i int) bool) (sum, count float64) {
	vocab := s.Model.Config.TextConfig.VocabSize
	obj := s.Objective.SinglePass()
	for i, p := range pairs {
		if !keep(i) {
			continue
		}
		key := mx.Key(s.DrawEngine(), session.DeriveSeed(seed, seedValNoise, uint64(p.Index), uint64(i)))
		choice := mx.Key(s.DrawEngine(), session.DeriveSeed(seed, seedValChoice, uint64(p.Index), uint64(i)))
		c := obj.DrawExample(key, choice, p.Target, vocab)
		var t objective.Terms
		mx.Tidy(s.Engine, func() []*mx.Array {
			t = obj.ExampleTerms(s.Model, objective.Example{Prompt: p.Prompt, Target: p.Target, Images: p.Images}, c)
			sum += t.Sum.Item() * t.Scale
			return nil
		})
		count += t.Count
	}
	return sum, count
}
