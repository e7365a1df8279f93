package config

import (
	"strings"
	"testing"
)

// TestFileValueErrors: a value of the wrong type, or one that would be converted
// silently, is refused in one line naming the file, the line, the key, the value as
// written and what the key wants; so are the values no type can refuse.
func TestFileValueErrors(t *testing.T) {
	cases := []struct {
		yaml, want string // want: the error after "config: FILE"
	}{
		{"shuffle: maybe\n", `:1: shuffle: "maybe": want true or false`},
		{"shuffle: 1\n", `:1: shuffle: 1: want true or false`},
		{"batch_size: 4.7\n", `:1: batch_size: 4.7: want a whole number`},
		{"iters: 10\nseed: -1\n", `:2: seed: -1: want a whole number ≥ 0`},
		{"iters: abc\n", `:1: iters: "abc": want a whole number`},
		{"learning_rate: fast\n", `:1: learning_rate: "fast": want a number`},
		{"lora_parameters:\n  rank: [4]\n", `:2: lora_parameters.rank: a list: want a whole number`},
		{"lora_parameters:\n  keys: {q: 1}\n", `:2: lora_parameters.keys: a mapping: want a list of strings`},
		{"eval:\n  noise_levels: [0.5, high]\n", `:2: eval.noise_levels: a list: want a list of numbers`},
		{"model: [a, b]\n", `:1: model: a list: want a string`},
		{"optimizer_config:\n  adamw:\n    bias_correction: sometimes\n", `:3: optimizer_config.adamw.bias_correction: "sometimes": want true or false`},
		{"r: 4.5\n", `:1: r: 4.5: want a whole number`},
		// Two problems, one line.
		{"batch_size: 4.7\nseed: -1\n", `:1: batch_size: 4.7: want a whole number; FILE:2: seed: -1: want a whole number ≥ 0`},
		// Tabs are named, with their line.
		{"lora_parameters:\n\trank: 4\n", `:2: a tab in the indentation (YAML indents with spaces only)`},
		{"iters: 10\nlora_parameters:\n  rank: 4\n \tscale: 2\n", `:4: a tab in the indentation (YAML indents with spaces only)`},
		// Values of the right type that mean nothing.
		{"num_layers: 0\n", `: num_layers 0: want -1 (all layers) or a positive number`},
		{"num_layers: -3\n", `: num_layers -3: want -1 (all layers) or a positive number`},
		{"grad_clip: -1\n", `: grad_clip -1: must not be negative (0 = off)`},
		{"max_prompt: -5\n", `: max_prompt -5: must not be negative (0 = no limit)`},
		{"val_batches: 0\n", `: val_batches 0: want -1 (the whole valid split) or a positive number`},
		{"val_batches: -2\n", `: val_batches -2: want -1 (the whole valid split) or a positive number`},
		{"early_stopping_patience: -1\n", `: early_stopping_patience -1: must not be negative (0 = off)`},
	}
	for _, c := range cases {
		path := writeYAML(t, c.yaml)
		_, err := Load(path, nil)
		want := "config: " + path + strings.ReplaceAll(c.want, "FILE", path)
		if strings.HasPrefix(c.want, ": ") { // Validate's errors name the key, not the file
			want = "config" + c.want
		}
		if err == nil || err.Error() != want {
			t.Errorf("Load(%q) error = %v\nwant %s", c.yaml, err, want)
		}
	}
}

// TestFileValuesAccepted: what viper read before keeps loading, with the same result.
func TestFileValuesAccepted(t *testing.T) {
	cases := []struct {
		yaml  string
		check func(Config) bool
	}{
		{"batch_size: 4.0\n", func(c Config) bool { return c.BatchSize == 4 }},
		{"iters: 1e3\n", func(c Config) bool { return c.Iters == 1000 }},
		{"learning_rate: \"1e-5\"\n", func(c Config) bool { return c.LearningRate == 1e-5 }}, // PyYAML's reading of 1e-5
		{"learning_rate: 2\n", func(c Config) bool { return c.LearningRate == 2 }},
		{"shuffle: \"false\"\n", func(c Config) bool { return !c.Shuffle }},
		{"seed: 18446744073709551615\n", func(c Config) bool { return c.Seed == 18446744073709551615 }},
		{"lora_parameters:\n  keys: self_attn.q_proj,self_attn.v_proj\n", func(c Config) bool { return len(c.LoRAParameters.Keys) == 2 }},
		{"eval:\n  noise_levels: 0.5\n", func(c Config) bool { return len(c.Eval.NoiseLevels) == 1 && c.Eval.NoiseLevels[0] == 0.5 }},
		{"model:\n", func(c Config) bool { return c.Model == "" }},
		{"num_layers: -1\nval_batches: -1\nmax_prompt: 0\ngrad_clip: 0\n", func(c Config) bool { return c.NumLayers == -1 && c.ValBatches == -1 }},
		{"lora_parameters:\n  rank: 4 \t# a tab after the value is fine\n", func(c Config) bool { return c.LoRAParameters.Rank == 4 }},
	}
	for _, c := range cases {
		got, err := Load(writeYAML(t, c.yaml), nil)
		if err != nil {
			t.Errorf("Load(%q): %v", c.yaml, err)
			continue
		}
		if !c.check(got) {
			t.Errorf("Load(%q) = %+v: not what the file says", c.yaml, got)
		}
	}
}

func TestFirstTabIndent(t *testing.T) {
	for _, c := range []struct {
		text string
		want int
	}{
		{"a: 1\n", 0},
		{"a:\n\tb: 1\n", 2},
		{"a: 1\t# comment\n", 0},
		{"a: 1\n\t\n", 0}, // a blank line of whitespace is not indentation
		{"a:\n  b: 1\n  \tc: 2\n", 3},
	} {
		if got := firstTabIndent([]byte(c.text)); got != c.want {
			t.Errorf("firstTabIndent(%q) = %d, want %d", c.text, got, c.want)
		}
	}
}
