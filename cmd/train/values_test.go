package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRefusedValues: values that used to be converted or accepted silently, names that
// are not local directories and data that is not UTF-8 each stop train before anything is
// written, with exit 1 and exactly one line on stderr.
func TestRefusedValues(t *testing.T) {
	f := newFixture(t)
	latin1 := filepath.Join(f.dir, "latin1")
	writeFile(t, filepath.Join(latin1, "train.jsonl"), trainRows+"{\"prompt\": \"caf\xe9?\", \"completion\": \"noir\"}\n")
	cfgPath := filepath.Join(f.dir, "cfg.yaml")
	hubID := "google/diffusiongemma-26b-a4b-it"
	cases := []struct {
		name  string
		extra string   // appended to the config file
		args  []string // after --config
		want  string   // the whole stderr line
	}{
		{"bool", "shuffle: maybe\n", nil, "train: config: " + cfgPath + `:13: shuffle: "maybe": want true or false`},
		{"fraction for a count", "batch_size: 4.7\n", nil, "train: config: " + cfgPath + ":13: batch_size: 4.7: want a whole number"},
		{"negative seed", "", nil, ""}, // replaced below: seed is in the fixture's file
		{"tab", "lora_parameters:\n\trank: 4\n", nil, "train: config: " + cfgPath + ":14: a tab in the indentation (YAML indents with spaces only)"},
		{"num_layers 0", "num_layers: 0\n", nil, "train: config: num_layers 0: want -1 (all layers) or a positive number"},
		{"negative grad_clip", "grad_clip: -1\n", nil, "train: config: grad_clip -1: must not be negative (0 = off)"},
		{"negative max_prompt", "", []string{"--max-prompt", "-3"}, "train: config: max_prompt -3: must not be negative (0 = no limit)"},
		{"val_batches 0", "val_batches: 0\n", nil, "train: config: val_batches 0: want -1 (the whole valid split) or a positive number"},
		{"PEFT r against rank", "r: 16\n", nil, "train: config: " + cfgPath + ": r 16 and lora_parameters.rank 2 disagree; keep one"},
		{"PEFT flags disagree", "", []string{"--r", "4", "--lora-parameters.rank", "8"}, "train: config: --r 4 and --lora-parameters.rank 8 disagree; keep one"},
		{"data file", "", []string{"--data", filepath.Join(f.data, "train.jsonl")},
			"train: data: " + filepath.Join(f.data, "train.jsonl") + " is a file, not a data directory: pass its directory (" + f.data + "), which holds train, valid and test .jsonl or .parquet"},
		{"Hub id", "", []string{"--model", hubID},
			"train: diffusiongemma: model " + hubID + " is not a directory here; it looks like a Hugging Face Hub id, and nothing is downloaded here: download it first (hf download " + hubID + " --local-dir DIR) and pass that directory"},
		{"not UTF-8", "", []string{"--data", latin1},
			"train: data: train.jsonl:4: invalid UTF-8 at byte 16 (0xe9): the file must be UTF-8 text"},
	}
	t.Chdir(f.dir) // the Hub id must not name a directory here
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := f.config(t, tc.extra)
			if tc.name == "negative seed" {
				b := strings.Replace(readFile(t, cfg), "seed: 3\n", "seed: -1\n", 1)
				cfg = writeFile(t, cfg, b)
				tc.want = "train: config: " + cfgPath + ":5: seed: -1: want a whole number ≥ 0"
			}
			out := filepath.Join(f.dir, "out-"+strings.ReplaceAll(tc.name, " ", "-"))
			code, stdout, stderr := runMain(append([]string{"--config", cfg, "--adapter-path", out}, tc.args...)...)
			if code != 1 || stdout != "" {
				t.Errorf("exit %d, stdout %q; want 1 and nothing", code, stdout)
			}
			if got := strings.TrimSuffix(stderr, "\n"); got != tc.want {
				t.Errorf("stderr %q\nwant   %q", got, tc.want)
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Errorf("%s was written (%v)", out, err)
			}
		})
	}
}
