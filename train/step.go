package train

import (
	"context"
	"slices"

	"github.com/dgtune/dgtune/config"
	"github.com/dgtune/dgtune/data"
	"github.com/dgtune/dgtune/lora"
	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/objective"
	"github.com/dgtune/dgtune/optim"
	"github.com/dgtune/dgtune/session"
)

// step builds step number n at the schedule's learning rate — grad_accumulation_steps
// micro-batches and one optimizer update, over every rank — and launches it. The step
// before it, if still on the device, is settled first (settle): with lookahead the host
// built this step's graph while the device ran that one, and this step is left running;
// without, it is settled at once.
func (r *run) step(ctx context.Context, n int, pace *meter) error {
	lr := r.sched(n - 1)
	r.opt.SetLearningRate(lr)
	timed := r.c.timeStep()
	l, err := r.update(ctx, n)
	if serr := r.settle(pace); serr != nil {
		return serr
	}
	if err != nil {
		return err
	}
	l.lr, l.timed = lr, timed
	r.inFlight = l
	if r.lookahead {
		mx.AsyncEval(l.launch...)
		return nil
	}
	return r.settle(pace)
}

// update builds step n: its gradient and the optimizer update, applied to the trainable
// arrays but not evaluated. Everything the step creates is released when the step is
// built except what the launched step holds: the new parameters, the optimizer state and
// the examples' losses (deterministic memory on engines Go's GC cannot see).
func (r *run) update(ctx context.Context, n int) (l *launched, err error) {
	l = &launched{n: n}
	mx.Tidy(r.s.Engine, func() []*mx.Array {
		params := r.params.Params()
		// The accumulated sums are freed once the update is built (MLX keeps what the
		// graph needs).
		var acc optim.Accumulator
		defer acc.Reset()
		var grads optim.Params
		if grads, l.losses, l.lossSum, l.tokens, err = r.gradient(ctx, n, params, &acc); err != nil {
			return nil
		}
		if err = r.apply(params, grads); err != nil {
			return nil
		}
		l.settle = append(optim.Params(r.params.Params()).Arrays(), l.losses...)
		l.launch = slices.Clone(l.settle)
		for _, a := range r.opt.State() {
			l.launch = append(l.launch, a)
		}
		return l.launch
	})
	return l, err
}

// gradient is step n's gradient, the examples' loss shares and the token count, summed
// over the ranks: its micro-batches are drawn first (each rank needs the global counts to
// weight its share), then each micro-batch's gradient is accumulated, then one all_sum adds
// up the ranks'. Alone, the loss shares stay arrays (losses), read when the step is
// settled; distributed, they travel in the all_sum as a host sum (lossSum).
func (r *run) gradient(ctx context.Context, n int, params optim.Params, acc *optim.Accumulator) (grads optim.Params, losses []*mx.Array, lossSum float64, tokens int64, err error) {
	micros, counts, tokens := r.drawStep(n)
	if counts, err = r.c.sumHost(r.s.Engine, counts); err != nil {
		return nil, nil, 0, 0, err
	}
	counts = shareDenominators(counts, r.cfg.LossNormalization)
	if grads, losses, err = r.accumulate(acc, n, params, micros, counts); err != nil {
		return nil, nil, 0, 0, err
	}
	if r.c.size == 1 {
		return grads, losses, 0, tokens, nil
	}
	grads, lossSum, tokens, err = r.c.sumStep(r.s.Engine, grads, hostSum(losses), tokens, ctx.Err() != nil)
	if err != nil {
		return nil, nil, 0, 0, err
	}
	return grads, nil, lossSum, tokens, nil
}

// hostSum adds the arrays' values in order in float64, as the loss shares always were.
func hostSum(xs []*mx.Array) float64 {
	var s float64
	for _, x := range xs {
		s += x.Item()
	}
	return s
}

