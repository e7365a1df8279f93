package train

// A run, followed from Run: prepare (prepare.go) opens the session, sets up what is
// trained and where the run starts (state.go); the loop below repeats step (step.go) →
// report (report.go) → evaluate (validate.go) → save (save.go). The ranks of a
// distributed run meet only inside the cluster's methods (distributed.go, agree.go).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/dgtune/dgtune/config"
	"github.com/dgtune/dgtune/data"
	"github.com/dgtune/dgtune/internal/atomicfile"
	"github.com/dgtune/dgtune/internal/runlock"
	"github.com/dgtune/dgtune/lossplot"
	"github.com/dgtune/dgtune/optim"
	"github.com/dgtune/dgtune/session"
)

// ErrInterrupted is returned when the context is cancelled (SIGINT/SIGTERM): the step in
// flight was finished and a resumable checkpoint saved.
var ErrInterrupted = errors.New("interrupted")

// ErrNonFinite is returned when a training loss is NaN or infinite.
var ErrNonFinite = errors.New("non-finite loss")

// Options are the parts of a run that are not configuration.
type Options struct {
	Log      io.Writer // progress and messages (stderr)
	Terminal bool      // draw a progress bar instead of log lines
	Verbose  bool      // print every resolved setting, not only those that differ from the defaults
	// Exit ends the process when a distributed run loses a rank while this rank may be
	// blocked inside MLX (see cluster); nil prints err on stderr and exits with 1.
	Exit func(err error)
	// Synchronous waits for every step before building the next one, where the run
	// would otherwise build it while the device computes (lookahead, inflight.go): for
	// debugging, and for tests that compare the two.
	Synchronous bool
}

// Result summarises a finished run.
type Result struct {
	Steps         int      `json:"steps"`
	FinalLoss     float64  `json:"final_train_loss"`
	FinalValLoss  *float64 `json:"final_val_loss,omitempty"`
	BestValLoss   *float64 `json:"best_val_loss,omitempty"`
	TrainedTokens int64    `json:"trained_tokens"`
	AdapterPath   string   `json:"adapter_path"`
	StoppedEarly  bool     `json:"stopped_early"`
	AlreadyDone   bool     `json:"already_done,omitempty"` // resumed a finished run: nothing was trained
	// Test is the test split's score (test: true), EvaluatedOnly that nothing was trained
	// (train: false).
	Test          *TestScore `json:"test,omitempty"`
	EvaluatedOnly bool       `json:"evaluated_only,omitempty"`
	// Rank is this process's rank in a distributed run (0 alone); only rank 0 writes.
	Rank        int               `json:"rank,omitempty"`
	Distributed *DistributedStats `json:"distributed,omitempty"`
	// ElapsedSeconds is this process's wall time, from loading the model to the end;
	// BestValStep the step of BestValLoss (from metrics.jsonl); Plot the loss plot written at
	// the end ("" if it could not be); DataCheck the check made before the first step.
	ElapsedSeconds float64    `json:"elapsed_seconds"`
	BestValStep    *int       `json:"best_val_step,omitempty"`
	Plot           string     `json:"plot,omitempty"`
	DataCheck      *DataCheck `json:"data_check,omitempty"`
}

// learner is what the steps change and a checkpoint holds besides the State: the
// trainable arrays, the optimizer (its moments and step count) and the batch iterator,
// whose position the State records.
type learner struct {
	params optim.Trainable
	opt    optim.Optimizer
	it     *data.Iterator
}

// run is one training run's moving parts, as prepare leaves them.
type run struct {
	learner
	s        *session.Session
	cfg      config.Config
	log      io.Writer // rank 0's progress; io.Discard on the other ranks
	c        *cluster  // the ranks: collectives, agreement, who asked to stop
	state    *runState // where the run is: resumed, recorded and saved
	sched    optim.Schedule
	compiled *DenseStep // the compiled dense step (compile: true); nil when not compiled
	// lookahead launches steps without waiting for them (inflight.go); inFlight is the
	// step launched and not yet settled.
	lookahead bool
	inFlight  *launched
	train     []data.Pair
	val       []data.Pair
	total     int // the last step
	reporter  Reporter
	check     *DataCheck
}

