package train

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/dgtune/dgtune/config"
	"github.com/dgtune/dgtune/data"
	"github.com/dgtune/dgtune/internal/runlock"
	"github.com/dgtune/dgtune/lora"
	dg "github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/optim"
	"github.com/dgtune/dgtune/session"
)

// prepare readies a run in stages, each refusing what it can before the next loads more:
// the settings alone; the session with its checked data; what is trained and how; the
// batches; the ranks' agreement; where the run starts; and, on rank 0, its outputs.
func prepare(cfg config.Config, opt Options, c *cluster) (*run, error) {
	log := opt.Log
	if log == nil || c.rank != 0 {
		log = io.Discard // only rank 0 reports
	}
	if err := refuseEarly(cfg, c.size); err != nil {
		return nil, err
	}
	s, splits, check, err := openChecked(cfg, log)
	if err != nil {
		return nil, err
	}
	check.WriteSummary(log)
	r := &run{s: s, cfg: cfg, log: log, c: c, check: check, train: splits[0].pairs}
	// Alone on a lazy engine, each step is built while the device runs the one before
	// (inflight.go).
	_, async := s.Engine.(mx.AsyncEvaluator)
	r.lookahead = async && c.size == 1 && !opt.Synchronous
	if len(splits) > 1 && splits[1].name == "valid" {
		r.val = splits[1].pairs
	}
	if c.rank == 0 {
		if err := os.MkdirAll(cfg.AdapterPath, 0o755); err != nil {
			return nil, fmt.Errorf("adapter_path: %w", err)
		}
	}
	if err := r.setupTraining(); err != nil {
		return nil, err
	}
	if err := r.setupBatches(); err != nil {
		return nil, err
	}
	if err := c.agree(cfg, r.train, r.val, r.params.Params()); err != nil {
		return nil, err
	}
	r.state = newRunState(cfg, r.params.Params(), c.size)
	if err := r.state.start(cfg, c, s.Engine, r.learner, log); err != nil {
		return nil, err
	}
	if c.rank != 0 {
		r.reporter = multiReporter{}
		return r, nil
	}
	if err := r.openOutputs(opt.Terminal); err != nil {
		return nil, err
	}
	r.describe(opt.Verbose)
	return r, nil
}

// refuseEarly refuses, before anything is loaded, a batch the ranks cannot split and a
// fresh start over another run. overwrite only concerns a fresh start: with resume the
// run in adapter_path is continued (as HF Trainer's resume_from_checkpoint wins over
// overwrite_output_dir), so a config may set both.
func refuseEarly(cfg config.Config, ranks int) error {
	if cfg.BatchSize%ranks != 0 {
		return fmt.Errorf("batch_size %d does not divide by the %d ranks: it is the global batch, split evenly across ranks (as in mlx-lm); use a multiple of %d", cfg.BatchSize, ranks, ranks)
	}
	if !cfg.Resume && !cfg.Overwrite {
		return checkFreshStart(cfg.AdapterPath)
	}
	return nil
}

// setupTraining sets what is trained and how: the LoRA adapter attached to the model (or
// the model's own tensors with fine_tune_type full), the optimizer, the compiled step
// (compile: true) and the learning-rate schedule.
func (r *run) setupTraining() error {
	cfg, m := r.cfg, r.s.Model
	if cfg.FineTuneType == "full" {
		if cfg.GradCheckpoint {
			// A checkpointed layer passes gradients only to the LoRA arrays it is given.
			return fmt.Errorf("grad_checkpoint needs fine_tune_type lora, not full")
		}
		full, err := newFullParams(m)
		if err != nil {
			return err
		}
		r.params = full
	} else {
		a, err := lora.Attach(m, LoRAConfig(cfg), session.DeriveSeed(cfg.Seed, seedLoRAInit))
		if err != nil {
			return err
		}
		r.params = a
		m.GradCheckpoint = cfg.GradCheckpoint
	}
	var err error
	if r.opt, err = newOptimizer(cfg, r.params.Params()); err != nil {
		return err
	}
	if err := r.compileStep(); err != nil {
		return err
	}
	r.sched, err = optim.ParseSchedule(optim.ScheduleConfig{
		Name: cfg.LRSchedule.Name, Arguments: cfg.LRSchedule.Arguments,
		Warmup: cfg.LRSchedule.Warmup, WarmupInit: cfg.LRSchedule.WarmupInit,
	}, cfg.LearningRate)
	return err
}

// setupBatches sets the batch iterator over the train split and the number of steps:
// iters, or epochs over the batches in steps of grad_accumulation_steps batches.
func (r *run) setupBatches() error {
	cfg := r.cfg
	var err error
	if r.it, err = data.NewIterator(r.train, cfg.BatchSize, session.DeriveSeed(cfg.Seed, seedShuffle), cfg.Shuffle); err != nil {
		return err
	}
	r.total = cfg.Iters
	if cfg.Epochs > 0 {
		r.total = (cfg.Epochs*r.it.BatchesPerEpoch() + cfg.GradAccumulationSteps - 1) / cfg.GradAccumulationSteps
	}
	return nil
}

// openOutputs readies rank 0's files in adapter_path: the directory claimed for this run
// (see runState.claimDir), the reporters (console and metrics.jsonl) and
// adapter_config.json.
func (r *run) openOutputs(terminal bool) error {
	if err := r.state.claimDir(r.log); err != nil {
		return err
	}
	jr, err := newJSONLReporter(filepath.Join(r.cfg.AdapterPath, MetricsFile))
	if err != nil {
		return err
	}
	r.reporter = multiReporter{newConsoleReporter(r.log, terminal, r.state.Step, r.total), jr}
	return writeAdapterConfig(r.cfg)
}

// describe logs the resolved config (all of it when verbose, else what differs from the
// defaults), notes on settings that do not do what they may seem to, and the model, data
// and trainable parameters.
func (r *run) describe(verbose bool) {
	cfg, log := r.cfg, r.log
	if verbose {
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
	trainable, total := countParams(r.params.Params()), modelParams(r.s.Model)
	fmt.Fprintf(log, "model %s (engine %s); %d train / %d valid examples; trainable parameters: %d (%.3f%% of %d)\n",
		cfg.Model, mx.Describe(r.s.Engine), len(r.train), len(r.val), trainable, 100*float64(trainable)/float64(total), total)
}

// scheduleNote says which learning rate a run starts from when an lr_schedule gives its
// own initial value (mlx-lm's rule: the schedule's first argument, not learning_rate), so
// that a learning_rate which no longer applies is not silently ignored. "" when the
// schedule starts at learning_rate.
func scheduleNote(c config.Config) string {
	s := c.LRSchedule
	if len(s.Arguments) == 0 || s.Arguments[0] == c.LearningRate {
		return ""
	}
	return fmt.Sprintf("note: lr_schedule %s starts at %g (lr_schedule.arguments[0]); learning_rate %g is not used",
		s.Name, s.Arguments[0], c.LearningRate)
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
	mem := stepMemory(s)
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
