package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// `train --objective nemo` resolves NeMo's preset (printed in the resolved config), and a
// run split in two by --resume ends with the same adapter bytes as one run.
func TestObjectiveNeMoResume(t *testing.T) {
	f := newFixture(t)
	cfg := f.config(t, "objective: nemo\n")
	code, _, stderr := runMain("--config", cfg, "--iters", "6", "--max-canvas", "2")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"objective: nemo", "self_conditioning: 0.5", "encoder_loss_weight: 1", "long_targets: random_block", "loss_positions: all", "t_min: 0.001"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("resolved config lacks %q", want)
		}
	}
	straight, err := os.ReadFile(filepath.Join(f.adapters, "adapters.safetensors"))
	if err != nil {
		t.Fatal(err)
	}

	split := filepath.Join(f.dir, "split")
	if code, _, stderr := runMain("--config", cfg, "--adapter-path", split, "--iters", "3", "--max-canvas", "2"); code != 0 {
		t.Fatalf("first half: exit %d: %s", code, stderr)
	}
	code, _, stderr = runMain("--config", cfg, "--adapter-path", split, "--iters", "6", "--max-canvas", "2", "--resume")
	if code != 0 || !strings.Contains(stderr, "continuing from step 3") {
		t.Fatalf("second half: exit %d: %s", code, stderr)
	}
	got, err := os.ReadFile(filepath.Join(split, "adapters.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, straight) {
		t.Error("the resumed run's adapter differs from the uninterrupted run's")
	}
}
