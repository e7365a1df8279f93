package main

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dgtune/dgtune/internal/cli"
	dg "github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
	"github.com/dgtune/dgtune/tokenizer"
	"github.com/dgtune/dgtune/train"
)

// writeTinyModel writes a tiny synthetic checkpoint with a byte-level tokenizer; nan
// makes its final norm weight NaN, so every loss is NaN.
func writeTinyModel(t *testing.T, dir string, nan bool) string {
	t.Helper()
	e := mxtest.Go(t)
	cfg, err := dg.Preset(dg.PresetTiny)
	if err != nil {
		t.Fatal(err)
	}
	w, err := dg.Synthesize(e, cfg, 1, dg.BitsNone)
	if err != nil {
		t.Fatal(err)
	}
	if nan {
		name := dg.DecoderPrefix + ".norm.weight"
		v := w[name].Float32s()
		for i := range v {
			v[i] = float32(math.NaN())
		}
		w[name] = mx.FromFloat32(e, v, w[name].Shape()...)
	}
	tok, err := tokenizer.NewSynthetic(cfg.TextConfig.VocabSize, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := dg.WriteCheckpoint(dir, cfg, w, tok); err != nil {
		t.Fatal(err)
	}
	return dir
}

// retypedModel writes a tiny checkpoint whose config.json claims another model_type.
func retypedModel(t *testing.T, dir, modelType string) string {
	t.Helper()
	writeTinyModel(t, dir, false)
	path := filepath.Join(dir, "config.json")
	var doc map[string]any
	if err := json.Unmarshal([]byte(readFile(t, path)), &doc); err != nil {
		t.Fatal(err)
	}
	doc["model_type"] = modelType
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, string(b))
	return dir
}

