package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dgtune/dgtune/config"
	"github.com/dgtune/dgtune/evaluate"
	"github.com/dgtune/dgtune/lora"
	dg "github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/mx/mxtest"
	"github.com/dgtune/dgtune/train"
)

func readReport(t *testing.T, path string) evaluate.Report {
	t.Helper()
	var rep evaluate.Report
	if err := json.Unmarshal(readAll(t, path), &rep); err != nil {
		t.Fatal(err)
	}
	return rep
}

func stderrLines(s string) []string { return strings.Split(strings.TrimSuffix(s, "\n"), "\n") }

func hasLine(lines []string, want string) bool {
	for _, l := range lines {
		if l == want {
			return true
		}
	}
	return false
}

// TestEvalInheritsTrainingSettings: without --config, eval scores with the data, canvas and
// eos_fill the adapter was trained with (it scored with eval's defaults before, silently),
// says so, and says which flag or file overrides them.
func TestEvalInheritsTrainingSettings(t *testing.T) {
	model, dataDir, adapter := fixture(t)
	from := filepath.Join(adapter, lora.ConfigFile)
	dir := t.TempDir()
	score := func(args ...string) (evaluate.Report, []string) {
		t.Helper()
		jsonPath := filepath.Join(dir, "r.json")
		code, _, stderr := run(t, append([]string{"--adapter", adapter, "--eval.generate=false", "--json", jsonPath}, args...)...)
		if code != 0 {
			t.Fatalf("eval %q: exit %d: %s", args, code, stderr)
		}
		return readReport(t, jsonPath), stderrLines(stderr)
	}
	inherited, lines := score()
	if want := "eval: settings the adapter was trained with (" + from + "): data " + dataDir + ", eos_fill true, max_canvas 8"; !hasLine(lines, want) {
		t.Errorf("stderr lacks %q:\n%s", want, strings.Join(lines, "\n"))
	}
	explicit, _ := score("--model", model, "--data", dataDir, "--max-canvas", "8", "--eos-fill")
	defaults, _ := score("--max-canvas", "256", "--eos-fill=false")
	if inherited.Base.Loss["0.5"] != explicit.Base.Loss["0.5"] || inherited.Adapted.Loss["0.5"] != explicit.Adapted.Loss["0.5"] {
		t.Errorf("inherited settings score %v / %v, the same settings given explicitly %v / %v",
			inherited.Base.Loss, inherited.Adapted.Loss, explicit.Base.Loss, explicit.Adapted.Loss)
	}
	if defaults.Adapted.Loss["0.5"] == inherited.Adapted.Loss["0.5"] {
		t.Errorf("eval's defaults score the same as the trained settings (%v): the test cannot tell them apart", defaults.Adapted.Loss)
	}

	_, lines = score("--max-canvas", "16")
	if want := "eval: overriding the adapter's settings: max_canvas 16 from --max-canvas (trained with 8)"; !hasLine(lines, want) {
		t.Errorf("stderr lacks %q:\n%s", want, strings.Join(lines, "\n"))
	}
	file := filepath.Join(dir, "eval.yaml")
	if err := os.WriteFile(file, []byte("eos_fill: false\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, lines = score("--config", file)
	if want := "eval: overriding the adapter's settings: eos_fill false from " + file + " (trained with true)"; !hasLine(lines, want) {
		t.Errorf("stderr lacks %q:\n%s", want, strings.Join(lines, "\n"))
	}
	t.Setenv("DGTUNE_MAX_CANVAS", "12")
	_, lines = score()
	if want := "eval: overriding the adapter's settings: max_canvas 12 from DGTUNE_MAX_CANVAS (trained with 8)"; !hasLine(lines, want) {
		t.Errorf("stderr lacks %q:\n%s", want, strings.Join(lines, "\n"))
	}
	os.Unsetenv("DGTUNE_MAX_CANVAS")

	// An adapter that records no training settings (PEFT's, other tools') says so.
	var ac map[string]any
	if err := json.Unmarshal(readAll(t, from), &ac); err != nil {
		t.Fatal(err)
	}
	delete(ac, "training")
	bare := filepath.Join(dir, "bare")
	if err := os.MkdirAll(bare, 0o755); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(ac)
	os.WriteFile(filepath.Join(bare, lora.ConfigFile), b, 0o644)
	os.WriteFile(filepath.Join(bare, train.AdapterFile), readAll(t, filepath.Join(adapter, train.AdapterFile)), 0o644)
	code, _, stderr := run(t, "--adapter", bare, "--data", dataDir, "--eval.generate=false")
	if want := "eval: the adapter records no training settings (no \"training\" in " + filepath.Join(bare, lora.ConfigFile) + "): the config's and eval's defaults apply"; code != 0 || !hasLine(stderrLines(stderr), want) {
		t.Errorf("exit %d, stderr lacks %q:\n%s", code, want, stderr)
	}
}

// TestEvalAllCheckpoints scores every numbered checkpoint of a run and its final adapter,
// in step order, on the same corruptions, and names the one with the lowest mean loss.
func TestEvalAllCheckpoints(t *testing.T) {
	model, dataDir, _ := fixture(t)
	runDir := filepath.Join(t.TempDir(), "run")
	cfg := config.Defaults()
	cfg.Model, cfg.Data, cfg.AdapterPath, cfg.Backend = model, dataDir, runDir, "go"
	cfg.Iters, cfg.SaveEvery, cfg.MaxCanvas, cfg.EOSFill, cfg.LearningRate = 3, 1, maxCanvas, true, 0.05
	if _, err := train.Run(context.Background(), cfg, train.Options{}); err != nil {
		t.Fatal(err)
	}
	jsonPath := filepath.Join(t.TempDir(), "all.json")
	code, stdout, stderr := run(t, "--adapter", runDir, "--all-checkpoints", "--eval.generate=false", "--json", jsonPath)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	rep := readReport(t, jsonPath)
	var files []string
	for _, c := range rep.Checkpoints {
		files = append(files, c.File)
	}
	if got, want := strings.Join(files, " "), "0000001_adapters.safetensors 0000002_adapters.safetensors 0000003_adapters.safetensors adapters.safetensors"; got != want {
		t.Fatalf("checkpoints %s, want %s", got, want)
	}
	best := 0
	for i, c := range rep.Checkpoints {
		if evaluate.MeanLoss(c.Metrics) < evaluate.MeanLoss(rep.Checkpoints[best].Metrics) {
			best = i
		}
	}
	if rep.BestCheckpoint != files[best] {
		t.Errorf("best %s, want %s (lowest mean loss)", rep.BestCheckpoint, files[best])
	}
	// The final adapter is the last numbered one: the same weights, the same numbers.
	if a, b := rep.Checkpoints[2].Metrics.Loss, rep.Checkpoints[3].Metrics.Loss; a["0.5"] != b["0.5"] {
		t.Errorf("0000003 scores %v, adapters.safetensors %v", a, b)
	}
	// Each checkpoint scores as eval of that file alone does.
	one := filepath.Join(t.TempDir(), "one.json")
	if code, _, stderr := run(t, "--adapter", filepath.Join(runDir, files[0]), "--eval.generate=false", "--json", one); code != 0 {
		t.Fatalf("eval of %s: %s", files[0], stderr)
	}
	if a, b := readReport(t, one).Adapted.Loss, rep.Checkpoints[0].Metrics.Loss; a["0.5"] != b["0.5"] {
		t.Errorf("%s alone scores %v, within --all-checkpoints %v", files[0], a, b)
	}
	step := map[int]string{0: "step 1", 1: "step 2", 2: "step 3", 3: "the final adapter"}[best]
	wantBest := "best: " + filepath.Join(runDir, files[best]) + " (" + step + "): mean loss "
	if !strings.Contains(stdout, "\n"+wantBest) || !strings.Contains(stdout, "checkpoint (2 examples)") {
		t.Errorf("stdout lacks %q and the example count:\n%s", wantBest, stdout)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--all-checkpoints", "--model", model, "--data", dataDir}, "eval: --all-checkpoints needs --adapter DIR, the run's adapter_path"},
		{[]string{"--all-checkpoints", "--adapter", filepath.Join(runDir, files[0])}, "eval: --all-checkpoints needs --adapter DIR, the run's directory, not the file " + filepath.Join(runDir, files[0])},
		{[]string{"--all-checkpoints", "--adapter", dataDir}, "eval: --all-checkpoints: " + dataDir + " holds no NNNNNNN_adapters.safetensors nor adapters.safetensors"},
	} {
		jp := filepath.Join(t.TempDir(), "x.json")
		code, stdout, stderr := run(t, append(tc.args, "--json", jp)...)
		lines := stderrLines(stderr)
		if code != 1 || stdout != "" || lines[len(lines)-1] != tc.want {
			t.Errorf("eval %q: exit %d, stdout %q, stderr %q; want 1 and %q", tc.args, code, stdout, stderr, tc.want)
		}
		if _, err := os.Stat(jp); !os.IsNotExist(err) {
			t.Errorf("eval %q wrote --json", tc.args)
		}
	}
}

// TestEvalAdapterMismatchLine: an adapter from another base is one short line naming the
// base it was trained on and the first differing shape.
func TestEvalAdapterMismatchLine(t *testing.T) {
	model, dataDir, _ := fixture(t)
	e := mxtest.Go(t)
	dir := t.TempDir()
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
	jp := filepath.Join(dir, "x.json")
	code, stdout, stderr := run(t, "--model", model, "--adapter", otherAd, "--data", dataDir, "--json", jp)
	want := "eval: lora: mount: adapter does not fit the model: the adapter was trained on " + other +
		"; 6 of 13 modules differ at rank 2, the first model.decoder.layers.0.mlp.gate_proj.lora_b: adapter [2 96], model [2 128]"
	lines := stderrLines(stderr)
	if code != 1 || stdout != "" || lines[len(lines)-1] != want {
		t.Errorf("exit %d, stdout %q, last stderr line\n%q\nwant\n%q", code, stdout, lines[len(lines)-1], want)
	}
	if _, err := os.Stat(jp); !os.IsNotExist(err) {
		t.Error("--json written")
	}
}
