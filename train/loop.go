package train

import (
	"context"
	"errors"
	"fmt"
	"github.com/dgtune/dgtune/internal/atomicfile"
	"io"
	"math"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/dgtune/dgtune/config"
	"github.com/dgtune/dgtune/data"
	"github.com/dgtune/dgtune/internal/runlock"
	"github.com/dgtune/dgtune/internal/sysmem"
	"github.com/dgtune/dgtune/lora"
	"github.com/dgtune/dgtune/lossplot"
	dg "github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/objective"
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

// run is one training run's moving parts.
type run struct {
	s        *session.Session
	cfg      config.Config
	log      io.Writer
	params   optim.Trainable
	opt      optim.Optimizer
	sched    optim.Schedule
	it       *data.Iterator
	train    []data.Pair
	val      []data.Pair
	state    State
	reporter Reporter
	total    int
	lastVal  float64
	resumed  bool // the training state of adapter_path was loaded
	c        *cluster
	stopBy   []int // ranks that asked to stop (a signal), agreed in the last step's all_sum
	timing   stepTiming
	check    *DataCheck
	// compiled is the compiled dense step (compile: true); nil when the step is not compiled.
	compiled *DenseStep
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

func prepare(cfg config.Config, opt Options, c *cluster) (*run, error) {
	log := opt.Log
	if log == nil || c.rank != 0 {
		log = io.Discard // only rank 0 reports
	}
	if cfg.BatchSize%c.size != 0 {
		return nil, fmt.Errorf("batch_size %d does not divide by the %d ranks: it is the global batch, split evenly across ranks (as in mlx-lm); use a multiple of %d", cfg.BatchSize, c.size, c.size)
	}
	// Refuse before anything is loaded. overwrite only concerns a fresh start: with
	// resume the run in adapter_path is continued (as HF Trainer's resume_from_checkpoint
	// wins over overwrite_output_dir), so a config may set both.
	if !cfg.Resume && !cfg.Overwrite {
		if err := checkFreshStart(cfg.AdapterPath); err != nil {
			return nil, err
		}
	}
	s, splits, check, err := openChecked(cfg, log)
	if err != nil {
		return nil, err
	}
	check.WriteSummary(log)
	r := &run{s: s, cfg: cfg, log: log, c: c, check: check, train: splits[0].pairs}
	if len(splits) > 1 && splits[1].name == "valid" {
		r.val = splits[1].pairs
	}
	if c.rank == 0 {
		if err := os.MkdirAll(cfg.AdapterPath, 0o755); err != nil {
			return nil, fmt.Errorf("adapter_path: %w", err)
		}
	}
	if cfg.FineTuneType == "full" {
		if cfg.GradCheckpoint {
			// A checkpointed layer passes gradients only to the LoRA arrays it is given.
			return nil, fmt.Errorf("grad_checkpoint needs fine_tune_type lora, not full")
		}
		if r.params, err = newFullParams(s.Model); err != nil {
			return nil, err
		}
	} else {
		a, err := lora.Attach(s.Model, LoRAConfig(cfg), session.DeriveSeed(cfg.Seed, seedLoRAInit))
		if err != nil {
			return nil, err
		}
		r.params = a
		s.Model.GradCheckpoint = cfg.GradCheckpoint
	}
	if r.opt, err = newOptimizer(cfg, r.params.Params()); err != nil {
		return nil, err
	}
	if err := r.compileStep(); err != nil {
		return nil, err
	}
	if r.sched, err = optim.ParseSchedule(optim.ScheduleConfig{
		Name: cfg.LRSchedule.Name, Arguments: cfg.LRSchedule.Arguments,
		Warmup: cfg.LRSchedule.Warmup, WarmupInit: cfg.LRSchedule.WarmupInit,
	}, cfg.LearningRate); err != nil {
		return nil, err
	}
	if r.it, err = data.NewIterator(r.train, cfg.BatchSize, session.DeriveSeed(cfg.Seed, seedShuffle), cfg.Shuffle); err != nil {
		return nil, err
	}
	r.total = cfg.Iters
	if cfg.Epochs > 0 {
		r.total = (cfg.Epochs*r.it.BatchesPerEpoch() + cfg.GradAccumulationSteps - 1) / cfg.GradAccumulationSteps
	}
	if err := c.agree(cfg, r.train, r.val, r.params.Params()); err != nil {
		return nil, err
	}
	r.state = State{Seed: cfg.Seed, FineTuneType: cfg.FineTuneType, ParamFingerprints: fingerprints(r.params.Params()), WorldSize: c.size}
	metrics := filepath.Join(cfg.AdapterPath, MetricsFile)
	resumed := false
	if cfg.Resume || c.size > 1 {
		// A distributed run resumes when rank 0 does, from rank 0's files.
		if resumed, err = r.resume(); err != nil {
			return nil, err
		}
	}
	if cfg.ResumeAdapterFile != "" {
		// Every rank reads the file (it must be there on every machine); agree has
		// checked that the ranks train the same tensors.
		if resumed {
			fmt.Fprintf(log, "resume_adapter_file: not used: continuing from the training state in %s\n", cfg.AdapterPath)
		} else if err := r.startFromFile(); err != nil {
			return nil, err
		}
	}
	if c.rank != 0 {
		r.reporter = multiReporter{}
		return r, nil
	}
	if !resumed {
		// A fresh run must not leave an older run's files behind: its numbered
		// checkpoints would mix with this run's, and a later --resume would pick up its
		// state if this run died before its first checkpoint.
		n, err := clearRun(cfg.AdapterPath)
		if err != nil {
			return nil, err
		}
		if n > 0 {
			fmt.Fprintf(log, "deleted %d file(s) of an earlier run in %s\n", n, cfg.AdapterPath)
		}
	}
	if err := truncateMetrics(metrics, r.state.Step); err != nil {
		return nil, err
	}
	jr, err := newJSONLReporter(metrics)
	if err != nil {
		return nil, err
	}
	r.reporter = multiReporter{newConsoleReporter(log, opt.Terminal, r.state.Step, r.total), jr}
	if err := r.writeAdapterConfig(); err != nil {
		return nil, err
	}
	if opt.Verbose {
		fmt.Fprintf(log, "resolved config:\n%s", config.Format(cfg))
	} else if changed := config.FormatChanged(cfg); changed != "" {
		fmt.Fprintf(log, "resolved config (settings that differ from the defaults; --verbose for all, %s has every one):\n%s", AdapterConfig, changed)
	} else {
		fmt.Fprintf(log, "resolved config: all defaults\n")
	}
	if note := scheduleNote(cfg); note != "" {
		fmt.Fprintln(log, note)
	}
	if cfg.EarlyStoppingPatience > 0 && cfg.StepsPerEval == 0 {
		fmt.Fprintf(log, "note: early_stopping_patience %d with steps_per_eval 0 validates only at the start and the end, so it cannot stop a run early\n", cfg.EarlyStoppingPatience)
	}
	fmt.Fprintf(log, "model %s (engine %s); %d train / %d valid examples; trainable parameters: %d (%.3f%% of %d)\n",
		cfg.Model, mx.Describe(s.Engine), len(r.train), len(r.val), countParams(r.params.Params()),
		100*float64(countParams(r.params.Params()))/float64(modelParams(s.Model)), modelParams(s.Model))
	return r, nil
}

// openChecked opens the session, reads the splits the run needs, tokenizes them and checks
// them (see buildCheck). The splits come in the order train, valid (when it has examples),
// test (with test: true). A refusal comes with the check that led to it.
func openChecked(cfg config.Config, log io.Writer) (*session.Session, []checkedSplit, *DataCheck, error) {
	s, err := session.Open(cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	s.Log = log
	mem := sysmem.Detect()
	if err := checkCapacity(s, mem); err != nil {
		return nil, nil, nil, err
	}
	if err := s.LoadSplits(dataNeed(cfg)); err != nil {
		return nil, nil, nil, err
	}
	if cfg.EarlyStoppingPatience > 0 && (s.Dataset.Valid == nil || len(s.Dataset.Valid.Examples) == 0) {
		return nil, nil, nil, fmt.Errorf("early_stopping_patience %d needs validation losses, but %s has no valid split (valid.jsonl or valid.parquet with examples); add one or set early_stopping_patience 0",
			cfg.EarlyStoppingPatience, cfg.Data)
	}
	var splits []checkedSplit
	for _, sp := range []struct {
		name  string
		split *data.Split
	}{{"train", s.Dataset.Train}, {"valid", s.Dataset.Valid}, {"test", s.Dataset.Test}} {
		if sp.split == nil || len(sp.split.Examples) == 0 || (sp.name == "test" && !cfg.Test) {
			continue
		}
		cs, err := checkedPairs(s, sp.name, sp.split)
		if err != nil {
			return nil, nil, nil, err
		}
		splits = append(splits, cs)
	}
	check, err := buildCheck(s, splits, mem)
	if err != nil {
		return nil, nil, check, err
	}
	return s, splits, check, nil
}

// Check is train --dry-run: everything a run checks before its first step — settings,
// model, data, token lengths against max_prompt, max_canvas and the model's positions,
// and the largest step's memory — and nothing written. The check comes back with the
// refusal when train would refuse to start (nil when it failed before measuring). Notes
// go to opt.Log, among them what train would say about adapter_path now (a run in it, or
// its lock held).
func Check(cfg config.Config, opt Options) (*DataCheck, error) {
	log := opt.Log
	if log == nil {
		log = io.Discard
	}
	if !cfg.Train {
		return nil, fmt.Errorf("--dry-run checks a training run's data; train: false only evaluates (nothing to check)")
	}
	if owner, err := runlock.Probe(cfg.AdapterPath); err == nil && owner != nil {
		fmt.Fprintf(log, "note: adapter_path %s is in use by another training run (%s): train would refuse it now\n", cfg.AdapterPath, owner)
	}
	if !cfg.Resume && !cfg.Overwrite {
		if err := checkFreshStart(cfg.AdapterPath); err != nil {
			fmt.Fprintf(log, "note: %v (train would refuse)\n", err)
		}
	}
	_, _, check, err := openChecked(cfg, log)
	return check, err
}

func modelParams(m *dg.Model) int64 {
	total, _ := dg.CountParams(m.Config)
	return total
}

// LoRAConfig maps the config onto the adapter's shape.
func LoRAConfig(cfg config.Config) lora.Config {
	p := cfg.LoRAParameters
	return lora.Config{Rank: p.Rank, Scale: p.Scale, Dropout: p.Dropout, Keys: p.Keys, NumLayers: cfg.NumLayers, Encoder: p.Encoder, Init: p.Init}
}

func newOptimizer(cfg config.Config, params map[string]*mx.Array) (optim.Optimizer, error) {
	oc := cfg.OptimizerConfig
	switch cfg.Optimizer {
	case "adamw", "adam":
		// mlx's Adam defaults; AdamW adds the configured weight decay.
		c := optim.AdamDefaults(cfg.LearningRate)
		c.Betas = [2]float64{oc.Betas[0], oc.Betas[1]}
		c.Eps, c.BiasCorrection = oc.Eps, oc.BiasCorrection
		if cfg.Optimizer == "adam" {
			return optim.NewAdam(optim.Params(params), c)
		}
		c.WeightDecay = oc.WeightDecay
		return optim.NewAdamW(optim.Params(params), c)
	case "sgd":
		return optim.NewSGD(optim.Params(params), optim.SGDConfig{
			LearningRate: cfg.LearningRate, Momentum: oc.Momentum, WeightDecay: oc.WeightDecay, Nesterov: oc.Nesterov,
		})
	}
	return nil, fmt.Errorf("optimizer %q: want adamw, adam or sgd", cfg.Optimizer)
}

func fingerprints(p map[string]*mx.Array) []string {
	var out []string
	for _, n := range sortedNames(p) {
		out = append(out, fmt.Sprintf("%s%v", n, p[n].Shape()))
	}
	return out
}

// resume loads the training state in adapter_path (rank 0's, handed to every rank) and
// reports whether there was one.
func (r *run) resume() (bool, error) {
	st, params, opt, err := r.c.loadState(r.s.Engine, r.cfg.AdapterPath, r.cfg.Resume)
	if errors.Is(err, errNoState) {
		if r.cfg.Resume {
			fmt.Fprintf(r.log, "resume: nothing to resume in %s; starting from scratch\n", r.cfg.AdapterPath)
		}
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if st.FineTuneType != r.state.FineTuneType || fmt.Sprint(st.ParamFingerprints) != fmt.Sprint(r.state.ParamFingerprints) {
		return false, fmt.Errorf("resume: the training state in %s is for different parameters (fine_tune_type %s, %d tensors); change adapter_path or match the config", r.cfg.AdapterPath, st.FineTuneType, len(st.ParamFingerprints))
	}
	if st.Seed != r.cfg.Seed {
		return false, fmt.Errorf("resume: the training state in %s used seed %d, the config says %d", r.cfg.AdapterPath, st.Seed, r.cfg.Seed)
	}
	if err := r.params.SetParams(params); err != nil {
		return false, fmt.Errorf("resume: %w", err)
	}
	if err := r.opt.LoadState(opt, st.OptimizerStep); err != nil {
		return false, fmt.Errorf("resume: %w", err)
	}
	if err := r.it.Seek(st.Position); err != nil {
		return false, fmt.Errorf("resume: %w", err)
	}
	if st.WorldSize == 0 {
		st.WorldSize = 1 // written before world_size existed
	}
	if st.WorldSize != r.c.size {
		// Nothing in the state belongs to one rank: the position, noise keys and losses are
		// the global batch's, so another split of it continues the same run.
		fmt.Fprintf(r.log, "resume: the checkpoint was written by %d rank(s), this run has %d: the same steps and examples follow, equal up to float summation order\n", st.WorldSize, r.c.size)
	}
	st.WorldSize = r.c.size
	r.state = st
	note, err := checkStateCopy(r.cfg.AdapterPath, st)
	if err != nil {
		return false, fmt.Errorf("resume: %w", err)
	}
	if note != "" {
		fmt.Fprintf(r.log, "resume: %s\n", note)
	}
	r.resumed = true
	fmt.Fprintf(r.log, "resume: continuing from step %d in %s\n", st.Step, r.cfg.AdapterPath)
	return true, nil
}

// loop is evaluate → step → report → save, until the last step or a signal.
func (r *run) loop(ctx context.Context) (*Result, error) {
	res := &Result{AdapterPath: r.cfg.AdapterPath, Rank: r.c.rank}
	if r.state.Step >= r.total {
		// A resumed run that had already finished (e.g. killed after its last save).
		fmt.Fprintf(r.log, "nothing to do: %s already holds %d trained steps of %d\n", r.cfg.AdapterPath, r.state.Step, r.total)
		res.Steps, res.TrainedTokens, res.BestValLoss, res.AlreadyDone = r.state.Step, r.state.TrainedTokens, r.state.BestValLoss, true
		return res, nil
	}
	if r.state.Step == 0 {
		if _, err := r.validate(0); err != nil {
			return nil, err
		}
	}
	pace := meter{start: time.Now()}
	for r.state.Step < r.total {
		step := r.state.Step + 1
		lr := r.sched(step - 1)
		r.opt.SetLearningRate(lr)
		began, reduced := time.Now(), r.c.reduce
		loss, tokens, err := r.step(ctx, step)
		if err != nil {
			return nil, err
		}
		r.timing.add(time.Since(began), r.c.reduce-reduced)
		if math.IsNaN(loss) || math.IsInf(loss, 0) {
			return nil, fmt.Errorf("%w at step %d (loss %v); %s", ErrNonFinite, step, loss, r.keptCheckpoints())
		}
		r.state.Step = step
		r.state.LearningRate = lr
		r.state.TrainedTokens += tokens
		r.state.Window = append(r.state.Window, loss)
		pace.add(tokens)
		if step%r.cfg.StepsPerReport == 0 || step == r.total {
			res.FinalLoss = r.report(step, lr, &pace)
		}
		stop := false
		if (r.cfg.StepsPerEval > 0 && step%r.cfg.StepsPerEval == 0) || step == r.total {
			if stop, err = r.validate(step); err != nil {
				return nil, err
			}
			res.StoppedEarly = stop
		}
		if (r.cfg.SaveEvery > 0 && step%r.cfg.SaveEvery == 0) || step == r.total || stop {
			if err := r.save(step, r.cfg.SaveEvery > 0 && step%r.cfg.SaveEvery == 0); err != nil {
				return nil, err
			}
		}
		if stop {
			if len(r.state.Window) > 0 {
				// Close the window, so the final loss is the mean the last log line shows.
				res.FinalLoss = r.report(step, lr, &pace)
			}
			fmt.Fprintf(r.log, "early stopping at step %d: no better val loss in %d evaluations\n", step, r.cfg.EarlyStoppingPatience)
			break
		}
		if r.interrupted(ctx) {
			if err := r.save(step, false); err != nil {
				return nil, err
			}
			fmt.Fprintf(r.log, "interrupted at step %d%s: checkpoint saved in %s (resume with --resume)\n", step, r.stoppedBy(), r.cfg.AdapterPath)
			if r.c.rank != 0 {
				fmt.Fprintf(r.c.log, "rank %d: interrupted at step %d with the other ranks%s; rank 0 saved the checkpoint\n", r.c.rank, step, r.stoppedBy())
			}
			return nil, ErrInterrupted
		}
	}
	res.Steps = r.state.Step
	res.Distributed = r.distributedStats()
	res.TrainedTokens = r.state.TrainedTokens
	res.BestValLoss = r.state.BestValLoss
	if len(r.val) > 0 {
		v := r.lastVal
		res.FinalValLoss = &v
	}
	return res, nil
}

// meter times the steps of this process since the last report. The losses since the
// last report live in the state instead, so that a report after a resume averages the
// same steps as an uninterrupted run.
type meter struct {
	steps  int
	tokens int64
	start  time.Time
}

func (m *meter) add(tokens int64) {
	m.steps++
	m.tokens += tokens
}

// report sends the mean loss of the window and this process's rates, opens a new window
// and returns the mean.
func (r *run) report(step int, lr float64, pace *meter) float64 {
	el := time.Since(pace.start).Seconds()
	mean := 0.0
	for _, l := range r.state.Window {
		mean += l
	}
	mean /= float64(len(r.state.Window))
	ips := float64(pace.steps) / el
	rep := TrainReport{
		Iteration: step, TrainLoss: mean, LearningRate: lr, ItersPerSecond: ips,
		TokensPerSecond: float64(pace.tokens) / el, TrainedTokens: r.state.TrainedTokens,
		PeakMemory: sysmem.PeakRSS(), ETASeconds: float64(r.total-step) / ips,
	}
	if m, ok := mx.Memory(r.s.Engine); ok {
		rep.Engine = &EngineMemory{Active: m.Active, Peak: m.Peak, Cache: m.Cache}
	}
	r.reporter.Train(rep)
	r.state.Window = nil
	*pace = meter{start: time.Now()}
	return mean
}

// step runs grad_accumulation_steps micro-batches and one optimizer update, returning
// the mean loss and the number of tokens (prompt + canvas) processed, over every rank.
// Whether this rank was asked to stop (ctx, a signal) travels in the step's all_sum, so
// that all ranks stop after the same step.
func (r *run) step(ctx context.Context, step int) (loss float64, tokens int64, err error) {
	// Everything a step creates is released when it ends except the new parameters and
	// the optimizer state (deterministic memory on engines Go's GC cannot see).
	mx.Tidy(r.s.Engine, func() []*mx.Array {
		if loss, tokens, err = r.stepArrays(ctx, step); err != nil {
			return nil
		}
		keep := mapValues(r.params.Params())
		for _, a := range r.opt.State() {
			keep = append(keep, a)
		}
		return keep
	})
	return loss, tokens, err
}

// microBatch is this rank's share of one micro-batch: the examples, their noise and
// their index in the global micro-batch.
// exampleGrad is the loss share of example i of micro-batch m (its terms over the global
// counts) and its gradient with respect to every trainable array. LoRA dropout is on only
// inside the gradient pass (validation runs without it), with masks keyed by (seed, step,
// micro-batch, example) so a resumed run, and a run split over any number of ranks,
// replays them.
func (r *run) exampleGrad(params map[string]*mx.Array, step, m int, mb microBatch, i int, count, encCount float64) (float64, optim.Params, error) {
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
		return 0, nil, err
	}
	return loss.Item(), g, nil
}

// drawMicroBatch draws the noise and the objective's choices of this rank's examples of
// micro-batch m of a step (example b of the global micro-batch is this rank's when mine(b)),
// keyed by (seed, step, m, b), and counts the micro-batch's scored canvas positions and
// encoder pairs (of this rank's examples) and its prompt + canvas tokens. With
// self_conditioning_draw step one coin, keyed by (seed, step, m), decides for every example
// of the micro-batch on every rank (NeMo AutoModel's per-(step, micro-batch) coin).
func drawMicroBatch(s *session.Session, seed uint64, draw string, step, m int, batch []data.Pair, mine func(int) bool) (mb microBatch, canvas, pairs float64, tokens int64) {
	e := s.Engine
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

type microBatch struct {
	index    []int
	examples []objective.Example
	corr     []objective.Corruption
}

func (r *run) stepArrays(ctx context.Context, step int) (float64, int64, error) {
	e := r.s.Engine
	params := r.params.Params()
	names := sortedNames(params)
	var acc optim.Accumulator
	defer acc.Reset()
	accum := r.cfg.GradAccumulationSteps
	// Every micro-batch's noise is drawn first, keyed by the example's index in the
	// global micro-batch: the loss of a micro-batch is Σ terms / Σ scored positions over
	// all of its examples, so each rank needs the global counts (canvas positions, and
	// the encoder's next-token pairs) to weight its share.
	micros := make([]microBatch, accum)
	counts := make([]float64, 2*accum)
	var tokens int64
	for m := range micros {
		batch, pos := r.it.Next()
		r.state.Position = pos
		var n int64
		micros[m], counts[2*m], counts[2*m+1], n = drawMicroBatch(r.s, r.cfg.Seed, r.cfg.SelfConditioningDraw, step, m, batch, r.c.mine)
		tokens += n
	}
	counts, err := r.c.sumHost(e, counts)
	if err != nil {
		return 0, 0, err
	}
	counts = shareDenominators(counts, r.cfg.LossNormalization)
	var lossSum float64
	for m, mb := range micros {
		if len(mb.examples) == 0 {
			// A short last batch of an epoch can leave a rank without examples: it adds
			// nothing, and the micro-batch still counts once in the average.
			zeros := optim.Params{}
			for _, n := range names {
				zeros[n] = mx.ZerosLike(params[n])
			}
			if err := acc.Add(zeros); err != nil {
				return 0, 0, err
			}
			continue
		}
		// One gradient pass per example, summed in example order: a micro-batch split over
		// ranks then sums the same per-example gradients (all_sum of two ranks' is the same
		// float32 addition), so two ranks reproduce one process to the bit.
		var sum optim.Params
		for i := range mb.examples {
			loss, g, err := r.exampleGrad(params, step, m, mb, i, counts[2*m], counts[2*m+1])
			if err != nil {
				return 0, 0, err
			}
			if sum == nil {
				sum = g
			} else {
				for n, a := range g {
					sum[n] = mx.Add(sum[n], a)
				}
			}
			lossSum += loss
		}
		if err := acc.Add(sum); err != nil {
			return 0, 0, err
		}
	}
	grads, err := acc.Average()
	if err != nil {
		return 0, 0, err
	}
	// One all_sum per step: the gradients, this rank's losses and tokens, and whether it
	// was asked to stop.
	host := make([]float64, 2+r.c.size)
	host[0], host[1] = lossSum, float64(tokens)
	if ctx.Err() != nil {
		host[2+r.c.rank] = 1
	}
	summed, host, err := r.c.sumArrays(e, paramValues(grads, names), host)
	if err != nil {
		return 0, 0, err
	}
	for i, n := range names {
		grads[n] = summed[i]
	}
	lossSum, tokens = host[0], int64(host[1])
	r.stopBy = r.stopBy[:0]
	for rank, f := range host[2:] {
		if f > 0 {
			r.stopBy = append(r.stopBy, rank)
		}
	}
	loss := lossSum / float64(accum)
	if math.IsNaN(loss) || math.IsInf(loss, 0) {
		return loss, tokens, nil
	}
	if r.cfg.GradClip > 0 {
		grads, _ = optim.ClipGradNorm(grads, r.cfg.GradClip)
	}
	updated := r.opt.Update(optim.Params(params), grads)
	mx.Eval(mapValues(updated)...)
	if err := r.params.SetParams(updated); err != nil {
		return 0, 0, err
	}
	return loss, tokens, nil
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

func mapValues(p optim.Params) []*mx.Array {
	out := make([]*mx.Array, 0, len(p))
	for _, a := range p {
		out = append(out, a)
	}
	return out
}

// validate computes the val loss over the whole valid split (or val_batches batches)
// with a fixed corruption per example, tracks the best and reports whether early
// stopping should happen.
func (r *run) validate(step int) (bool, error) {
	if len(r.val) == 0 {
		return false, nil
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
		return false, err
	}
	loss := sums[0] / max(sums[1], 1)
	r.lastVal = loss
	r.reporter.Val(ValReport{Iteration: step, ValLoss: loss, Examples: n, Seconds: time.Since(start).Seconds()})
	if math.IsNaN(loss) || math.IsInf(loss, 0) {
		return false, fmt.Errorf("%w: validation loss %v at step %d; %s", ErrNonFinite, loss, step, r.keptCheckpoints())
	}
	if r.state.BestValLoss == nil || loss < *r.state.BestValLoss {
		best := loss
		r.state.BestValLoss = &best
		r.state.EvalsSinceBest = 0
		// Step 0 counts too: if training never beats the initial adapter, that is the best.
		if r.c.rank == 0 {
			if err := r.c.saving(-1, func() error { return r.saveWeights(BestAdapterFile) }); err != nil {
				return false, err
			}
		}
		return false, nil
	}
	r.state.EvalsSinceBest++
	return r.cfg.EarlyStoppingPatience > 0 && r.state.EvalsSinceBest >= r.cfg.EarlyStoppingPatience, nil
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
		key := mx.Key(s.Engine, session.DeriveSeed(seed, seedValNoise, uint64(p.Index), uint64(i)))
		choice := mx.Key(s.Engine, session.DeriveSeed(seed, seedValChoice, uint64(p.Index), uint64(i)))
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

// save writes the latest weights, a numbered copy when asked, and the training state
// (on rank 0; the other ranks hold the same values and write nothing).
func (r *run) save(step int, numbered bool) error {
	if r.c.rank != 0 {
		return nil
	}
	return r.c.saving(step, func() error { return r.write(step, numbered) })
}

func (r *run) write(step int, numbered bool) error {
	if err := r.saveWeights(r.weightsFile()); err != nil {
		return err
	}
	if numbered {
		if err := r.saveWeights(fmt.Sprintf("%07d_%s", step, r.weightsFile())); err != nil {
			return err
		}
	}
	r.state.OptimizerStep = r.opt.Step()
	return saveState(r.cfg.AdapterPath, r.state, r.params.Params(), r.opt.State())
}

func (r *run) weightsFile() string {
	if r.cfg.FineTuneType == "full" {
		return FullWeightsFile
	}
	return AdapterFile
}

// saveWeights writes the trained arrays to name under adapter_path. An adapter goes
// through package lora's writer (the file every loader reads); a full fine-tune writes a
// complete checkpoint (config, generation config and tokenizer copied), loadable as a
// base model.
func (r *run) saveWeights(name string) error {
	dir := r.cfg.AdapterPath
	if a, ok := r.params.(*lora.Adapter); ok {
		if name == lora.AdaptersFile {
			return lora.Save(dir, a, nil)
		}
		return lora.SaveTensors(filepath.Join(dir, name), a, nil)
	}
	if err := copyCheckpointFiles(r.cfg.Model, dir); err != nil {
		return err
	}
	path := filepath.Join(dir, name)
	if err := mx.SaveSafetensors(path, r.params.Params(), map[string]string{"format": "mlx"}); err != nil {
		return fmt.Errorf("save %s: %w", path, err)
	}
	return nil
}

// copyCheckpointFiles copies the base checkpoint's non-weight files next to full
// fine-tuned weights.
func copyCheckpointFiles(from, to string) error {
	for _, name := range []string{"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"} {
		b, err := os.ReadFile(filepath.Join(from, name))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return err
		}
		if err := atomicfile.WriteFile(filepath.Join(to, name), b); err != nil {
			return err
		}
	}
	return nil
}

func (r *run) writeAdapterConfig() error {
	return writeAdapterConfig(r.cfg)
}
