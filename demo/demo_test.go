// Package demo_test runs the embedded demo end to end: LoRA-tune the committed tiny base
// on the shift task with configs/tiny.yaml (shortened), then check that the adapter beats
// the base on exact match.
package demo_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/dgtune/dgtune/config"
	"github.com/dgtune/dgtune/evaluate"
	"github.com/dgtune/dgtune/lora"
	"github.com/dgtune/dgtune/session"
	"github.com/dgtune/dgtune/train"
)

func TestDemoAdapterBeatsBase(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end demo")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(filepath.Join(root, "configs", "tiny.yaml"), nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Model = filepath.Join(root, cfg.Model)
	cfg.Data = filepath.Join(root, cfg.Data)
	cfg.AdapterPath = t.TempDir()
	cfg.Iters = 150
	cfg.StepsPerEval = 0
	cfg.ValBatches = 2
	cfg.SaveEvery = 0
	cfg.Eval.MaxExamples = 24
	if _, err := train.Run(context.Background(), cfg, train.Options{Log: io.Discard}); err != nil {
		t.Fatal(err)
	}
	s, err := session.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.LoadData(); err != nil {
		t.Fatal(err)
	}
	cases, err := evaluate.Cases(s, s.Dataset.Test, cfg.Eval.MaxExamples)
	if err != nil {
		t.Fatal(err)
	}
	ev := &evaluate.Evaluator{Session: s, Config: cfg, Cases: cases, Log: io.Discard}
	base, err := ev.Run("base", true)
	if err != nil {
		t.Fatal(err)
	}
	f, err := lora.LoadDir(s.Engine, cfg.AdapterPath)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lora.Mount(s.Model, f); err != nil {
		t.Fatal(err)
	}
	adapted, err := ev.Run("adapter", true)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("exact match: base %.3f, adapter %.3f", *base.ExactMatch, *adapted.ExactMatch)
	// The base was pretrained to copy, so on shift it scores (near) zero; the adapter must
	// learn the task, not merely edge past the base.
	if *base.ExactMatch > 0.1 {
		t.Errorf("base exact match %.3f on the shift task, want near 0", *base.ExactMatch)
	}
	if *adapted.ExactMatch < 0.7 {
		t.Errorf("adapter exact match %.3f, want ≥ 0.7", *adapted.ExactMatch)
	}
	if _, err := os.Stat(filepath.Join(cfg.AdapterPath, train.AdapterFile)); err != nil {
		t.Error(err)
	}
}
