package config

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// recipe: nemo resolves to diffusion_gemma_lora.yaml's values (NeMo AutoModel 36044ad), each
// marked as the recipe's (or, for the objective's keys, the objective preset's).
func TestRecipeNeMo(t *testing.T) {
	c, err := Load(writeYAML(t, "recipe: nemo\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		key      string
		got, val any
		by       string
	}{
		{"objective", c.Objective, "nemo", "recipe nemo"},
		{"lora_parameters.rank", c.LoRAParameters.Rank, 16, "recipe nemo"},
		{"lora_parameters.scale", c.LoRAParameters.Scale, 2.0, "recipe nemo"}, // alpha 32 / dim 16
		{"lora_parameters.init", c.LoRAParameters.Init, "xavier_normal", "recipe nemo"},
		{"learning_rate", c.LearningRate, 1.5e-4, "recipe nemo"},
		{"optimizer_config.betas", c.OptimizerConfig.Betas, []float64{0.95, 0.99}, "recipe nemo"},
		{"optimizer_config.eps", c.OptimizerConfig.Eps, 1e-8, "recipe nemo"},
		{"optimizer_config.weight_decay", c.OptimizerConfig.WeightDecay, 1e-4, "recipe nemo"},
		{"optimizer_config.bias_correction", c.OptimizerConfig.BiasCorrection, true, "recipe nemo"},
		{"grad_clip", c.GradClip, 1.0, "recipe nemo"},
		{"lr_schedule.name", c.LRSchedule.Name, "cosine_with_min_lr", "recipe nemo"},
		{"lr_schedule.arguments", c.LRSchedule.Arguments, []float64{1.5e-4, 800, 1.5e-5}, "recipe nemo"},
		{"lr_schedule.warmup", c.LRSchedule.Warmup, 25, "recipe nemo"},
		{"batch_size", c.BatchSize, 8, "recipe nemo"},
		{"iters", c.Iters, 800, "recipe nemo"},
		{"seed", c.Seed, uint64(42), "recipe nemo"},
		{"chat_template", c.ChatTemplate, "nemo", "recipe nemo"},
		{"max_seq_length", c.MaxSeqLength, 1024, "recipe nemo"},
		{"loss_normalization", c.LossNormalization, "step", "recipe nemo"},
		{"self_conditioning_draw", c.SelfConditioningDraw, "step", "recipe nemo"},
		{"self_conditioning", c.SelfConditioning, 0.5, "objective nemo"},
		{"long_targets", c.LongTargets, LongRandomBlock, "objective nemo"},
		{"eos_fill", c.EOSFill, true, "objective nemo"},
	}
	for _, ck := range checks {
		if !reflect.DeepEqual(ck.got, ck.val) {
			t.Errorf("recipe: nemo: %s = %v, want %v", ck.key, ck.got, ck.val)
		}
		if c.Presets[ck.key] != ck.by {
			t.Errorf("recipe: nemo: %s marked %q, want %q", ck.key, c.Presets[ck.key], ck.by)
		}
	}
	// max_seq_length is NeMo's seq_length here, not a cap on max_prompt.
	if c.MaxPrompt != 0 {
		t.Errorf("recipe: nemo: max_prompt = %d, want 0 (max_seq_length cuts prompt + target at the end)", c.MaxPrompt)
	}
	if c.Presets["recipe"] != "" || c.Presets["model"] != "" {
		t.Errorf("keys the recipe does not set are marked: %v", c.Presets)
	}
}

// optiq's recipe is the defaults, and marks nothing.
func TestRecipeOptiqIsTheDefaults(t *testing.T) {
	c, err := Load(writeYAML(t, "recipe: optiq\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	d := Defaults()
	for _, k := range Keys() {
		if k == "recipe" {
			continue
		}
		if fmt.Sprint(Get(c, k)) != fmt.Sprint(Get(d, k)) {
			t.Errorf("recipe: optiq: %s = %v, want the default %v", k, Get(c, k), Get(d, k))
		}
	}
	if len(c.Presets) != 0 {
		t.Errorf("recipe: optiq marks %v", c.Presets)
	}
}

// A key given in the file, the environment or a flag wins over the recipe and is not
// marked; the recipe itself may come from a flag (--recipe) or the environment.
func TestRecipeYieldsToGivenKeys(t *testing.T) {
	path := writeYAML(t, "recipe: nemo\nbatch_size: 2\nlora_parameters:\n  rank: 4\n")
	t.Setenv("DGTUNE_LEARNING_RATE", "3e-4")
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	BindFlags(fs)
	if err := fs.Parse([]string{"--iters", "5", "--objective", "reference", "--lora-parameters.init", "gaussian"}); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path, fs)
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		key  string
		got  any
		want any
		by   string
	}{
		{"batch_size (file)", c.BatchSize, 2, ""},
		{"lora_parameters.rank (file)", c.LoRAParameters.Rank, 4, ""},
		{"learning_rate (env)", c.LearningRate, 3e-4, ""},
		{"iters (flag)", c.Iters, 5, ""},
		{"lora_parameters.init (flag)", c.LoRAParameters.Init, "gaussian", ""},
		{"objective (flag)", c.Objective, "reference", ""},
		{"self_conditioning (no NeMo objective)", c.SelfConditioning, 0.0, ""},
		{"lora_parameters.scale (recipe)", c.LoRAParameters.Scale, 2.0, "recipe nemo"},
	}
	for _, ck := range checks {
		key := strings.Fields(ck.key)[0]
		if !reflect.DeepEqual(ck.got, ck.want) {
			t.Errorf("%s = %v, want %v", ck.key, ck.got, ck.want)
		}
		if c.Presets[key] != ck.by {
			t.Errorf("%s marked %q, want %q", ck.key, c.Presets[key], ck.by)
		}
	}

	fs = pflag.NewFlagSet("t", pflag.ContinueOnError)
	BindFlags(fs)
	if err := fs.Parse([]string{"--recipe", "nemo"}); err != nil {
		t.Fatal(err)
	}
	if c, err = Load("", fs); err != nil {
		t.Fatal(err)
	}
	if c.LoRAParameters.Rank != 16 || c.Objective != ObjectiveNeMo || c.Presets["lora_parameters.rank"] != "recipe nemo" {
		t.Fatalf("--recipe nemo: rank %d, objective %q, marks %v", c.LoRAParameters.Rank, c.Objective, c.Presets)
	}
	t.Setenv("DGTUNE_RECIPE", "nemo")
	if c, err = Load("", nil); err != nil {
		t.Fatal(err)
	}
	if c.BatchSize != 8 {
		t.Fatalf("DGTUNE_RECIPE=nemo: batch_size %d, want 8", c.BatchSize)
	}
}

func TestBadRecipeConfigs(t *testing.T) {
	cases := []struct {
		yaml, want string
	}{
		{"recipe: axolotl\n", `config: recipe "axolotl": want one of nemo, optiq`},
		{"lora_parameters:\n  init: orthogonal\n", `lora_parameters.init "orthogonal": want one of kaiming_uniform, xavier_normal, gaussian`},
		{"chat_template: chatml\n", `chat_template "chatml": want one of dgtune, nemo`},
		{"loss_normalization: token\n", `loss_normalization "token": want one of micro_batch, step`},
		{"self_conditioning_draw: batch\n", `self_conditioning_draw "batch": want one of example, step`},
		{"recipie: nemo\n", `unknown key "recipie" (did you mean "recipe"?)`},
	}
	for _, c := range cases {
		_, err := Load(writeYAML(t, c.yaml), nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Load(%q) error = %v, want it to contain %q", c.yaml, err, c.want)
		}
	}
}
