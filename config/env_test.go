package config

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

func TestEnvName(t *testing.T) {
	for key, want := range map[string]string{
		"learning_rate":        "DGTUNE_LEARNING_RATE",
		"lora_parameters.rank": "DGTUNE_LORA_PARAMETERS_RANK",
		"eval.noise_levels":    "DGTUNE_EVAL_NOISE_LEVELS",
	} {
		if got := EnvName(key); got != want {
			t.Errorf("EnvName(%q) = %q, want %q", key, got, want)
		}
	}
}

// TestCheckEnv: a DGTUNE_ variable that names no key, or whose value does not parse as
// its key's type, is an error naming the variable (and for a typo the nearest variable);
// other variables, good values and empty ones (viper treats them as unset) pass.
func TestCheckEnv(t *testing.T) {
	good := []string{"PATH=/bin", "DGTUNE_ITERS=12", "DGTUNE_LEARNING_RATE=1e-4", "DGTUNE_SHUFFLE=false",
		"DGTUNE_SEED=7", "DGTUNE_EVAL_NOISE_LEVELS=0.25,0.5", "DGTUNE_LORA_PARAMETERS_KEYS=self_attn.q_proj,mlp.up_proj",
		"DGTUNE_BATCH_SIZE=", "DGTUNE_MODEL=/m"}
	if err := checkEnv(good); err != nil {
		t.Errorf("checkEnv(good) = %v", err)
	}
	cases := []struct {
		env  string
		want []string
	}{
		{"DGTUNE_LERNING_RATE=1", []string{"DGTUNE_LERNING_RATE is not a setting", "did you mean DGTUNE_LEARNING_RATE?"}},
		{"DGTUNE_LORA_RANK=4", []string{"DGTUNE_LORA_RANK is not a setting"}},
		{"DGTUNE_ITERS=abc", []string{`DGTUNE_ITERS="abc": iters wants a whole number`}},
		{"DGTUNE_ITERS=1.5", []string{`DGTUNE_ITERS="1.5": iters wants a whole number`}},
		{"DGTUNE_SEED=-1", []string{`DGTUNE_SEED="-1": seed wants a non-negative whole number`}},
		{"DGTUNE_LEARNING_RATE=fast", []string{`DGTUNE_LEARNING_RATE="fast": learning_rate wants a number`}},
		{"DGTUNE_SHUFFLE=maybe", []string{`DGTUNE_SHUFFLE="maybe": shuffle wants true or false`}},
		{"DGTUNE_EVAL_NOISE_LEVELS=0.25,x", []string{`eval.noise_levels item 2 "x": wants a number`}},
	}
	for _, tc := range cases {
		err := checkEnv([]string{"PATH=/bin", tc.env})
		if err == nil {
			t.Errorf("checkEnv(%s) succeeded", tc.env)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("checkEnv(%s) = %q, want it to contain %q", tc.env, err, w)
			}
		}
	}
	// Every problem is listed, in one error.
	err := checkEnv([]string{"DGTUNE_ITERS=x", "DGTUNE_ITRES=3"})
	if err == nil || !strings.Contains(err.Error(), "DGTUNE_ITERS=") || !strings.Contains(err.Error(), "DGTUNE_ITRES is not") {
		t.Errorf("two problems: %v", err)
	}
}

// TestLoadChecksEnv: Load reports a bad environment (it does not silently ignore a typo).
func TestLoadChecksEnv(t *testing.T) {
	t.Setenv("DGTUNE_ITRES", "5")
	if _, err := Load("", nil); err == nil || !strings.Contains(err.Error(), "DGTUNE_ITRES is not a setting (did you mean DGTUNE_ITERS?)") {
		t.Errorf("Load with DGTUNE_ITRES: %v", err)
	}
}

func TestSuggest(t *testing.T) {
	names := []string{"iters", "epochs", "learning-rate", "lora-parameters.rank", "seed"}
	for in, want := range map[string]string{
		"itres": "iters", "learning_rate": "learning-rate", "lora-parameters.rnak": "lora-parameters.rank", "sed": "seed",
	} {
		if got, ok := Suggest(in, names); !ok || got != want {
			t.Errorf("Suggest(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
	for _, far := range []string{"colour", "x", "batch-size"} {
		if got, ok := Suggest(far, names); ok {
			t.Errorf("Suggest(%q) = %q, want no suggestion", far, got)
		}
	}
}

// TestCommandFlags: train takes every key as a flag; eval and export only their own, and
// keys they do not take are still read from the file.
func TestCommandFlags(t *testing.T) {
	flags := func(command string) *pflag.FlagSet {
		fs := pflag.NewFlagSet(command, pflag.ContinueOnError)
		BindFlagsFor(fs, command)
		return fs
	}
	if n, want := countFlags(flags(CommandTrain)), len(Keys())+len(peftAliases); n != want {
		t.Errorf("train has %d config flags, want %d (every key and the PEFT names)", n, want)
	}
	for _, tc := range []struct {
		command  string
		has, not []string
	}{
		{CommandEval, []string{"model", "data", "eval.split", "eval.noise-levels", "max-canvas", "eos-fill", "seed"},
			[]string{"learning-rate", "iters", "lora-parameters.rank", "adapter-path", "lr-schedule.name", "r", "lora-alpha"}},
		{CommandExport, []string{"model", "backend", "seed", "adapter-path"},
			[]string{"data", "eval.split", "learning-rate", "max-canvas"}},
	} {
		fs := flags(tc.command)
		for _, h := range tc.has {
			if fs.Lookup(h) == nil {
				t.Errorf("%s lacks --%s", tc.command, h)
			}
		}
		for _, n := range tc.not {
			if fs.Lookup(n) != nil {
				t.Errorf("%s has the training-only --%s", tc.command, n)
			}
		}
		uses := 0
		for _, k := range Keys() {
			if Uses(tc.command, k) {
				uses++
			}
		}
		if uses != countFlags(fs) {
			t.Errorf("%s uses %d keys, %d flags bound", tc.command, uses, countFlags(fs))
		}
	}
	path := writeYAML(t, "iters: 7\nmodel: /m\n")
	fs := flags(CommandEval)
	if err := fs.Parse([]string{"--model", "/n"}); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path, fs)
	if err != nil {
		t.Fatal(err)
	}
	if c.Iters != 7 || c.Model != "/n" {
		t.Errorf("eval's config: iters %d (from the file), model %q (from the flag); want 7 and /n", c.Iters, c.Model)
	}
}

func countFlags(fs *pflag.FlagSet) int {
	n := 0
	fs.VisitAll(func(*pflag.Flag) { n++ })
	return n
}