// apply clips the gradient (grad_clip) and builds one optimizer step from params,
// installing the new (unevaluated) parameters.
func (r *run) apply(params, grads optim.Params) error {
	if r.cfg.GradClip > 0 {
		grads, _ = optim.ClipGradNorm(grads, r.cfg.GradClip)
	}
	return r.params.SetParams(r.opt.Update(params, grads))
}

// drawStep draws the batches of step n's micro-batches and their noise (see
// drawMicroBatch), advancing the iterator, and returns this rank's share of each, the
// micro-batches' counts (counts[2m] scored canvas positions, counts[2m+1] encoder pairs,
// of this rank's examples) and this rank's prompt + canvas tokens.
func (r *run) drawStep(n int) ([]microBatch, []float64, int64) {
	micros := make([]microBatch, r.cfg.GradAccumulationSteps)
	counts := make([]float64, 2*len(micros))
	var tokens int64
	for m := range micros {
		batch, pos := r.it.Next()
		r.state.Position = pos
		var k int64
		micros[m], counts[2*m], counts[2*m+1], k = drawMicroBatch(r.s, r.cfg.Seed, r.cfg.SelfConditioningDraw, n, m, batch, r.c.mine)
		tokens += k
	}
	return micros, counts, tokens
}

// accumulate is the mean over micro-batches of their gradients (each the sum of its
// examples' share gradients, given the step's denominators), through acc, and the sum of
// the examples' loss shares.
func (r *run) accumulate(acc *optim.Accumulator, n int, params optim.Params, micros []microBatch, counts []float64) (optim.Params, []*mx.Array, error) {
	var losses []*mx.Array
	for m, mb := range micros {
		if len(mb.examples) == 0 {
			// A short last batch of an epoch can leave a rank without examples: it adds
			// nothing, and the micro-batch still counts once in the average.
			zeros := optim.Params{}
			for _, name := range sortedNames(params) {
				zeros[name] = mx.ZerosLike(params[name])
			}
			if err := acc.Add(zeros); err != nil {
				return nil, nil, err
			}
			continue
		}
		// One gradient pass per example, summed in example order: a micro-batch split over
		// ranks then sums the same per-example gradients (all_sum of two ranks' is the same
		// float32 addition), so two ranks reproduce one process to the bit.
		var sum optim.Params
		for i := range mb.examples {
			loss, g, err := r.exampleGrad(params, n, m, mb, i, counts[2*m], counts[2*m+1])
			if err != nil {
				return nil, nil, err
			}
			if sum == nil {
				sum = g
			} else {
				for name, a := range g {
					sum[name] = mx.Add(sum[name], a)
				}
			}
			losses = append(losses, loss)
		}
		if err := acc.Add(sum); err != nil {
			return nil, nil, err
		}
	}
	grads, err := acc.Average()
	return grads, losses, err
}

// exampleGrad is the loss share of example i of micro-batch m (its terms over the global
// counts) and its gradient with respect to every trainable array. LoRA dropout is on only
// inside the gradient pass (validation runs without it), with masks keyed by (seed, step,
// micro-batch, example) so a resumed run, and a run split over any number of ranks,
// replays them.
func (r *run) exampleGrad(params map[string]*mx.Array, step, m int, mb microBatch, i int, count, encCount float64) (*mx.Array, optim.Params, error) {
	e := r.s.Engine
	adapter, dropout := r.params.(*lora.Adapter)
	dropout = dropout && r.cfg.LoRAParameters.Dropout > 0
	if r.compiled != nil && r.s.Objective.DenseSupported(mb.examples[i], mb.corr[i]) {
		return r.compiledGrad(params, mb.examples[i], mb.corr[i], count)
	}
	if dropout {
		adapter.SetTraining(mx.Key(e, session.DeriveSeed(r.cfg.Seed, seedDropout, uint64(step), uint64(m), uint64(mb.index[i]))))
	}
	loss, g, err := optim.ValueAndGrad(r.params, params, func() *mx.Array {
		t := r.s.Objective.ExampleTerms(r.s.Model, mb.examples[i], mb.corr[i])
		return objective.ShareLoss([]objective.Terms{t}, count, encCount)
	})
	if dropout {
		adapter.SetTraining(nil)
	}
	if err != nil {
		return nil, nil, err
	}
	return loss, g, nil
}

