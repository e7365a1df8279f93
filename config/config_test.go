package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

func writeYAML(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPrecedence(t *testing.T) {
	path := writeYAML(t, "learning_rate: 0.001\niters: 50\nbatch_size: 2\nlora_parameters:\n  rank: 4\n")
	t.Setenv("DGTUNE_ITERS", "70")
	t.Setenv("DGTUNE_LORA_PARAMETERS_SCALE", "2.5")
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	BindFlags(fs)
	if err := fs.Parse([]string{"--batch-size", "3", "--lora-parameters.rank", "16"}); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path, fs)
	if err != nil {
		t.Fatal(err)
	}
	// flag > env > file > default, key by key.
	checks := []struct {
		name      string
		got, want any
	}{
		{"learning_rate (file)", c.LearningRate, 0.001},
		{"iters (env over file)", c.Iters, 70},
		{"batch_size (flag over file)", c.BatchSize, 3},
		{"lora rank (flag over file)", c.LoRAParameters.Rank, 16},
		{"lora scale (env over default)", c.LoRAParameters.Scale, 2.5},
		{"optimizer (default)", c.Optimizer, "adamw"},
		{"steps_per_report (default)", c.StepsPerReport, 10},
	}
	for _, ck := range checks {
		if ck.got != ck.want {
			t.Errorf("%s = %v, want %v", ck.name, ck.got, ck.want)
		}
	}
}

func TestBadConfigs(t *testing.T) {
	cases := []struct {
		yaml, want string
	}{
		{"lerning_rate: 0.1\n", `unknown key "lerning_rate" (did you mean "learning_rate"?)`},
		{"lora_parameters:\n  rnak: 4\n", `unknown key "lora_parameters.rnak" (did you mean "lora_parameters.rank"?)`},
		{"iters: lots\n", "iters"},
		{"iters: [1\n", "yaml"},
		{"backend: tpu\n", `backend "tpu": want one of auto, go, mlx`},
		{"lora_parameters: 3\n", `"lora_parameters" must be a mapping`},
		{"batch_size: 0\n", "batch_size 0"},
		{"t_min: 1.5\n", "t_min 1.5"},
		{"fine_tune_type: full\ngrad_checkpoint: true\n", "grad_checkpoint: needs fine_tune_type lora"},
		{"distributed: jaccl\n", `distributed "jaccl": want one of ring, nccl, mpi, any`},
		{"distributed_timeout: 0\n", "distributed_timeout 0: must be at least 1 second"},
	}
	for _, c := range cases {
		_, err := Load(writeYAML(t, c.yaml), nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Load(%q) error = %v, want it to contain %q", c.yaml, err, c.want)
		}
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.yaml"), nil); err == nil {
		t.Error("missing file: no error")
	}
}

// TestDistributedBackends: every backend MLX's distributed layer offers dgtune is a
// value of distributed, read as written.
func TestDistributedBackends(t *testing.T) {
	for _, v := range []string{"ring", "nccl", "mpi", "any"} {
		c, err := Load(writeYAML(t, "distributed: "+v+"\n"), nil)
		if err != nil || c.Distributed != v {
			t.Errorf("distributed: %s: Load = %q, %v", v, c.Distributed, err)
		}
	}
}

func TestEveryKeyHasAFlagAndHelp(t *testing.T) {
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	BindFlags(fs)
	for _, k := range keys() {
		f := fs.Lookup(FlagName(k.path))
		if f == nil {
			t.Errorf("key %s has no flag", k.path)
			continue
		}
		if f.Usage == "" {
			t.Errorf("flag --%s has no help", f.Name)
		}
	}
}

// The shipped recipe must load and document every key.
func TestShippedRecipe(t *testing.T) {
	c, err := Load("../configs/lora.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.LoRAParameters.Rank != 8 || c.LoRAParameters.Scale != 8 || c.LearningRate != 1e-4 {
		t.Fatalf("recipe = rank %d scale %g lr %g, want optiq's 8, 8, 1e-4", c.LoRAParameters.Rank, c.LoRAParameters.Scale, c.LearningRate)
	}
	raw, _ := os.ReadFile("../configs/lora.yaml")
	for _, k := range Keys() {
		last := k[strings.LastIndex(k, ".")+1:]
		if !strings.Contains(string(raw), last+":") {
			t.Errorf("configs/lora.yaml does not document %s", k)
		}
	}
}
