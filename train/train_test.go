package train

import (
	"context"
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dgtune/dgtune/config"
	"github.com/dgtune/dgtune/lora"
	dg "github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
)

// TestMemorise trains on five examples and checks that the fixed-corruption loss on
// those same examples (the valid split repeats them) falls well below where it started.
//
// The tiny random model starts confidently wrong (≈18.5 nats: its tied embedding makes
// it copy the canvas token), and only its full-attention layer sees the question, so
// 100 steps get it to ≈5.7 rather than to zero; learning_rate 2e-3 is where it learns
// fastest (1e-2 oscillates on this model).
func TestMemorise(t *testing.T) {
	dir := t.TempDir()
	model := writeTinyModel(t, filepath.Join(dir, "model"), dg.BitsNone, nil)
	writeFile(t, filepath.Join(dir, "data", "train.jsonl"), fiveExamples...)
	writeFile(t, filepath.Join(dir, "data", "valid.jsonl"), fiveExamples...)
	cfg := tinyConfig(model, filepath.Join(dir, "data"), filepath.Join(dir, "adapters"))
	cfg.Iters = 100
	cfg.LearningRate = 2e-3
	cfg.StepsPerReport = 10
	res, err := Run(context.Background(), cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var vals, trains []float64
	for _, ev := range readMetrics(t, cfg.AdapterPath) {
		if ev.ValLoss != nil {
			vals = append(vals, *ev.ValLoss)
		}
		if ev.TrainLoss != nil {
			trains = append(trains, *ev.TrainLoss)
		}
	}
	if len(vals) != 2 || len(trains) != 10 {
		t.Fatalf("%d val and %d train events, want 2 (steps 0 and 100) and 10", len(vals), len(trains))
	}
	t.Logf("val loss %.3f → %.3f; train loss (10-step means) %.3f → %.3f", vals[0], vals[1], trains[0], trains[len(trains)-1])
	if vals[1] > 0.4*vals[0] {
		t.Errorf("val loss on the memorised examples went from %.3f to %.3f; want below 40%% of the start", vals[0], vals[1])
	}
	if last := trains[len(trains)-1]; last > 0.5*trains[0] {
		t.Errorf("train loss went from %.3f to %.3f; want below half", trains[0], last)
	}
	if res.Steps != 100 || res.FinalValLoss == nil || *res.FinalValLoss != vals[1] || res.BestValLoss == nil || *res.BestValLoss != vals[1] {
		t.Errorf("result %+v disagrees with metrics (final val %v)", res, vals[1])
	}
}

// runInterrupted runs cfg with an already cancelled context: exactly one step is
// taken, a checkpoint saved and ErrInterrupted returned, as after a signal.
func runInterrupted(t *testing.T, cfg config.Config) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Run(ctx, cfg, Options{}); !errors.Is(err, ErrInterrupted) {
		t.Fatalf("cancelled run: %v, want ErrInterrupted", err)
	}
}

// outputs are the files whose bytes a resumed run must reproduce.
var outputs = []string{AdapterFile, BestAdapterFile, "0000004_" + AdapterFile, "0000008_" + AdapterFile, StateFile, StateJSON}

// checkResumeExact runs cfg uninterrupted, then the same run in resumedDir interrupted
// after every step (once fresh, then `more` times with --resume) and finished with
// --resume, and fails unless the two runs' losses and output files are identical. It
// returns the last resume's log and the uninterrupted run's losses.
func checkResumeExact(t *testing.T, cfg config.Config, resumedDir string, more int) string {
	t.Helper()
	log, _ := checkResumeExactLosses(t, cfg, resumedDir, more)
	return log
}