func writeFile(t *testing.T, path, content string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

const trainRows = `{"prompt": "sky?", "completion": "blue"}
{"prompt": "grass?", "completion": "green"}
{"prompt": "snow?", "completion": "white"}
`

// fixture is a tiny model, a data directory and the config of a short run on them.
type fixture struct {
	dir, model, data, adapters string
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	dir := t.TempDir()
	f := fixture{dir: dir, model: writeTinyModel(t, filepath.Join(dir, "model"), false),
		data: filepath.Join(dir, "data"), adapters: filepath.Join(dir, "adapters")}
	writeFile(t, filepath.Join(f.data, "train.jsonl"), trainRows)
	writeFile(t, filepath.Join(f.data, "valid.jsonl"), trainRows)
	return f
}

// config writes a YAML config for the fixture followed by extra lines.
func (f fixture) config(t *testing.T, extra string) string {
	t.Helper()
	return writeFile(t, filepath.Join(f.dir, "cfg.yaml"), "model: "+f.model+"\ndata: "+f.data+"\nadapter_path: "+f.adapters+
		"\nbackend: go\nseed: 3\niters: 50\nmax_canvas: 8\nsteps_per_report: 1\nsteps_per_eval: 0\nsave_every: 0\n"+
		"lora_parameters:\n  rank: 2\n"+extra)
}

func runMain(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = cli.Main(newCommand(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestTrainCommand(t *testing.T) {
	f := newFixture(t)
	cfg := f.config(t, "")
	jsonOut := filepath.Join(f.dir, "result.json")
	code, stdout, stderr := runMain("--config", cfg, "--iters", "3", "--json", jsonOut)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.HasPrefix(stdout, "trained 3 steps: final train loss ") || !strings.Contains(stdout, "val loss") {
		t.Errorf("stdout %q", stdout)
	}
	// Not a terminal: plain lines, one per report, after the resolved config.
	for _, want := range []string{"resolved config:", "iters: 3", "trainable parameters:", "iter 1/3  loss ", "iter 3/3  loss ", "iter 0: val loss", "iter 3: val loss"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	var res train.Result
	if err := json.Unmarshal([]byte(readFile(t, jsonOut)), &res); err != nil {
		t.Fatal(err)
	}
	if res.Steps != 3 || res.AdapterPath != f.adapters || res.FinalValLoss == nil {
		t.Errorf("json result %+v", res)
	}
	for _, name := range []string{train.AdapterConfig, train.AdapterFile, train.BestAdapterFile, train.StateFile, train.StateJSON, train.MetricsFile} {
		if _, err := os.Stat(filepath.Join(f.adapters, name)); err != nil {
			t.Errorf("missing %s: %v", name, err)
		}
	}
}

// TestPrecedence: flag > DGTUNE_ environment > file > default.
func TestPrecedence(t *testing.T) {
	f := newFixture(t)
	cfg := f.config(t, "")
	t.Setenv("DGTUNE_ITERS", "2")
	if code, stdout, stderr := runMain("--config", cfg); code != 0 || !strings.HasPrefix(stdout, "trained 2 steps") {
		t.Errorf("env over file: exit %d, %q %s", code, stdout, stderr)
	}
	if code, stdout, stderr := runMain("--config", cfg, "--iters", "1"); code != 0 || !strings.HasPrefix(stdout, "trained 1 steps") {
		t.Errorf("flag over env: exit %d, %q %s", code, stdout, stderr)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestBadInput: every bad input exits 1 with one "train: ..." line naming the problem,
// never a panic.
func TestBadInput(t *testing.T) {
	f := newFixture(t)
	emptyData := filepath.Join(f.dir, "empty")
	writeFile(t, filepath.Join(emptyData, "train.jsonl"), "")
	badData := filepath.Join(f.dir, "bad")
	writeFile(t, filepath.Join(badData, "train.jsonl"), trainRows[:strings.Index(trainRows, "\n")+1]+"\n"+`{"prompt": "x", "completion": }`+"\n")
	nanModel := writeTinyModel(t, filepath.Join(f.dir, "nan"), true)
	gemma4 := retypedModel(t, filepath.Join(f.dir, "gemma4"), "gemma4")
	llama := retypedModel(t, filepath.Join(f.dir, "llama"), "llama")
	cases := []struct {
		name  string
		extra string   // appended to the config file
		args  []string // after --config
		want  string
	}{
		{"unknown key", "learnin_rate: 0.001\n", nil, `unknown key "learnin_rate" (did you mean "learning_rate"?)`},
		{"unknown nested key", "optimizer_config:\n  wieght_decay: 0.1\n", nil, `did you mean "optimizer_config.weight_decay"`},
		{"wrong type", "batch_size: many\n", nil, "batch_size"},
		{"list for a number", "learning_rate: [1, 2]\n", nil, "learning_rate"},
		{"section not a mapping", "eval: 3\n", nil, `"eval" must be a mapping`},
		{"yaml syntax", "seed: [1\n", nil, "cfg.yaml"},
		{"bad choice", "optimizer: lion\n", nil, `optimizer "lion"`},
		{"bad flag value", "", []string{"--iters", "abc"}, `invalid argument "abc"`},
		{"unknown flag", "", []string{"--itres", "3"}, "unknown flag: --itres"},
		{"positional argument", "", []string{"extra"}, "unknown command"},
		{"missing data dir", "", []string{"--data", filepath.Join(f.dir, "nope")}, "nope"},
		{"empty train split", "", []string{"--data", emptyData}, "train.jsonl has no examples"},
		{"malformed jsonl line", "", []string{"--data", badData}, "train.jsonl:3: invalid JSON"},
		{"missing model", "", []string{"--model", filepath.Join(f.dir, "nomodel")}, "nomodel"},
		{"non-finite loss", "", []string{"--model", nanModel, "--iters", "2"}, "non-finite loss"},
		{"gemma4 checkpoint", "", []string{"--model", gemma4}, `model_type "gemma4" is the autoregressive Gemma 4, not DiffusionGemma`},
		{"llama checkpoint", "", []string{"--model", llama}, `model_type "llama" is not DiffusionGemma`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := f.config(t, tc.extra)
			code, stdout, stderr := runMain(append([]string{"--config", cfg, "--adapter-path", filepath.Join(f.dir, "out-"+strings.ReplaceAll(tc.name, " ", "-"))}, tc.args...)...)
			lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
			last := lines[len(lines)-1]
			if code != 1 || stdout != "" {
				t.Errorf("exit %d, stdout %q; want 1 and nothing", code, stdout)
			}
			if !strings.HasPrefix(last, "train: ") || !strings.Contains(last, tc.want) {
				t.Errorf("last stderr line %q, want \"train: ...%s...\"", last, tc.want)
			}
			t.Log(last)
			if strings.Contains(stderr, "internal error") || strings.Contains(stderr, "goroutine") {
				t.Errorf("panic:\n%s", stderr)
			}
		})
	}
	t.Run("missing config file", func(t *testing.T) {
		code, _, stderr := runMain("--config", filepath.Join(f.dir, "none.yaml"))
		if code != 1 || !strings.Contains(stderr, "none.yaml") {
			t.Errorf("exit %d, stderr %q", code, stderr)
		}
	})
}
