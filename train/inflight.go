package train

import (
	"fmt"
	"math"

	"github.com/dgtune/dgtune/mx"
)

// Lookahead. On an engine that evaluates lazily (mlx), building a step's graph is host
// work the device does not share: on the H200 the real geometry's compiled step spent
// 22–37 ms of its ~160–200 ms building before its one evaluation, the GPU idle. Alone (one
// rank), the trainer therefore launches each step without waiting for it (async_eval) and
// builds the next step while the device runs it; it waits for the step in flight before
// launching the next, so one step's buffers are live at a time, and whenever the step's
// results are needed: its report, evaluation, checkpoint, the last step, a signal.
//
// The loss is then known only after the update was applied (the device computes both in
// one evaluation). A step whose loss is not finite still stops the run before anything
// records or saves it: its update, and the next step built on it, are never read.

// launched is a step that is built and applied but not yet settled.
type launched struct {
	n      int
	lr     float64
	tokens int64
	// losses are the examples' loss shares (alone), summed on the host in order when
	// settled; distributed, lossSum is already the ranks' sum.
	losses  []*mx.Array
	lossSum float64
	// launch is what evaluating the step means: the new parameters, the optimizer's new
	// state and the losses. settle waits for the parameters and losses only: the next
	// step's update frees this one's state arrays (the parameters need them anyway).
	launch, settle []*mx.Array
	timed          func()
}

// settle waits for the step in flight, if any, and records it; a loss that is not finite
// stops the run with ErrNonFinite, the step unrecorded.
func (r *run) settle(pace *meter) error {
	l := r.inFlight
	if l == nil {
		return nil
	}
	r.inFlight = nil
	mx.Eval(l.settle...)
	l.timed()
	loss := (l.lossSum + hostSum(l.losses)) / float64(r.cfg.GradAccumulationSteps)
	if math.IsNaN(loss) || math.IsInf(loss, 0) {
		return fmt.Errorf("%w at step %d (loss %v); %s", ErrNonFinite, l.n, loss, r.state.keptCheckpoints())
	}
	r.state.record(l.n, l.lr, l.tokens, loss)
	pace.add(l.tokens)
	return nil
}
