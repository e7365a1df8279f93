package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dgtune/dgtune/config"
	"github.com/dgtune/dgtune/evaluate"
	"github.com/dgtune/dgtune/train"
)

// TestEvalAdapterFile: --adapter takes best_adapters.safetensors or a numbered checkpoint,
// and without --model the base comes from the adapter's base_model (stored absolute by
// train), from any working directory. The file's numbers equal the directory's when it
// holds the same weights.
func TestEvalAdapterFile(t *testing.T) {
	_, dataDir, adapter := fixture(t)
	numbered := filepath.Join(adapter, "0000003_adapters.safetensors")
	if err := os.WriteFile(numbered, readAll(t, filepath.Join(adapter, train.AdapterFile)), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir())
	report := func(path string) evaluate.Report {
		t.Helper()
		jsonPath := filepath.Join(t.TempDir(), "eval.json")
		code, _, stderr := run(t, "--adapter", path, "--data", dataDir, "--json", jsonPath, "--max-canvas", "8", "--eos-fill", "--eval.generate=false")
		if code != 0 {
			t.Fatalf("eval --adapter %s: exit %d: %s", path, code, stderr)
		}
		var rep evaluate.Report
		if err := json.Unmarshal(readAll(t, jsonPath), &rep); err != nil {
			t.Fatal(err)
		}
		return rep
	}
	dirRep, fileRep := report(adapter), report(numbered)
	if fileRep.Adapted == nil || fileRep.Adapted.Loss["0.5"] != dirRep.Adapted.Loss["0.5"] {
		t.Errorf("the numbered file (a copy of adapters.safetensors) scores %v, the directory %v", fileRep.Adapted, dirRep.Adapted)
	}
}

// TestEvalBaseRecordedAbsolute: train stores base_model resolved, so a run started with a
// relative --model is evaluated from elsewhere without --model — here through its
// best_adapters.safetensors.
func TestEvalBaseRecordedAbsolute(t *testing.T) {
	model, dataDir, _ := fixture(t)
	writeJSONL(t, filepath.Join(dataDir, "valid.jsonl"), testRows)
	work := filepath.Dir(model)
	t.Chdir(work)
	cfg := config.Defaults()
	cfg.Model, cfg.Data, cfg.AdapterPath, cfg.Backend = "model", dataDir, "rel-adapter", "go"
	cfg.Iters, cfg.MaxCanvas, cfg.EOSFill = 1, maxCanvas, true
	if _, err := train.Run(t.Context(), cfg, train.Options{}); err != nil {
		t.Fatal(err)
	}
	var ac struct {
		BaseModel string `json:"base_model"`
	}
	if err := json.Unmarshal(readAll(t, filepath.Join(work, "rel-adapter", train.AdapterConfig)), &ac); err != nil {
		t.Fatal(err)
	}
	if ac.BaseModel != model {
		t.Errorf("base_model %q, want the absolute %q", ac.BaseModel, model)
	}
	t.Chdir(t.TempDir())
	code, stdout, stderr := run(t, "--adapter", filepath.Join(work, "rel-adapter", train.BestAdapterFile), "--data", dataDir, "--max-canvas", "8", "--eos-fill", "--eval.generate=false")
	if code != 0 || !strings.Contains(strings.ToUpper(stdout), "ADAPTER") {
		t.Errorf("eval of best_adapters.safetensors from another directory: exit %d: %s", code, stderr)
	}
}

// TestEvalHelp: eval lists its own flags, not the training ones.
func TestEvalHelp(t *testing.T) {
	code, stdout, _ := run(t, "--help")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"--adapter", "--split", "--eval.noise-levels", "--model", "--data", "--max-canvas"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("eval --help lacks %s", want)
		}
	}
	for _, not := range []string{"--learning-rate", "--iters", "--lora-parameters.rank", "--lr-schedule.name", "--save-every", "--resume"} {
		if strings.Contains(stdout, not) {
			t.Errorf("eval --help lists the training flag %s", not)
		}
	}
}

func readAll(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
