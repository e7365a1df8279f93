package config

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

func TestObjectivePresetNeMo(t *testing.T) {
	c, err := Load(writeYAML(t, "objective: nemo\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	// NeMo AutoModel's values (examples/dllm_sft/diffusion_gemma_lora.yaml, DiffusionGemmaSFTRecipe).
	checks := []struct {
		name      string
		got, want any
	}{
		{"t_min", c.TMin, 0.001},
		{"t_max", c.TMax, 1.0},
		{"loss_positions", c.LossPositions, "all"},
		{"eos_fill", c.EOSFill, true},
		{"self_conditioning", c.SelfConditioning, 0.5},
		{"encoder_loss_weight", c.EncoderLossWeight, 1.0},
		{"long_targets", c.LongTargets, LongRandomBlock},
		// Not part of the objective: left alone.
		{"weighting", c.Weighting, "none"},
		{"learning_rate", c.LearningRate, 1e-4},
		{"lora rank", c.LoRAParameters.Rank, 8},
	}
	for _, ck := range checks {
		if ck.got != ck.want {
			t.Errorf("objective: nemo: %s = %v, want %v", ck.name, ck.got, ck.want)
		}
	}
}

func TestObjectiveReferenceIsTheDefaults(t *testing.T) {
	c, err := Load(writeYAML(t, "objective: reference\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	d := Defaults()
	if c.TMin != d.TMin || c.TMax != d.TMax || c.LossPositions != d.LossPositions || c.EOSFill != d.EOSFill ||
		c.SelfConditioning != 0 || c.EncoderLossWeight != 0 || c.LongTargets != LongTruncate {
		t.Fatalf("objective: reference resolved to %+v", c)
	}
}

// A preset replaces defaults only: a key given in the file, the environment or a flag
// keeps its value, whichever layer names the preset.
func TestObjectivePresetYieldsToGivenKeys(t *testing.T) {
	path := writeYAML(t, "objective: nemo\nself_conditioning: 0.25\nloss_positions: corrupted\n")
	t.Setenv("DGTUNE_ENCODER_LOSS_WEIGHT", "0.5")
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	BindFlags(fs)
	if err := fs.Parse([]string{"--long-targets", "truncate", "--t-min", "0.2"}); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path, fs)
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"self_conditioning (file)", c.SelfConditioning, 0.25},
		{"loss_positions (file)", c.LossPositions, "corrupted"},
		{"encoder_loss_weight (env)", c.EncoderLossWeight, 0.5},
		{"long_targets (flag)", c.LongTargets, LongTruncate},
		{"t_min (flag)", c.TMin, 0.2},
		{"t_max (preset)", c.TMax, 1.0},
		{"eos_fill (preset)", c.EOSFill, true},
	}
	for _, ck := range checks {
		if ck.got != ck.want {
			t.Errorf("%s = %v, want %v", ck.name, ck.got, ck.want)
		}
	}

	// The preset itself may come from a flag.
	fs = pflag.NewFlagSet("t", pflag.ContinueOnError)
	BindFlags(fs)
	if err := fs.Parse([]string{"--objective", "nemo"}); err != nil {
		t.Fatal(err)
	}
	if c, err = Load("", fs); err != nil {
		t.Fatal(err)
	}
	if c.SelfConditioning != 0.5 || c.LongTargets != LongRandomBlock {
		t.Fatalf("--objective nemo: self_conditioning %v, long_targets %q", c.SelfConditioning, c.LongTargets)
	}
}

func TestBadObjectiveConfigs(t *testing.T) {
	cases := []struct {
		yaml, want string
	}{
		{"objective: optiq\n", `objective "optiq": want one of nemo, reference`},
		{"long_targets: chunks\n", `long_targets "chunks": want truncate or random_block`},
		{"self_conditioning: 1.5\n", "self_conditioning 1.5: must be a probability in [0, 1]"},
		{"self_conditioning: -0.1\n", "self_conditioning -0.1"},
		{"encoder_loss_weight: -1\n", "encoder_loss_weight -1: must be finite"},
		{"objective: nemo\nself_conditioning: 2\n", "self_conditioning 2"},
		{"self_conditoning: 0.5\n", `unknown key "self_conditoning" (did you mean "self_conditioning"?)`},
	}
	for _, c := range cases {
		_, err := Load(writeYAML(t, c.yaml), nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Load(%q) error = %v, want it to contain %q", c.yaml, err, c.want)
		}
	}
}
