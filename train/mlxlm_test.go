package train

import (
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dgtune/dgtune/config"
	dg "github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
	"github.com/dgtune/dgtune/optim"
)

// optimizer_config.adamw.weight_decay reaches AdamW: with a zero gradient one update is
// exactly the decoupled decay w ← w·(1 − lr·wd).
func TestWeightDecayFromMLXLMBlock(t *testing.T) {
	e := mxtest.Go(t)
	for _, tc := range []struct {
		yaml string
		wd   float64
	}{
		{"learning_rate: 0.1\n", 0.01}, // dgtune's (and MLX's) default
		{"learning_rate: 0.1\noptimizer_config:\n  adamw:\n    weight_decay: 0.05\n  sgd:\n    weight_decay: 0.3\n", 0.05},
		{"learning_rate: 0.1\noptimizer: sgd\noptimizer_config:\n  adamw:\n    weight_decay: 0.05\n  sgd:\n    weight_decay: 0.3\n", 0.3},
	} {
		path := filepath.Join(t.TempDir(), "c.yaml")
		if err := os.WriteFile(path, []byte(tc.yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg, err := config.Load(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		w := mx.FromFloat32(e, []float32{1, -2}, 2)
		opt, err := newOptimizer(cfg, map[string]*mx.Array{"w": w})
		if err != nil {
			t.Fatal(err)
		}
		got := opt.Update(optim.Params{"w": w}, optim.Params{"w": mx.Zeros(e, []int{2}, mx.Float32)})["w"].Float32s()
		for i, w0 := range []float64{1, -2} {
			if want := float32(w0 * (1 - 0.1*tc.wd)); math.Abs(float64(got[i]-want)) > 1e-7 {
				t.Errorf("%q: w[%d] = %v after one decay step, want %v (weight_decay %g)", tc.yaml, i, got[i], want, tc.wd)
			}
		}
	}
}

// mlxlmRun is a tiny run with a test split beside train and valid.
func mlxlmRun(t *testing.T, dir string) config.Config {
	t.Helper()
	model := writeTinyModel(t, filepath.Join(dir, "model"), dg.BitsNone, nil)
	writeFile(t, filepath.Join(dir, "data", "train.jsonl"), fiveExamples...)
	writeFile(t, filepath.Join(dir, "data", "valid.jsonl"), fiveExamples[:2]...)
	writeFile(t, filepath.Join(dir, "data", "test.jsonl"), fiveExamples[1:]...)
	cfg := tinyConfig(model, filepath.Join(dir, "data"), filepath.Join(dir, "adapters"))
	cfg.Iters = 4
	return cfg
}

// test: true scores the test split after training; train: false scores it from the
// adapter on disk, and gets the same number (same weights, same fixed corruptions).
func TestTestSplit(t *testing.T) {
	dir := t.TempDir()
	cfg := mlxlmRun(t, dir)
	cfg.Test = true
	cfg.BatchSize = 2
	cfg.TestBatches = 1 // 1 batch of 2 of the 4 test rows
	var log strings.Builder
	res, err := Run(context.Background(), cfg, Options{Log: &log})
	if err != nil {
		t.Fatal(err)
	}
	if res.Test == nil || res.Test.Examples != 2 || res.Test.PPL != math.Exp(res.Test.Loss) || res.Test.Loss <= 0 {
		t.Fatalf("test score %+v", res.Test)
	}
	if !strings.Contains(log.String(), "test: 2 examples of "+filepath.Join(cfg.Data, "test.jsonl")) {
		t.Errorf("log:\n%s", log.String())
	}

	only := cfg
	only.Train = false
	again, err := Run(context.Background(), only, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !again.EvaluatedOnly || again.Test == nil || again.Test.Loss != res.Test.Loss || again.Steps != 0 {
		t.Errorf("train: false on the saved adapter: %+v (%+v), want test loss %v", again, again.Test, res.Test.Loss)
	}
	base := only
	base.AdapterPath = ""
	b, err := Run(context.Background(), base, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if b.Test.Loss == res.Test.Loss {
		t.Error("the base scores the same test loss as the trained adapter: the adapter was not mounted")
	}
	all := base
	all.TestBatches = -1
	if b, err = Run(context.Background(), all, Options{}); err != nil || b.Test.Examples != 4 {
		t.Errorf("test_batches -1: %+v, %v; want all 4 test rows", b.Test, err)
	}
}

// Each mode reads only what it needs, and fails before writing anything when a split it
// needs is absent.
func TestTestSplitData(t *testing.T) {
	dir := t.TempDir()
	cfg := mlxlmRun(t, dir)
	if err := os.Remove(filepath.Join(cfg.Data, "test.jsonl")); err != nil {
		t.Fatal(err)
	}
	cfg.Test = true
	if _, err := Run(context.Background(), cfg, Options{}); err == nil || !strings.Contains(err.Error(), "no test.jsonl or test.parquet") {
		t.Errorf("test: true without a test split: %v", err)
	}
	if _, err := os.Stat(cfg.AdapterPath); !os.IsNotExist(err) {
		t.Errorf("adapter_path written although the run could not start: %v", err)
	}
	// train: false needs the test split only: a broken train.jsonl beside it is not read.
	writeFile(t, filepath.Join(cfg.Data, "test.jsonl"), fiveExamples[0])
	writeFile(t, filepath.Join(cfg.Data, "train.jsonl"), "not json")
	cfg.Train, cfg.AdapterPath = false, ""
	if res, err := Run(context.Background(), cfg, Options{}); err != nil || res.Test.Examples != 1 {
		t.Errorf("train: false beside a broken train.jsonl: %+v, %v", res, err)
	}
	cfg.FineTuneType, cfg.AdapterPath = "full", "somewhere"
	if _, err := Run(context.Background(), cfg, Options{}); err == nil || !strings.Contains(err.Error(), "set model to somewhere") {
		t.Errorf("train: false, full: %v", err)
	}
}

// resume_adapter_file starts from another run's weights with a fresh optimizer: with a
// zero learning rate the weights come out unchanged (not the fresh initialisation, which
// the same seed would give otherwise), and the first validation scores them.
func TestResumeAdapterFile(t *testing.T) {
	dir := t.TempDir()
	first := mlxlmRun(t, dir)
	res, err := Run(context.Background(), first, Options{})
	if err != nil {
		t.Fatal(err)
	}
	weights := filepath.Join(first.AdapterPath, AdapterFile)
	for _, from := range []string{weights, first.AdapterPath} {
		second := first
		second.AdapterPath = filepath.Join(dir, "second")
		second.ResumeAdapterFile = from
		second.Iters = 1
		second.LearningRate = 0
		second.Overwrite = true // the second pass of the loop starts over the first's output
		var log strings.Builder
		if _, err := Run(context.Background(), second, Options{Log: &log}); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(log.String(), "resume_adapter_file: starting from the 26 tensors of "+weights+" (fresh optimizer, step 0)") {
			t.Errorf("log:\n%s", log.String())
		}
		if !bytes.Equal(readBytes(t, filepath.Join(second.AdapterPath, AdapterFile)), readBytes(t, weights)) {
			t.Errorf("%s: lr 0 from the file did not reproduce its weights", from)
		}
		evs := readMetrics(t, second.AdapterPath)
		if evs[0].Event != "val" || evs[0].Iteration != 0 || *evs[0].ValLoss != *res.FinalValLoss {
			t.Errorf("first validation %+v, want the first run's final val loss %v", evs[0], *res.FinalValLoss)
		}
		st, _, _, err := loadState(mxtest.Go(t), second.AdapterPath)
		if err != nil || st.OptimizerStep != 1 || st.Step != 1 {
			t.Errorf("state: step %d, optimizer step %d (%v); want 1 and 1 (a fresh optimizer)", st.Step, st.OptimizerStep, err)
		}
	}

	// --resume over a training state wins over the file, and says so.
	cont := first
	cont.Resume, cont.Iters, cont.ResumeAdapterFile = true, 5, weights
	var log strings.Builder
	if _, err := Run(context.Background(), cont, Options{Log: &log}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log.String(), "resume: continuing from step 4") || !strings.Contains(log.String(), "resume_adapter_file: not used: continuing from the training state") {
		t.Errorf("log:\n%s", log.String())
	}

	bad := []struct {
		name string
		edit func(*config.Config)
		want string
	}{
		{"other rank", func(c *config.Config) { c.LoRAParameters.Rank = 2 },
			"model.decoder.layers.0.mlp.down_proj.lora_a: file [128 4], this run [128 2] (lora_parameters.rank?)"},
		{"fewer keys", func(c *config.Config) { c.LoRAParameters.Keys = []string{"self_attn.q_proj"} },
			"model.decoder.layers.0.mlp.down_proj.lora_a is not trained by this config"},
		{"missing file", func(c *config.Config) { c.ResumeAdapterFile = filepath.Join(dir, "nope.safetensors") }, "nope.safetensors"},
	}
	for _, b := range bad {
		c := first
		c.AdapterPath = filepath.Join(dir, "bad-"+strings.ReplaceAll(b.name, " ", "-"))
		c.ResumeAdapterFile = weights
		b.edit(&c)
		if _, err := Run(context.Background(), c, Options{}); err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("%s: err = %v, want it to contain %q", b.name, err, b.want)
		}
	}
}