func checkResumeExactLosses(t *testing.T, cfg config.Config, resumedDir string, more int) (string, []string) {
	t.Helper()
	if _, err := Run(context.Background(), cfg, Options{}); err != nil {
		t.Fatal(err)
	}
	want := lossSeq(readMetrics(t, cfg.AdapterPath))
	rc := cfg
	rc.AdapterPath = resumedDir
	runInterrupted(t, rc)
	rc.Resume = true
	for range more {
		runInterrupted(t, rc)
	}
	var log strings.Builder
	if _, err := Run(context.Background(), rc, Options{Log: &log}); err != nil {
		t.Fatal(err)
	}
	if got := lossSeq(readMetrics(t, rc.AdapterPath)); !slices.Equal(got, want) {
		t.Errorf("metrics differ:\nresumed:       %v\nuninterrupted: %v", got, want)
	}
	for _, f := range outputs {
		if string(readBytes(t, filepath.Join(rc.AdapterPath, f))) != string(readBytes(t, filepath.Join(cfg.AdapterPath, f))) {
			t.Errorf("%s differs from the uninterrupted run's", f)
		}
	}
	return log.String(), want
}

func resumeConfig(t *testing.T, dir string) config.Config {
	t.Helper()
	model := writeTinyModel(t, filepath.Join(dir, "model"), dg.BitsNone, nil)
	writeFile(t, filepath.Join(dir, "data", "train.jsonl"), fiveExamples...)
	writeFile(t, filepath.Join(dir, "data", "valid.jsonl"), fiveExamples[:2]...)
	cfg := tinyConfig(model, filepath.Join(dir, "data"), filepath.Join(dir, "straight"))
	cfg.Iters = 12
	cfg.BatchSize = 2 // 5 examples: epochs of 3 batches, the last one short
	cfg.StepsPerEval = 4
	cfg.SaveEvery = 4
	return cfg
}

// TestResumeAfterInterrupt compares 12 uninterrupted steps with a run interrupted at
// every step from 1 to 6 (each resume takes one step and is interrupted again) and
// then resumed to 12: the metrics (iterations and losses) and every output file must
// be byte-identical.
func TestResumeAfterInterrupt(t *testing.T) {
	// Reporting every 4 steps checks that a report straddling the interruption averages
	// the same steps; accumulation checks the data position between micro-batches.
	for _, tc := range []struct{ report, accum int }{{1, 1}, {4, 2}} {
		t.Run("report="+itoa(tc.report)+",accum="+itoa(tc.accum), func(t *testing.T) {
			dir := t.TempDir()
			cfg := resumeConfig(t, dir)
			cfg.StepsPerReport = tc.report
			cfg.GradAccumulationSteps = tc.accum
			log := checkResumeExact(t, cfg, filepath.Join(dir, "resumed"), 5)
			if !strings.Contains(log, "continuing from step 6") {
				t.Errorf("log does not say where it resumed:\n%s", log)
			}
		})
	}
}