// microBatch is this rank's share of one micro-batch: the examples, their noise and
// their index in the global micro-batch.
type microBatch struct {
	index    []int
	examples []objective.Example
	corr     []objective.Corruption
}

// drawMicroBatch draws the noise and the objective's choices of this rank's examples of
// micro-batch m of a step (example b of the global micro-batch is this rank's when mine(b)),
// keyed by (seed, step, m, b), and counts the micro-batch's scored canvas positions and
// encoder pairs (of this rank's examples) and its prompt + canvas tokens. With
// self_conditioning_draw step one coin, keyed by (seed, step, m), decides for every example
// of the micro-batch on every rank (NeMo AutoModel's per-(step, micro-batch) coin).
func drawMicroBatch(s *session.Session, seed uint64, draw string, step, m int, batch []data.Pair, mine func(int) bool) (mb microBatch, canvas, pairs float64, tokens int64) {
	e := s.DrawEngine()
	var coin *bool
	if draw == config.DrawPerStep {
		c := s.Objective.Coin(mx.Key(e, session.DeriveSeed(seed, seedTrainCoin, uint64(step), uint64(m))))
		coin = &c
	}
	for b, p := range batch {
		if !mine(b) {
			continue
		}
		ex := objective.Example{Prompt: p.Prompt, Target: p.Target, Images: p.Images}
		key := mx.Key(e, session.DeriveSeed(seed, seedTrainNoise, uint64(step), uint64(m), uint64(b)))
		choice := mx.Key(e, session.DeriveSeed(seed, seedTrainChoice, uint64(step), uint64(m), uint64(b)))
		c := s.Objective.DrawExample(key, choice, p.Target, s.Model.Config.TextConfig.VocabSize)
		if coin != nil {
			c.SelfCond = *coin
		}
		mb.index = append(mb.index, b)
		mb.examples = append(mb.examples, ex)
		mb.corr = append(mb.corr, c)
		canvas += s.Objective.Count(c)
		pairs += s.Objective.EncoderCount(ex, s.Model.Config.ImageTokenID)
		tokens += int64(len(p.Prompt) + len(p.Target))
	}
	return mb, canvas, pairs, tokens
}

// shareDenominators turns the global counts of each micro-batch m of a step — counts[2m]
// scored canvas positions, counts[2m+1] encoder next-token pairs, over every rank — into the
// denominators of its examples' shares (objective.ShareLoss). The step's gradient is the
// mean of its micro-batches' (optim.Accumulator), so a term normalised over the whole step
// divides by the step's count over the number of micro-batches M: the mean of the
// micro-batches' Σ/(N/M) is Σ over the step / N. The encoder's pairs are always counted over
// the step (NeMo AutoModel's num_ar_tokens); the denoising positions per micro-batch
// (loss_normalization micro_batch, mlx-lm's mean of micro-batch losses) or over the step
// (step, NeMo's num_diffusion_tokens). A step that scores nothing divides by 1 (over M).
func shareDenominators(counts []float64, normalization string) []float64 {
	m := len(counts) / 2
	var canvas, pairs float64
	for i := range m {
		canvas += counts[2*i]
		pairs += counts[2*i+1]
	}
	out := make([]float64, len(counts))
	for i := range m {
		out[2*i] = counts[2*i]
		if normalization == config.NormalizeStep {
			out[2*i] = max(canvas, 1) / float64(m)
		}
		out[2*i+1] = max(pairs, 1) / float64(m)
	}
	return out
}

func paramValues(p optim.Params, names []string) []*mx.Array {
	out := make([]*mx.Array, len(names))
	for i, n := range names {
		out[i] = p[n]
	}
	return out
}