// Run trains as cfg says. It returns ErrInterrupted after saving when ctx is cancelled.
// With train: false it only scores the test split; with test: true it scores it after
// training too. Started as one rank of a distributed run (see cluster), it trains its share
// of every batch with the other ranks.
func Run(ctx context.Context, cfg config.Config, opt Options) (res *Result, err error) {
	if !cfg.Train {
		return evaluateOnly(cfg, opt)
	}
	start := time.Now()
	// The lock is released on every way out: returns, panics, and a distributed run's
	// exit from the goroutine that saw a rank die.
	var held atomic.Pointer[runlock.Lock]
	exit := opt.Exit
	opt.Exit = func(err error) {
		held.Load().Release()
		if exit != nil {
			exit(err)
			return
		}
		fmt.Fprintf(os.Stderr, "train: %v\n", err)
		os.Exit(1)
	}
	// Before joinCluster, which may open the engine to look for NCCL.
	session.PrepareEngine(cfg.Backend, cfg.ComputeDType)
	c, err := joinCluster(cfg, opt)
	if err != nil {
		return nil, err
	}
	defer func() {
		if p := recover(); p != nil {
			c.close(fmt.Errorf("internal error: %v", p))
			panic(p)
		}
		c.close(err)
	}()
	if c.rank == 0 {
		l, err := lockRun(cfg.AdapterPath, opt.Log)
		if err != nil {
			return nil, err
		}
		held.Store(l)
		defer l.Release()
	}
	r, err := prepare(cfg, opt, c)
	if err != nil {
		return nil, err
	}
	defer r.reporter.Close()
	if r.compiled != nil {
		defer r.compiled.Release()
	}
	res, err = r.loop(ctx)
	if err != nil {
		return res, err
	}
	res.DataCheck = r.check
	if cfg.Test {
		if res.Test, err = scoreTest(r.s, cfg, r.log); err != nil {
			return nil, err
		}
	}
	if c.rank == 0 {
		r.finish(res)
	}
	res.ElapsedSeconds = time.Since(start).Seconds()
	return res, nil
}

// loop trains from the state's step to the last: each step is followed by its report,
// evaluation and checkpoint when they are due. The initial adapter is evaluated first (a
// fresh run's step 0), as mlx-lm evaluates before its first step; step s's evaluation
// scores the weights after step s, so that the checkpoint saved at s records it (best val
// loss, evaluations since the best). The loop ends after the last step, when early stopping
// says so, or after the step in flight when ctx is cancelled (on every rank together).
func (r *run) loop(ctx context.Context) (*Result, error) {
	res := &Result{AdapterPath: r.cfg.AdapterPath, Rank: r.c.rank}
	if r.state.Step >= r.total {
		// A resumed run that had already finished (e.g. killed after its last save).
		fmt.Fprintf(r.log, "nothing to do: %s already holds %d trained steps of %d\n", r.cfg.AdapterPath, r.state.Step, r.total)
		res.Steps, res.TrainedTokens, res.BestValLoss, res.AlreadyDone = r.state.Step, r.state.TrainedTokens, r.state.BestValLoss, true
		return res, nil
	}
	var valLoss float64
	if r.state.Step == 0 {
		var err error
		if valLoss, _, err = r.evaluate(0); err != nil {
			return nil, err
		}
	}
	pace := meter{start: time.Now()}
	for step := r.state.Step + 1; step <= r.total; step++ {
		if err := r.step(ctx, step, &pace); err != nil {
			return nil, err
		}
		if !r.needsSettled(ctx, step) {
			continue // left running while the next step is built (inflight.go)
		}
		if err := r.settle(&pace); err != nil {
			return nil, err
		}
		if r.due(step, r.cfg.StepsPerReport) {
			res.FinalLoss = r.report(step, &pace)
		}
		stop := false
		if r.due(step, r.cfg.StepsPerEval) {
			var err error
			if valLoss, stop, err = r.evaluate(step); err != nil {
				return nil, err
			}
			res.StoppedEarly = stop
		}
		if r.due(step, r.cfg.SaveEvery) || stop {
			if err := r.save(step, r.cfg.SaveEvery > 0 && step%r.cfg.SaveEvery == 0); err != nil {
				return nil, err
			}
		}
		if stop {
			if len(r.state.Window) > 0 {
				// Close the window, so the final loss is the mean the last log line shows.
				res.FinalLoss = r.report(step, &pace)
			}
			fmt.Fprintf(r.log, "early stopping at step %d: no better val loss in %d evaluations\n", step, r.cfg.EarlyStoppingPatience)
			break
		}
		if r.c.interrupted(ctx) {
			return nil, r.interrupt(step)
		}
	}
	res.Steps = r.state.Step
	res.Distributed = r.c.stats(r.log)
	res.TrainedTokens = r.state.TrainedTokens
	res.BestValLoss = r.state.BestValLoss
	if len(r.val) > 0 {
		res.FinalValLoss = &valLoss
	}
	return res, nil
}

