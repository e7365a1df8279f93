package config

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

const mlxlmExample = "testdata/mlx-lm/lora_config.yaml"

// mlx-lm's own example config loads as written, with mlx-lm's meaning for every key.
func TestMLXLMExample(t *testing.T) {
	c, err := Load(mlxlmExample, nil)
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"model", c.Model, "mlx-community/Llama-3.2-1B-Instruct-bf16"},
		{"train", c.Train, true},
		{"fine_tune_type", c.FineTuneType, "lora"},
		{"optimizer", c.Optimizer, "adamw"},
		{"data", c.Data, "mlx-community/WikiSQL"},
		{"num_layers", c.NumLayers, 16},
		{"batch_size", c.BatchSize, 4},
		{"iters", c.Iters, 1000},
		{"val_batches", c.ValBatches, 25},
		{"learning_rate", c.LearningRate, 1e-5},
		{"steps_per_eval", c.StepsPerEval, 200},
		{"resume_adapter_file (null)", c.ResumeAdapterFile, ""},
		{"adapter_path", c.AdapterPath, "adapters"},
		{"test", c.Test, false},
		{"test_batches", c.TestBatches, 100},
		{"max_seq_length", c.MaxSeqLength, 2048},
		{"max_prompt from max_seq_length - max_canvas", c.MaxPrompt, 2048 - 256},
		{"mask_prompt (default)", c.MaskPrompt, true},
		{"lora keys", c.LoRAParameters.Keys, []string{"self_attn.q_proj", "self_attn.v_proj"}},
		{"lora scale", c.LoRAParameters.Scale, 20.0},
		{"notes", c.Notes, []string{"max_seq_length 2048: prompts keep their last 1792 tokens (max_prompt), completions their first 256 (max_canvas)"}},
	}
	for _, ck := range checks {
		if !reflect.DeepEqual(ck.got, ck.want) {
			t.Errorf("%s = %#v, want %#v", ck.name, ck.got, ck.want)
		}
	}
}

// uncommented is mlx-lm's example with its commented-out keys switched on, as a user
// trying them would write them.
func uncommented(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(mlxlmExample)
	if err != nil {
		t.Fatal(err)
	}
	s := string(raw)
	for _, key := range []string{"optimizer_config:", "  adamw:", "    betas:", "    eps:", "    weight_decay:", "    bias_correction:",
		"report_to:", "project_name:"} {
		if !strings.Contains(s, "# "+key) {
			t.Fatalf("the example no longer has a commented %q", key)
		}
		s = strings.Replace(s, "# "+key, key, 1)
	}
	for _, key := range []string{"lr_schedule:", "  name:", "  warmup:", "  warmup_init:", "  arguments:",
		"hf_dataset:", "  path:", "  train_split:", "  valid_split:", "  prompt_feature:", "  completion_feature:"} {
		if !strings.Contains(s, "#"+key) {
			t.Fatalf("the example no longer has a commented %q", key)
		}
		s = strings.Replace(s, "#"+key, key, 1)
	}
	return s
}

func TestMLXLMExampleUncommented(t *testing.T) {
	c, err := Load(writeYAML(t, uncommented(t)), nil)
	if err != nil {
		t.Fatal(err)
	}
	oc := c.OptimizerConfig
	if !reflect.DeepEqual(oc.Betas, []float64{0.9, 0.98}) || oc.Eps != 1e-6 || oc.WeightDecay != 0.05 || !oc.BiasCorrection {
		t.Errorf("optimizer_config.adamw not applied: %+v", oc)
	}
	want := LRSchedule{Name: "cosine_decay", Arguments: []float64{1e-5, 1000, 1e-7}, Warmup: 100, WarmupInit: 1e-7}
	if !reflect.DeepEqual(c.LRSchedule, want) {
		t.Errorf("lr_schedule = %+v, want %+v", c.LRSchedule, want)
	}
	// hf_dataset's own prompt_feature must not leak into the top-level one.
	if c.PromptFeature != "prompt" {
		t.Errorf("prompt_feature = %q, want the default", c.PromptFeature)
	}
	var got []string
	for _, n := range c.Notes {
		got = append(got, n[:strings.Index(n, ": no effect")+len(": no effect")])
	}
	for _, key := range []string{"hf_dataset", "project_name", "report_to"} {
		found := false
		for _, n := range got {
			found = found || strings.HasSuffix(n, ": "+key+": no effect")
		}
		if !found {
			t.Errorf("no note for %s in %q", key, c.Notes)
		}
	}
}

