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
	"time"

	"github.com/dgtune/dgtune/config"
	"github.com/dgtune/dgtune/data"
	"github.com/dgtune/dgtune/lora"
	dg "github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/objective"
	"github.com/dgtune/dgtune/optim"
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
}

// run is one training run's moving parts.
type run struct {
	s        *Session
	cfg      config.Config
	log      io.Writer
	params   trainable
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
}

// Run trains as cfg says. It returns ErrInterrupted after saving when ctx is cancelled.
// With train: false it only scores the test split; with test: true it scores it after
// training too.
func Run(ctx context.Context, cfg config.Config, opt Options) (*Result, error) {
	if !cfg.Train {
		return evaluateOnly(cfg, opt)
	}
	r, err := prepare(cfg, opt)
	if err != nil {
		return nil, err
	}
	defer r.reporter.Close()
	res, err := r.loop(ctx)
	if err != nil || !cfg.Test {
		return res, err
	}
	if res.Test, err = scoreTest(r.s, cfg, r.log); err != nil {
		return nil, err
	}
	return res, nil
}

func prepare(cfg config.Config, opt Options) (*run, error) {
	log := opt.Log
	if log == nil {
		log = io.Discard
	}
	// Refuse before anything is loaded. overwrite only concerns a fresh start: with
	// resume the run in adapter_path is continued (as HF Trainer's resume_from_checkpoint
	// wins over overwrite_output_dir), so a config may set both.
	if !cfg.Resume && !cfg.Overwrite {
		if err := checkFreshStart(cfg.AdapterPath); err != nil {
			return nil, err
		}
	}
	s, err := Open(cfg)
	if err != nil {
		return nil, err
	}
	s.Log = log
	if err := s.LoadSplits(dataNeed(cfg)); err != nil {
		return nil, err
	}
	if cfg.EarlyStoppingPatience > 0 && (s.Dataset.Valid == nil || len(s.Dataset.Valid.Examples) == 0) {
		return nil, fmt.Errorf("early_stopping_patience %d needs validation losses, but %s has no valid split (valid.jsonl or valid.parquet with examples); add one or set early_stopping_patience 0",
			cfg.EarlyStoppingPatience, cfg.Data)
	}
	r := &run{s: s, cfg: cfg, log: log}
	if r.train, err = s.Pairs(s.Dataset.Train); err != nil {
		return nil, err
	}
	if s.Dataset.Valid != nil && len(s.Dataset.Valid.Examples) > 0 {
		if r.val, err = s.Pairs(s.Dataset.Valid); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(cfg.AdapterPath, 0o755); err != nil {
		return nil, fmt.Errorf("adapter_path: %w", err)
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
		a, err := lora.Attach(s.Model, LoRAConfig(cfg), DeriveSeed(cfg.Seed, seedLoRAInit))
		if err != nil {
			return nil, err
		}
		r.params = a
		s.Model.GradCheckpoint = cfg.GradCheckpoint
	}
	if r.opt, err = newOptimizer(cfg, r.params.Params()); err != nil {
		return nil, err
	}
	if r.sched, err = optim.ParseSchedule(optim.ScheduleConfig{
		Name: cfg.LRSchedule.Name, Arguments: cfg.LRSchedule.Arguments,
		Warmup: cfg.LRSchedule.Warmup, WarmupInit: cfg.LRSchedule.WarmupInit,
	}, cfg.LearningRate); err != nil {
		return nil, err
	}
	if r.it, err = data.NewIterator(r.train, cfg.BatchSize, DeriveSeed(cfg.Seed, seedShuffle), cfg.Shuffle); err != nil {
		return nil, err
	}
	r.total = cfg.Iters
	if cfg.Epochs > 0 {
		r.total = (cfg.Epochs*r.it.BatchesPerEpoch() + cfg.GradAccumulationSteps - 1) / cfg.GradAccumulationSteps
	}
	r.state = State{Seed: cfg.Seed, FineTuneType: cfg.FineTuneType, ParamFingerprints: fingerprints(r.params.Params())}
	metrics := filepath.Join(cfg.AdapterPath, MetricsFile)
	resumed := false
	if cfg.Resume {
		if resumed, err = r.resume(); err != nil {
			return nil, err
		}
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
	if cfg.ResumeAdapterFile != "" {
		if r.resumed {
			fmt.Fprintf(log, "resume_adapter_file: not used: continuing from the training state in %s\n", cfg.AdapterPath)
		} else if err := r.startFromFile(); err != nil {
			return nil, err
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
		fmt.Fprintf(log, "resolved config:\n%s", FormatConfig(cfg))
	} else if changed := FormatChanged(cfg); changed != "" {
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

func modelParams(m *dg.Model) int64 {
	total, _ := dg.CountParams(m.Config)
	return total
}

// LoRAConfig maps the config onto the adapter's shape.
func LoRAConfig(cfg config.Config) lora.Config {
	p := cfg.LoRAParameters
	return lora.Config{Rank: p.Rank, Scale: p.Scale, Dropout: p.Dropout, Keys: p.Keys, NumLayers: cfg.NumLayers, Encoder: p.Encoder}
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

// resume loads the training state in adapter_path and reports whether there was one.
func (r *run) resume() (bool, error) {
	st, params, opt, err := loadState(r.s.Engine, r.cfg.AdapterPath)
	if errors.Is(err, errNoState) {
		fmt.Fprintf(r.log, "resume: nothing to resume in %s; starting from scratch\n", r.cfg.AdapterPath)
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
	res := &Result{AdapterPath: r.cfg.AdapterPath}
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
		loss, tokens, err := r.step(step)
		if err != nil {
			return nil, err
		}
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
		if ctx.Err() != nil {
			if err := r.save(step, false); err != nil {
				return nil, err
			}
			fmt.Fprintf(r.log, "interrupted at step %d: checkpoint saved in %s (resume with --resume)\n", step, r.cfg.AdapterPath)
			return nil, ErrInterrupted
		}
	}
	res.Steps = r.state.Step
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
		PeakMemory: PeakRSS(), ETASeconds: float64(r.total-step) / ips,
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
// the mean loss and the number of tokens (prompt + canvas) processed.
func (r *run) step(step int) (loss float64, tokens int64, err error) {
	// Everything a step creates is released when it ends except the new parameters and
	// the optimizer state (deterministic memory on engines Go's GC cannot see).
	mx.Tidy(r.s.Engine, func() []*mx.Array {
		if loss, tokens, err = r.stepArrays(step); err != nil {
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

func (r *run) stepArrays(step int) (float64, int64, error) {
	params := r.params.Params()
	names := sortedNames(params)
	var acc optim.Accumulator
	defer acc.Reset()
	var lossSum float64
	var tokens int64
	accum := r.cfg.GradAccumulationSteps
	for micro := range accum {
		batch, pos := r.it.Next()
		r.state.Position = pos
		examples := make([]objective.Example, len(batch))
		corr := make([]objective.Corruption, len(batch))
		for b, p := range batch {
			examples[b] = objective.Example{Prompt: p.Prompt, Target: p.Target, Images: p.Images}
			key := mx.Key(r.s.Engine, DeriveSeed(r.cfg.Seed, seedTrainNoise, uint64(step), uint64(micro), uint64(b)))
			choice := mx.Key(r.s.Engine, DeriveSeed(r.cfg.Seed, seedTrainChoice, uint64(step), uint64(micro), uint64(b)))
			corr[b] = r.s.Objective.DrawExample(key, choice, p.Target, r.s.Model.Config.TextConfig.VocabSize)
			tokens += int64(len(p.Prompt) + len(p.Target))
		}
		args := make([]*mx.Array, len(names))
		for i, n := range names {
			args[i] = params[n]
		}
		// LoRA dropout is on only inside the gradient pass (validation runs without it),
		// with masks keyed by (seed, step, micro-batch) so a resumed run replays them.
		adapter, dropout := r.params.(*lora.Adapter)
		dropout = dropout && r.cfg.LoRAParameters.Dropout > 0
		if dropout {
			adapter.SetTraining(mx.Key(r.s.Engine, DeriveSeed(r.cfg.Seed, seedDropout, uint64(step), uint64(micro))))
		}
		vg := mx.ValueAndGrad(func(a []*mx.Array) []*mx.Array {
			traced := make(map[string]*mx.Array, len(names))
			for i, n := range names {
				traced[n] = a[i]
			}
			if err := r.params.SetParams(traced); err != nil {
				panic(err)
			}
			terms := make([]objective.Terms, len(examples))
			for b := range examples {
				terms[b] = r.s.Objective.ExampleTerms(r.s.Model, examples[b], corr[b])
			}
			loss, _ := objective.BatchLoss(terms)
			return []*mx.Array{loss}
		})
		vals, grads := vg(args)
		if dropout {
			adapter.SetTraining(nil)
		}
		if err := r.params.SetParams(params); err != nil {
			return 0, 0, err
		}
		g := optim.Params{}
		for i, n := range names {
			g[n] = grads[i]
		}
		if err := acc.Add(g); err != nil {
			return 0, 0, err
		}
		lossSum += vals[0].Item()
	}
	grads, err := acc.Average()
	if err != nil {
		return 0, 0, err
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
	loss := ValidationLoss(r.s, r.val[:n], r.cfg.Seed)
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
		if err := r.saveWeights(BestAdapterFile); err != nil {
			return false, err
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
func ValidationLoss(s *Session, pairs []data.Pair, seed uint64) float64 {
	var sum, count float64
	vocab := s.Model.Config.TextConfig.VocabSize
	obj := s.Objective.SinglePass()
	for i, p := range pairs {
		key := mx.Key(s.Engine, DeriveSeed(seed, seedValNoise, uint64(p.Index), uint64(i)))
		choice := mx.Key(s.Engine, DeriveSeed(seed, seedValChoice, uint64(p.Index), uint64(i)))
		c := obj.DrawExample(key, choice, p.Target, vocab)
		var t objective.Terms
		mx.Tidy(s.Engine, func() []*mx.Array {
			t = obj.ExampleTerms(s.Model, objective.Example{Prompt: p.Prompt, Target: p.Target, Images: p.Images}, c)
			sum += t.Sum.Item() * t.Scale
			return nil
		})
		count += t.Count
	}
	return sum / max(count, 1)
}

// save writes the latest weights, a numbered copy when asked, and the training state.
func (r *run) save(step int, numbered bool) error {
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