// TestResumeAfterKill simulates a process killed after its step-6 checkpoint while it
// was writing later files: metrics lines past step 6, a half-written temp file of the
// next state, and an adapters.safetensors of a later step. --resume must go on from
// the last complete checkpoint and end exactly like the uninterrupted run.
func TestResumeAfterKill(t *testing.T) {
	dir := t.TempDir()
	cfg := resumeConfig(t, dir)
	if _, err := Run(context.Background(), cfg, Options{}); err != nil {
		t.Fatal(err)
	}
	want := lossSeq(readMetrics(t, cfg.AdapterPath))

	rc := cfg
	rc.AdapterPath = filepath.Join(dir, "killed")
	runInterrupted(t, rc)
	rc.Resume = true
	for range 5 {
		runInterrupted(t, rc)
	}
	// What the dead process left behind after the step-6 checkpoint.
	f, err := os.OpenFile(filepath.Join(rc.AdapterPath, MetricsFile), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"event":"train","iteration":7,"train_loss":99}` + "\n" + `{"event":"train","iteration":8,"train_loss":98}` + "\n")
	f.Close()
	writeFile(t, filepath.Join(rc.AdapterPath, ".training_state.safetensors.tmp4242"), "torn")
	if err := os.WriteFile(filepath.Join(rc.AdapterPath, AdapterFile), readBytes(t, filepath.Join(cfg.AdapterPath, "0000008_"+AdapterFile)), 0o644); err != nil {
		t.Fatal(err)
	}
	// A kill between the two renames of a checkpoint: the readable copy is a step behind.
	st, err := ReadState(rc.AdapterPath)
	if err != nil || st.Step != 6 {
		t.Fatalf("ReadState: step %d, %v; want 6", st.Step, err)
	}
	stale := st
	stale.Step = 5
	if err := writeStateJSON(rc.AdapterPath, stale); err != nil {
		t.Fatal(err)
	}

	var log strings.Builder
	if _, err := Run(context.Background(), rc, Options{Log: &log}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log.String(), "training_state.json said step 5 but training_state.safetensors holds step 6") ||
		!strings.Contains(log.String(), "continuing from step 6") {
		t.Errorf("log does not report the stale copy:\n%s", log.String())
	}
	if got := lossSeq(readMetrics(t, rc.AdapterPath)); !slices.Equal(got, want) {
		t.Errorf("metrics differ:\nresumed:       %v\nuninterrupted: %v", got, want)
	}
	for _, f := range []string{AdapterFile, BestAdapterFile, StateFile, StateJSON} {
		if string(readBytes(t, filepath.Join(rc.AdapterPath, f))) != string(readBytes(t, filepath.Join(cfg.AdapterPath, f))) {
			t.Errorf("%s differs from the uninterrupted run's", f)
		}
	}
}

// TestResumeNothingToResume: --resume on an empty adapter_path starts from scratch.
func TestResumeNothingToResume(t *testing.T) {
	dir := t.TempDir()
	cfg := resumeConfig(t, dir)
	cfg.Iters = 2
	cfg.Resume = true
	if _, err := ReadState(cfg.AdapterPath); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadState of an empty adapter_path: %v, want fs.ErrNotExist", err)
	}
	var log strings.Builder
	res, err := Run(context.Background(), cfg, Options{Log: &log})
	if err != nil {
		t.Fatal(err)
	}
	if res.Steps != 2 || !strings.Contains(log.String(), "nothing to resume") {
		t.Errorf("steps %d, log:\n%s", res.Steps, log.String())
	}
}

// TestOutputs checks the files a run leaves (product.md §3) and that the adapter loads
// back onto the model.
func TestOutputs(t *testing.T) {
	dir := t.TempDir()
	cfg := resumeConfig(t, dir)
	cfg.Iters = 8
	var log strings.Builder
	res, err := Run(context.Background(), cfg, Options{Log: &log})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{AdapterConfig, AdapterFile, BestAdapterFile, "0000004_" + AdapterFile, "0000008_" + AdapterFile, StateFile, StateJSON, MetricsFile} {
		if _, err := os.Stat(filepath.Join(cfg.AdapterPath, f)); err != nil {
			t.Errorf("missing %s: %v", f, err)
		}
	}
	if res.Steps != 8 || res.TrainedTokens <= 0 || res.FinalValLoss == nil {
		t.Errorf("result %+v", res)
	}
	// The tiny model has 13 adapted linears (7 on the sliding layer, 6 on the full one);
	// at rank 4 that is 4·Σ(in+out) trainable scalars.
	// Only what differs from the defaults is printed (adapter_config.json has it all).
	for _, want := range []string{"resolved config (settings that differ from the defaults", "learning_rate: 0.01", "trainable parameters:"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, log.String())
		}
	}
	if strings.Contains(log.String(), "optimizer: adamw") {
		t.Errorf("log prints the default optimizer:\n%s", log.String())
	}
	e := mxtest.Go(t)
	f, err := lora.LoadDir(e, cfg.AdapterPath)
	if err != nil {
		t.Fatal(err)
	}
	m, err := dg.Load(e, cfg.Model, dg.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a, err := lora.Mount(m, f)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Modules()) != 13 || f.Rank() != 4 {
		t.Errorf("loaded adapter: %d modules at rank %d, want 13 at rank 4", len(a.Modules()), f.Rank())
	}
	if n := a.NumParams(); !strings.Contains(log.String(), "trainable parameters: "+itoa(int(n))+" ") {
		t.Errorf("log does not report %d trainable parameters:\n%s", n, log.String())
	}
	// Training moved B away from its zero init.
	moved := false
	for _, mod := range a.Modules() {
		for _, v := range a.Layer(mod).B.Float32s() {
			moved = moved || v != 0
		}
	}
	if !moved {
		t.Error("every B is still zero after 8 steps")
	}
}

// TestEpochs: epochs replace iters; 5 examples in batches of 2 are 3 batches per epoch.
func TestEpochs(t *testing.T) {
	dir := t.TempDir()
	cfg := resumeConfig(t, dir)
	cfg.Epochs = 2
	cfg.Iters = 1000
	res, err := Run(context.Background(), cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Steps != 6 {
		t.Errorf("%d steps, want 2 epochs × 3 batches = 6", res.Steps)
	}
}

// TestResumeMismatch: a training state made for other parameters, another seed, or a
// damaged state file is refused with a clear error, and nothing is overwritten.
func TestResumeMismatch(t *testing.T) {
	dir := t.TempDir()
	cfg := resumeConfig(t, dir)
	runInterrupted(t, cfg)
	stateBefore := readBytes(t, filepath.Join(cfg.AdapterPath, StateFile))
	cases := []struct {
		name string
		edit func(c *config.Config)
		want string
	}{
		{"other rank", func(c *config.Config) { c.LoRAParameters.Rank = 8 }, "different parameters"},
		{"other layers", func(c *config.Config) { c.NumLayers = 1 }, "different parameters"},
		{"other keys", func(c *config.Config) { c.LoRAParameters.Keys = []string{"self_attn.q_proj"} }, "different parameters"},
		{"full over lora", func(c *config.Config) { c.FineTuneType = "full" }, "different parameters"},
		{"other seed", func(c *config.Config) { c.Seed = 8 }, "seed 7"},
		{"separate over shared", func(c *config.Config) { c.LoRAParameters.Encoder = lora.EncoderModeSeparate }, "different parameters"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := cfg
			c.Resume = true
			tc.edit(&c)
			_, err := Run(context.Background(), c, Options{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one mentioning %q", err, tc.want)
			}
			if string(readBytes(t, filepath.Join(cfg.AdapterPath, StateFile))) != string(stateBefore) {
				t.Fatal("the refused resume changed the training state")
			}
		})
	}
	t.Run("damaged state", func(t *testing.T) {
		c := cfg
		c.Resume = true
		path := filepath.Join(cfg.AdapterPath, StateFile)
		if err := os.WriteFile(path, stateBefore[:len(stateBefore)/2], 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Run(context.Background(), c, Options{})
		if err == nil || !strings.Contains(err.Error(), "resume") {
			t.Fatalf("error %v, want a resume error", err)
		}
	})
}

// nanModel writes a tiny checkpoint whose final norm weight is NaN: every logit, and so
// every loss, is NaN.
func nanModel(t *testing.T, dir string) string {
	t.Helper()
	return writeTinyModel(t, dir, dg.BitsNone, func(w map[string]*mx.Array) {
		name := dg.DecoderPrefix + ".norm.weight"
		v := w[name].Float32s()
		for i := range v {
			v[i] = float32(math.NaN())
		}
		w[name] = mx.FromFloat32(w[name].Engine(), v, w[name].Shape()...)
	})
}

// TestNonFiniteLoss: a NaN loss stops the run with ErrNonFinite and leaves the last good
// checkpoint byte for byte.
func TestNonFiniteLoss(t *testing.T) {
	dir := t.TempDir()
	cfg := resumeConfig(t, dir)
	cfg.Iters = 2
	if _, err := Run(context.Background(), cfg, Options{}); err != nil {
		t.Fatal(err)
	}
	before := map[string][]byte{}
	for _, f := range []string{AdapterFile, BestAdapterFile, StateFile, StateJSON} {
		before[f] = readBytes(t, filepath.Join(cfg.AdapterPath, f))
	}

	// Resume the same adapter on a model that yields NaN: step 3 fails.
	c := cfg
	c.Model = nanModel(t, filepath.Join(dir, "nan"))
	c.Iters, c.Resume = 4, true
	_, err := Run(context.Background(), c, Options{})
	if !errors.Is(err, ErrNonFinite) || !strings.Contains(err.Error(), "non-finite loss at step 3") {
		t.Fatalf("error %v, want non-finite loss at step 3", err)
	}
	for f, b := range before {
		if string(readBytes(t, filepath.Join(cfg.AdapterPath, f))) != string(b) {
			t.Errorf("%s changed after the non-finite loss", f)
		}
	}

	// A fresh run: the step-0 validation already fails; without a valid split, step 1.
	c.Resume = false
	c.AdapterPath = filepath.Join(dir, "fresh")
	if _, err := Run(context.Background(), c, Options{}); !errors.Is(err, ErrNonFinite) || !strings.Contains(err.Error(), "validation loss") {
		t.Fatalf("fresh run with validation: %v", err)
	}
	// JSON has no NaN: the val event records null.
	if evs := readMetrics(t, c.AdapterPath); len(evs) != 1 || evs[0].Event != "val" || evs[0].ValLoss != nil {
		t.Errorf("metrics after a NaN validation: %v", lossSeq(evs))
	}
	if err := os.Remove(filepath.Join(dir, "data", "valid.jsonl")); err != nil {
		t.Fatal(err)
	}
	c.AdapterPath = filepath.Join(dir, "fresh-noval")
	if _, err := Run(context.Background(), c, Options{}); !errors.Is(err, ErrNonFinite) || !strings.Contains(err.Error(), "step 1") {
		t.Fatalf("fresh run without validation: %v", err)
	}
	if _, err := os.Stat(filepath.Join(c.AdapterPath, AdapterFile)); !os.IsNotExist(err) {
		t.Errorf("a run that never finished a step wrote %s", AdapterFile)
	}
}

// TestFullFineTune: fine_tune_type full trains the unquantized tiny model's weights and
// writes a checkpoint diffusiongemma.Load reads; on a quantized model it is refused.
func TestFullFineTune(t *testing.T) {
	dir := t.TempDir()
	cfg := resumeConfig(t, dir)
	cfg.FineTuneType = "full"
	cfg.Iters = 3
	cfg.LearningRate = 1e-3
	if _, err := Run(context.Background(), cfg, Options{}); err != nil {
		t.Fatal(err)
	}
	e := mxtest.Go(t)
	trained, err := dg.Load(e, cfg.AdapterPath, dg.LoadOptions{})
	if err != nil {
		t.Fatalf("the full checkpoint does not load: %v", err)
	}
	base, err := dg.Load(e, cfg.Model, dg.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tw, bw := trained.DenseTensors(), base.DenseTensors()
	if len(tw) != len(bw) {
		t.Fatalf("%d tensors, base has %d", len(tw), len(bw))
	}
	changed := 0
	for n, p := range tw {
		if !slices.Equal((*p).Float32s(), (*bw[n]).Float32s()) {
			changed++
		}
	}
	// Every tensor is on the gradient path; AdamW moves each by about lr per element.
	if changed < len(tw)/2 {
		t.Errorf("only %d of %d tensors changed", changed, len(tw))
	}
	if _, err := os.Stat(filepath.Join(cfg.AdapterPath, "tokenizer.json")); err != nil {
		t.Errorf("tokenizer not copied next to the full weights: %v", err)
	}

	q := cfg
	q.Model = writeTinyModel(t, filepath.Join(dir, "q4"), dg.Bits4, nil)
	q.AdapterPath = filepath.Join(dir, "q4-out")
	if _, err := Run(context.Background(), q, Options{}); err == nil || !strings.Contains(err.Error(), "unquantized") {
		t.Fatalf("full fine-tune of a quantized model: %v", err)
	}
}

// TestDropout: lora_parameters.dropout is applied while training (the adapters differ
// from a dropout-free run's), and a resumed run replays the same masks.
func TestDropout(t *testing.T) {
	dir := t.TempDir()
	cfg := resumeConfig(t, dir)
	cfg.Iters = 4
	cfg.SaveEvery = 0
	cfg.AdapterPath = filepath.Join(dir, "nodrop")
	if _, err := Run(context.Background(), cfg, Options{}); err != nil {
		t.Fatal(err)
	}
	d := cfg
	d.LoRAParameters.Dropout = 0.5
	d.AdapterPath = filepath.Join(dir, "drop")
	if _, err := Run(context.Background(), d, Options{}); err != nil {
		t.Fatal(err)
	}
	if string(readBytes(t, filepath.Join(d.AdapterPath, AdapterFile))) == string(readBytes(t, filepath.Join(cfg.AdapterPath, AdapterFile))) {
		t.Fatal("dropout 0.5 trained exactly the adapter of dropout 0: dropout is not applied")
	}
	// Validation runs without dropout: both runs start from B = 0, so their step-0 val
	// losses agree.
	if a, b := readMetrics(t, d.AdapterPath)[0], readMetrics(t, cfg.AdapterPath)[0]; *a.ValLoss != *b.ValLoss {
		t.Errorf("step-0 val loss %v with dropout, %v without", *a.ValLoss, *b.ValLoss)
	}
	r := d
	r.AdapterPath = filepath.Join(dir, "drop-resumed")
	runInterrupted(t, r)
	r.Resume = true
	runInterrupted(t, r)
	if _, err := Run(context.Background(), r, Options{}); err != nil {
		t.Fatal(err)
	}
	if string(readBytes(t, filepath.Join(r.AdapterPath, AdapterFile))) != string(readBytes(t, filepath.Join(d.AdapterPath, AdapterFile))) {
		t.Error("with dropout, the resumed run's adapter differs from the uninterrupted one's")
	}
}

// TestQuantizedLoRA: LoRA trains over a 4-bit model (the base stays packed).
func TestQuantizedLoRA(t *testing.T) {
	dir := t.TempDir()
	cfg := resumeConfig(t, dir)
	cfg.Model = writeTinyModel(t, filepath.Join(dir, "q4"), dg.Bits4, nil)
	cfg.Iters = 2
	res, err := Run(context.Background(), cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Steps != 2 || res.FinalValLoss == nil || math.IsNaN(res.FinalLoss) {
		t.Errorf("result %+v", res)
	}
}

// TestEarlyStopping: with patience 1 and evaluation after every step, the run stops at
// the first evaluation that does not beat the best so far (a learning rate of 1 makes
// one come quickly) and saves a checkpoint there.
func TestEarlyStopping(t *testing.T) {
	dir := t.TempDir()
	cfg := resumeConfig(t, dir)
	cfg.LearningRate = 1
	cfg.StepsPerEval = 1
	cfg.EarlyStoppingPatience = 1
	var log strings.Builder
	res, err := Run(context.Background(), cfg, Options{Log: &log})
	if err != nil {
		t.Fatal(err)
	}
	want := -1
	best := math.Inf(1)
	for _, ev := range readMetrics(t, cfg.AdapterPath) {
		if ev.ValLoss == nil {
			continue
		}
		if *ev.ValLoss >= best && want < 0 {
			want = ev.Iteration
		}
		best = math.Min(best, *ev.ValLoss)
	}
	if want < 0 || want >= cfg.Iters {
		t.Fatalf("no evaluation got worse before step %d; the test needs one", cfg.Iters)
	}
	if !res.StoppedEarly || res.Steps != want || !strings.Contains(log.String(), "early stopping at step "+itoa(want)) {
		t.Errorf("result %+v, want an early stop at step %d; log:\n%s", res, want, log.String())
	}
	st, _, _, err := loadState(mxtest.Go(t), cfg.AdapterPath)
	if err != nil || st.Step != want {
		t.Errorf("checkpoint at step %d (%v), want %d", st.Step, err, want)
	}
}

// TestSeparateEncoderRun: with lora_parameters.encoder separate the run trains both passes'
// weights, resumes exactly, and writes an adapter that reads back as separate.
func TestSeparateEncoderRun(t *testing.T) {
	dir := t.TempDir()
	cfg := resumeConfig(t, dir)
	cfg.LoRAParameters.Encoder = lora.EncoderModeSeparate
	checkResumeExact(t, cfg, filepath.Join(dir, "resumed"), 0)
	f, err := lora.LoadDir(mxtest.Go(t), cfg.AdapterPath)
	if err != nil {
		t.Fatal(err)
	}
	enc := 0
	for mod, w := range f.Modules {
		if strings.HasPrefix(mod, dg.EncoderLayersPrefix) {
			enc++
			if d, _ := dg.DecoderModule(mod); slices.Equal(w.B.Float32s(), f.Modules[d].B.Float32s()) {
				t.Errorf("%s: the encoder pass's B equals the decoder's after training", mod)
			}
		}
	}
	if !f.Separate() || enc == 0 || enc*2 != len(f.Modules) {
		t.Errorf("adapter: separate %v, %d encoder modules of %d", f.Separate(), enc, len(f.Modules))
	}
}
