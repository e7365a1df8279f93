package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dgtune/dgtune/config"
	"github.com/dgtune/dgtune/data/chat"
	"github.com/dgtune/dgtune/evaluate"
	"github.com/dgtune/dgtune/internal/cli"
	"github.com/dgtune/dgtune/lora"
	dg "github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/model/diffusiongemma/dgtest"
	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
	"github.com/dgtune/dgtune/objective"
	"github.com/dgtune/dgtune/session"
	"github.com/dgtune/dgtune/tokenizer"
	"github.com/dgtune/dgtune/train"
)

const maxCanvas = 8

var testRows = []struct{ prompt, completion string }{
	{"say hi", "hi there"},
	{"count", "1 2 3 4 5 6 7 8 9"}, // longer than the canvas: truncated to 8 tokens
}

// fixture writes a tiny checkpoint (byte-level synthetic tokenizer), a data directory
// and an adapter trained briefly on it; it returns their paths.
func fixture(t *testing.T) (model, dataDir, adapter string) {
	t.Helper()
	e := mxtest.Go(t)
	dir := t.TempDir()
	model, dataDir, adapter = filepath.Join(dir, "model"), filepath.Join(dir, "data"), filepath.Join(dir, "adapter")
	writeModel(t, e, model, nil)
	writeJSONL(t, filepath.Join(dataDir, "train.jsonl"), testRows[:1])
	writeJSONL(t, filepath.Join(dataDir, "test.jsonl"), testRows)
	cfg := config.Defaults()
	cfg.Model, cfg.Data, cfg.AdapterPath, cfg.Backend = model, dataDir, adapter, "go"
	cfg.Iters, cfg.MaxCanvas, cfg.EOSFill = 3, maxCanvas, true
	cfg.LearningRate = 0.05 // large, so three steps move the adapter visibly
	if _, err := train.Run(context.Background(), cfg, train.Options{}); err != nil {
		t.Fatal(err)
	}
	return model, dataDir, adapter
}

func writeModel(t *testing.T, e mx.Engine, dir string, mutate func(*dg.Config)) {
	t.Helper()
	dgtest.Spec{Preset: dg.PresetTiny, Seed: 2, Bits: dg.BitsNone, Edit: mutate}.Checkpoint(t, e, dir)
}