// due reports whether something done every `every` steps (0: never) is due after step;
// everything is due after the last step.
func (r *run) due(step, every int) bool {
	return (every > 0 && step%every == 0) || step == r.total
}

// interrupt saves the checkpoint of a run stopped by a signal after step and returns
// ErrInterrupted.
func (r *run) interrupt(step int) error {
	if err := r.save(step, false); err != nil {
		return err
	}
	fmt.Fprintf(r.log, "interrupted at step %d%s: checkpoint saved in %s (resume with --resume)\n", step, r.c.stoppedBy(), r.cfg.AdapterPath)
	if r.c.rank != 0 {
		fmt.Fprintf(r.c.log, "rank %d: interrupted at step %d with the other ranks%s; rank 0 saved the checkpoint\n", r.c.rank, step, r.c.stoppedBy())
	}
	return ErrInterrupted
}

// needsSettled reports whether step's results are needed before the next step is built:
// for its report, evaluation or checkpoint, as the last step, or after a signal.
func (r *run) needsSettled(ctx context.Context, step int) bool {
	return step == r.total || ctx.Err() != nil || r.due(step, r.cfg.StepsPerReport) ||
		r.due(step, r.cfg.StepsPerEval) || r.due(step, r.cfg.SaveEvery)
}

// lockRun takes the lock of adapter_path, so that no other run writes there while this
// one does (see package runlock), and checks that the loss plot can be written there.
func lockRun(dir string, log io.Writer) (*runlock.Lock, error) {
	if log == nil {
		log = io.Discard
	}
	l, stale, err := runlock.Acquire(dir)
	if err != nil {
		var held *runlock.HeldError
		if errors.As(err, &held) {
			return nil, fmt.Errorf("adapter_path %w", err)
		}
		return nil, fmt.Errorf("adapter_path: %w", err)
	}
	if stale != nil {
		who := "an unreadable lock file"
		if stale.PID != 0 {
			who = "the lock of " + stale.String()
		}
		fmt.Fprintf(log, "lock: replaced %s in %s: that run ended without releasing it (killed or crashed)\n", who, dir)
	}
	if err := atomicfile.CheckWritable(filepath.Join(dir, lossplot.File)); err != nil {
		l.Release()
		return nil, fmt.Errorf("loss plot: %w", err)
	}
	return l, nil
}

// finish draws the run's loss plot from metrics.jsonl and finds the best val loss's step
// there (the file spans the whole run, resumed parts too). A plot that cannot be drawn is
// a warning: the run's weights and state are saved by then.
func (r *run) finish(res *Result) {
	dir := r.cfg.AdapterPath
	series, err := lossplot.Read(filepath.Join(dir, MetricsFile))
	if err == nil {
		if best, ok := series.Best(); ok {
			res.BestValStep = &best.Step
		}
		path := filepath.Join(dir, lossplot.File)
		if err = lossplot.WriteFile(path, series, filepath.Base(filepath.Clean(dir))); err == nil {
			res.Plot = path
		}
	}
	if err != nil {
		fmt.Fprintf(r.log, "warning: loss plot: %v\n", err)
	}
}