// The chosen optimizer's block is merged at the file's precedence; other blocks are
// never read.
func TestOptimizerBlocks(t *testing.T) {
	body := "optimizer: adamw\noptimizer_config:\n  adamw:\n    weight_decay: 0.05\n    eps: 1.0e-6\n" +
		"  sgd:\n    momentum: 0.9\n    dampening: 0.5\n  muon:\n    anything: [1, 2]\n  adafactor:\n"
	load := func(env map[string]string, args ...string) Config {
		t.Helper()
		for k, v := range env {
			t.Setenv(k, v)
		}
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		BindFlags(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		c, err := Load(writeYAML(t, body), fs)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := load(nil)
	if c.OptimizerConfig.WeightDecay != 0.05 || c.OptimizerConfig.Eps != 1e-6 || c.OptimizerConfig.Momentum != 0 {
		t.Errorf("adamw block: %+v", c.OptimizerConfig)
	}
	c = load(nil, "--optimizer-config.weight-decay", "0.2")
	if c.OptimizerConfig.WeightDecay != 0.2 || c.OptimizerConfig.Eps != 1e-6 {
		t.Errorf("flag over the block: %+v", c.OptimizerConfig)
	}
	t.Run("env picks sgd", func(t *testing.T) {
		// sgd's block asks for dampening 0.5, which dgtune's SGD cannot do.
		t.Setenv("DGTUNE_OPTIMIZER", "sgd")
		_, err := Load(writeYAML(t, body), nil)
		if want := "optimizer_config.sgd.dampening 0.5: dgtune's SGD has no dampening (only 0)"; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v, want %q", err, want)
		}
	})
	t.Run("flag picks sgd", func(t *testing.T) {
		fixed := strings.Replace(body, "dampening: 0.5", "dampening: 0", 1)
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		BindFlags(fs)
		if err := fs.Parse([]string{"--optimizer", "sgd"}); err != nil {
			t.Fatal(err)
		}
		c, err := Load(writeYAML(t, fixed), fs)
		if err != nil {
			t.Fatal(err)
		}
		if c.OptimizerConfig.Momentum != 0.9 || c.OptimizerConfig.WeightDecay != 0.01 || c.OptimizerConfig.Eps != 1e-8 {
			t.Errorf("sgd block (adamw's unread): %+v", c.OptimizerConfig)
		}
	})
}

func TestMLXLMKeys(t *testing.T) {
	c, err := Load(writeYAML(t, "train: false\ntest: true\niters: 0\nadapter_path: \"\"\ntest_batches: -1\n"), nil)
	if err != nil {
		t.Fatalf("evaluate-only config: %v", err)
	}
	if c.Train || !c.Test || c.TestBatches != -1 {
		t.Errorf("train %v test %v test_batches %d", c.Train, c.Test, c.TestBatches)
	}
	c, err = Load(writeYAML(t, "max_seq_length: 300\nmax_canvas: 100\nmax_prompt: 50\nresume_adapter_file: a/adapters.safetensors\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.MaxPrompt != 50 || c.MaxCanvas != 100 || c.ResumeAdapterFile != "a/adapters.safetensors" {
		t.Errorf("a smaller max_prompt stays: max_prompt %d max_canvas %d", c.MaxPrompt, c.MaxCanvas)
	}
	c, err = Load(writeYAML(t, "report_to: null\ntrust_remote_code: false\nproject_name: \"\"\nclear_cache_threshold: 0\n"), nil)
	if err != nil || len(c.Notes) != 0 {
		t.Errorf("unset inert keys: notes %q, err %v; want silence", c.Notes, err)
	}
	c, err = Load(writeYAML(t, "trust_remote_code: true\nclear_cache_threshold: 1000000\n"), nil)
	if err != nil || len(c.Notes) != 2 || !strings.Contains(c.Notes[1], "trust_remote_code: no effect: dgtune runs no code that comes with a checkpoint") {
		t.Errorf("notes %q, err %v", c.Notes, err)
	}

	bad := []struct{ yaml, want string }{
		{"mask_prompt: false\n", "mask_prompt: false: the denoising objective never scores the prompt"},
		{"train: false\n", "train: false and test: false: nothing to do"},
		{"test_batches: 0\n", "test_batches 0: want -1"},
		{"max_seq_length: 256\n", "max_seq_length 256 leaves no room for a prompt beside max_canvas 256"},
		{"max_seq_length: -1\n", "max_seq_length -1: must not be negative"},
		{"mask_promt: true\n", `unknown key "mask_promt" (did you mean "mask_prompt"?)`},
		{"optimizer_config:\n  adamw:\n    weight_decy: 0.1\n",
			`unknown key "optimizer_config.adamw.weight_decy": not an argument of MLX's adamw (did you mean "optimizer_config.adamw.weight_decay"?)`},
		{"optimizer_config:\n  adamw:\n    learning_rate: 0.1\n", "optimizer_config.adamw.learning_rate: set learning_rate (or lr_schedule) instead"},
		{"optimizer_config:\n  weight_decay: 0.1\n  adamw:\n    weight_decay: 0.05\n",
			"optimizer_config.weight_decay (0.1) and optimizer_config.adamw.weight_decay (0.05) disagree; keep one"},
		{"optimizer_config:\n  adamww:\n    weight_decay: 0.05\n", `optimizer_config.adamww: unknown optimizer (did you mean "adamw"?)`},
		{"optimizer_config:\n  adamw: 3\n", "optimizer_config.adamw must be a mapping"},
		{"optimizer: muon\n", `optimizer "muon": want one of adamw, adam, sgd`},
		{"fine_tune_type: dora\n", `fine_tune_type "dora": want one of lora, full`},
	}
	for _, b := range bad {
		_, err := Load(writeYAML(t, b.yaml), nil)
		if err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("Load(%q) error = %v, want it to contain %q", b.yaml, err, b.want)
		}
	}
	// Agreeing flat and nested values are fine, numbers compared by value.
	if _, err := Load(writeYAML(t, "optimizer: sgd\noptimizer_config:\n  momentum: 0\n  sgd:\n    momentum: 0.0\n"), nil); err != nil {
		t.Errorf("agreeing values: %v", err)
	}
}