func writeJSONL(t *testing.T, path string, rows []struct{ prompt, completion string }) {
	t.Helper()
	var b strings.Builder
	for _, r := range rows {
		line, _ := json.Marshal(map[string]string{"prompt": r.prompt, "completion": r.completion})
		b.Write(append(line, '\n'))
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

func run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = cli.Main(newCommand(), append(args, "--backend", "go"), &out, &errb)
	return code, out.String(), errb.String()
}

// recompute scores the test rows at noise level t (the li-th level) the way the eval
// contract says, without the evaluate package: prompt = chat template with generation
// prompt, target = completion ids truncated to the canvas, then <turn|> and <eos> up to
// it (eos_fill); corruption = objective.CorruptAt with key
// mx.Key(DeriveSeed(seed, 101, li, example index, position)) (evaluate's seedNoise = 101);
// loss = Σ CE over corrupted positions / their count over all examples, CE computed in
// float64 from Model.Forward's logits; accuracy = share of them whose argmax is the target.
func recompute(t *testing.T, m *dg.Model, tok *tokenizer.Tokenizer, li int, level float64) (loss, acc float64) {
	t.Helper()
	e := m.Engine
	vocab := m.Config.TextConfig.VocabSize
	turnEnd, _ := tok.TokenID("<turn|>")
	eos, _ := tok.TokenID("<eos>")
	var sum, count, correct float64
	for i, r := range testRows {
		prompt, err := chat.EncodePrompt(tok, []chat.Message{{Role: "user", Content: r.prompt}}, true)
		if err != nil {
			t.Fatal(err)
		}
		target := tok.Encode(r.completion)
		if len(target) > maxCanvas {
			target = target[:maxCanvas]
		}
		if len(target) < maxCanvas {
			target = append(target, turnEnd)
		}
		for len(target) < maxCanvas {
			target = append(target, eos)
		}
		key := mx.Key(e, session.DeriveSeed(0, 101, uint64(li), uint64(i), uint64(i)))
		corr := objective.CorruptAt(key, target, level, vocab)
		logits := m.Forward(mx.FromInt32(e, prompt, 1, len(prompt)), mx.FromInt32(e, corr.Canvas, 1, len(corr.Canvas))).Float32s()
		for p, bad := range corr.Corrupt {
			if !bad {
				continue
			}
			row := logits[p*vocab : (p+1)*vocab]
			top, arg := math.Inf(-1), 0
			for j, v := range row {
				if float64(v) > top {
					top, arg = float64(v), j
				}
			}
			z := 0.0
			for _, v := range row {
				z += math.Exp(float64(v) - top)
			}
			// CE = logsumexp(row) − row[target], with the max factored out of the sum.
			sum += top + math.Log(z) - float64(row[target[p]])
			count++
			if arg == int(target[p]) {
				correct++
			}
		}
	}
	if count == 0 {
		t.Fatalf("t=%g corrupted nothing: pick another level", level)
	}
	return sum / count, correct / count
}

func TestEvalTableAndJSON(t *testing.T) {
	model, dataDir, adapter := fixture(t)
	jsonPath := filepath.Join(t.TempDir(), "eval.json")
	code, stdout, stderr := run(t, "--adapter", adapter, "--data", dataDir, "--json", jsonPath,
		"--max-canvas", "8", "--eos-fill", "--eval.steps", "4")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	// --model came from the adapter's base_model.
	for _, s := range []string{"METRIC", "ADAPTER", "DELTA", "loss @ t=0.5", "accuracy @ t=0.75", "exact match", "token F1",
		"mean denoising steps", "generated tokens/s", "reference: hi there"} {
		if !strings.Contains(strings.ToUpper(stdout), strings.ToUpper(s)) {
			t.Errorf("stdout lacks %q:\n%s", s, stdout)
		}
	}
	var rep evaluate.Report
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Examples != 2 || rep.Adapted == nil || len(rep.Base.Generations) != 2 || len(rep.Rows) != 10 {
		t.Fatalf("report: %d examples, adapter %v, %d generations, %d rows", rep.Examples, rep.Adapted != nil, len(rep.Base.Generations), len(rep.Rows))
	}

	e := mxtest.Go(t)
	tok, err := tokenizer.Load(filepath.Join(model, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := dg.Load(e, model, dg.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f, err := lora.LoadDir(e, adapter)
	if err != nil {
		t.Fatal(err)
	}
	// t = 0.5 is the second default level (li = 1). The JSON went through float64 and
	// encoding/json's shortest round-trip formatting, so only the float32 CE of the
	// command against the float64 one here differs: 1e-5 relative.
	check := func(what string, got map[string]float64, gotAcc map[string]float64) {
		loss, acc := recompute(t, m, tok, 1, 0.5)
		if math.Abs(got["0.5"]-loss) > 1e-5*loss {
			t.Errorf("%s loss @ t=0.5: JSON %v, recomputed %v", what, got["0.5"], loss)
		}
		if gotAcc["0.5"] != acc {
			t.Errorf("%s accuracy @ t=0.5: JSON %v, recomputed %v", what, gotAcc["0.5"], acc)
		}
	}
	check("base", rep.Base.Loss, rep.Base.Accuracy)
	if _, err := lora.Mount(m, f); err != nil {
		t.Fatal(err)
	}
	check("adapter", rep.Adapted.Loss, rep.Adapted.Accuracy)
	if rep.Base.Loss["0.5"] == rep.Adapted.Loss["0.5"] {
		t.Error("the trained adapter did not change the loss: the recomputation cannot tell base from adapter")
	}
	for _, r := range rep.Rows {
		if r.Metric == "loss @ t=0.5" && (*r.Adapter != rep.Adapted.Loss["0.5"] || *r.Delta != rep.Adapted.Loss["0.5"]-rep.Base.Loss["0.5"]) {
			t.Errorf("row %+v disagrees with the metrics", r)
		}
	}
}

func TestEvalPrompt(t *testing.T) {
	model, _, adapter := fixture(t)
	code, stdout, stderr := run(t, "--model", model, "--adapter", adapter, "--prompt", "say hi", "--max-canvas", "8", "--eval.steps", "2")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.HasPrefix(stdout, "base (") || !strings.Contains(stdout, "\nadapter (") {
		t.Errorf("stdout %q, want a base and an adapter generation", stdout)
	}
}

func TestEvalBadInput(t *testing.T) {
	model, dataDir, adapter := fixture(t)
	dir := t.TempDir()
	e := mxtest.Go(t)
	// An adapter for another geometry: trained shapes of a model with intermediate 96.
	other := filepath.Join(dir, "other")
	writeModel(t, e, other, func(c *dg.Config) { c.TextConfig.IntermediateSize = 96 })
	om, err := dg.Load(e, other, dg.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a, err := lora.Attach(om, lora.Config{Rank: 2, Scale: 2}, 1)
	if err != nil {
		t.Fatal(err)
	}
	otherAd := filepath.Join(dir, "other-adapter")
	if err := a.File(other).Write(otherAd); err != nil {
		t.Fatal(err)
	}
	emptyData := filepath.Join(dir, "empty")
	writeJSONL(t, filepath.Join(emptyData, "train.jsonl"), testRows[:1])
	writeJSONL(t, filepath.Join(emptyData, "test.jsonl"), nil)
	gemma4 := filepath.Join(dir, "gemma4")
	writeModel(t, e, gemma4, nil)
	cj := filepath.Join(gemma4, "config.json")
	b, err := os.ReadFile(cj)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	doc["model_type"] = "gemma4"
	if b, err = json.Marshal(doc); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cj, b, 0o644); err != nil {
		t.Fatal(err)
	}
	noTest := filepath.Join(dir, "notest")
	writeJSONL(t, filepath.Join(noTest, "train.jsonl"), testRows[:1])

	tests := []struct {
		name   string
		args   []string
		stderr string
	}{
		{"another geometry", []string{"--model", model, "--adapter", otherAd, "--data", dataDir},
			"mlp.gate_proj.lora_b: adapter [2 96], model [2 128]"},
		{"empty test split", []string{"--model", model, "--data", emptyData}, filepath.Join(emptyData, "test.jsonl") + " has no examples"},
		{"no test split", []string{"--model", model, "--data", noTest}, "no test.jsonl or test.parquet"},
		{"gemma4 checkpoint", []string{"--model", gemma4, "--data", dataDir}, `model_type "gemma4" is the autoregressive Gemma 4`},
		{"missing model", []string{"--model", filepath.Join(dir, "nope"), "--data", dataDir}, "model directory " + filepath.Join(dir, "nope") + " does not exist"},
		{"missing adapter", []string{"--model", model, "--adapter", filepath.Join(dir, "nope"), "--data", dataDir},
			`--adapter "` + filepath.Join(dir, "nope") + `": not found`},
		{"empty adapter directory", []string{"--model", model, "--adapter", emptyData, "--data", dataDir},
			"neither adapters.safetensors nor adapter_model.safetensors"},
		{"adapter file not safetensors", []string{"--model", model, "--adapter", filepath.Join(emptyData, "train.jsonl"), "--data", dataDir},
			"want an adapter directory or a .safetensors adapter file"},
		{"missing data", []string{"--model", model, "--adapter", adapter, "--data", filepath.Join(dir, "nope")}, "not found"},
		{"no model", []string{"--data", dataDir}, "no model"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			jsonPath := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".json")
			code, stdout, stderr := run(t, append(tc.args, "--json", jsonPath)...)
			if code != 1 {
				t.Fatalf("exit %d, want 1 (stderr %q)", code, stderr)
			}
			last := stderr[strings.LastIndex(strings.TrimSuffix(stderr, "\n"), "\n")+1:]
			if !strings.HasPrefix(last, "eval: ") || !strings.Contains(last, tc.stderr) {
				t.Errorf("stderr ends %q, want one line \"eval: ...\" containing %q", last, tc.stderr)
			}
			if stdout != "" {
				t.Errorf("stdout %q, want nothing", stdout)
			}
			if _, err := os.Stat(jsonPath); err == nil {
				t.Error("--json written although eval failed")
			}
		})
	}
}

// eval reads only the split it scores: a directory with test.jsonl alone works, and so
// does one whose train.jsonl is broken.
func TestEvalOnlyItsSplit(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "model")
	writeModel(t, mxtest.Go(t), model, nil)
	onlyTest := filepath.Join(dir, "only-test")
	writeJSONL(t, filepath.Join(onlyTest, "test.jsonl"), testRows)
	brokenTrain := filepath.Join(dir, "broken-train")
	writeJSONL(t, filepath.Join(brokenTrain, "valid.jsonl"), testRows[:1])
	if err := os.WriteFile(filepath.Join(brokenTrain, "train.jsonl"), []byte("not json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ data, split string }{{onlyTest, "test"}, {brokenTrain, "valid"}} {
		code, stdout, stderr := run(t, "--model", model, "--data", tc.data, "--split", tc.split,
			"--max-canvas", "8", "--eval.generate=false")
		if code != 0 {
			t.Fatalf("%s --split %s: exit %d: %s", tc.data, tc.split, code, stderr)
		}
		if !strings.Contains(stdout, "loss @ t=0.5") {
			t.Errorf("%s: stdout lacks the loss row:\n%s", tc.data, stdout)
		}
		if want := "evaluating " + map[string]string{"test": "2 test", "valid": "1 valid"}[tc.split]; !strings.Contains(stderr, want) {
			t.Errorf("%s: stderr lacks %q:\n%s", tc.data, want, stderr)
		}
	}
}
