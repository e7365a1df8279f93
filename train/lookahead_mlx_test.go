//go:build mlx

package train

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dgtune/dgtune/config"
)

// TestLookaheadMatchesSynchronousMLX: on the mlx engine a step is left running while
// the next is built, unless a report, evaluation or checkpoint needs it (inflight.go).
// Reporting every 3 steps, evaluating and saving every 4, over 7 steps of 2 micro-batches
// with a warm-up and a cosine schedule, uncompiled and compiled, the run logs the synchronous run's losses and writes its
// checkpoints byte for byte.
func TestLookaheadMatchesSynchronousMLX(t *testing.T) {
	for _, compile := range []bool{false, true} {
		dir := t.TempDir()
		cfg := resumeConfig(t, dir)
		cfg.Backend = "mlx"
		cfg.Compile = compile
		cfg.Iters, cfg.StepsPerReport, cfg.GradAccumulationSteps = 7, 3, 2
		// A rate that changes every step, so a step recorded with another's shows.
		cfg.LRSchedule = config.LRSchedule{Name: "cosine_decay", Arguments: []float64{1e-2, 7}, Warmup: 2}
		paths := map[bool]string{}
		for _, sync := range []bool{true, false} {
			c := cfg
			c.AdapterPath = filepath.Join(dir, map[bool]string{true: "sync", false: "lookahead"}[sync])
			if _, err := Run(context.Background(), c, Options{Synchronous: sync}); err != nil {
				t.Fatalf("compile %v, synchronous %v: %v", compile, sync, err)
			}
			paths[sync] = c.AdapterPath
		}
		want, got := lossSeq(readMetrics(t, paths[true])), lossSeq(readMetrics(t, paths[false]))
		if len(want) < 4 || strings.Join(want, "\n") != strings.Join(got, "\n") {
			t.Errorf("compile %v: metrics\n%s\nsynchronous, with lookahead\n%s", compile, strings.Join(want, "\n"), strings.Join(got, "\n"))
		}
		for _, f := range []string{AdapterFile, BestAdapterFile, StateFile, "0000004_" + AdapterFile} {
			a, b := readBytes(t, filepath.Join(paths[true], f)), readBytes(t, filepath.Join(paths[false], f))
			if !bytes.Equal(a, b) {
				t.Errorf("compile %v: %s differs with lookahead", compile, f)
			}
		}
	}
}

// TestLookaheadNonFiniteMLX: a NaN loss found while the next step is being built still
// stops the run at its own step, with nothing saved.
func TestLookaheadNonFiniteMLX(t *testing.T) {
	dir := t.TempDir()
	cfg := resumeConfig(t, dir)
	cfg.Backend = "mlx"
	cfg.Model = nanModel(t, filepath.Join(dir, "nan"))
	cfg.Iters, cfg.StepsPerReport, cfg.StepsPerEval, cfg.SaveEvery = 6, 5, 0, 0
	if err := os.Remove(filepath.Join(dir, "data", "valid.jsonl")); err != nil {
		t.Fatal(err)
	}
	_, err := Run(context.Background(), cfg, Options{})
	if !errors.Is(err, ErrNonFinite) || !strings.Contains(err.Error(), "non-finite loss at step 1 ") {
		t.Fatalf("error %v, want non-finite loss at step 1", err)
	}
	if _, err := os.Stat(filepath.Join(cfg.AdapterPath, AdapterFile)); !os.IsNotExist(err) {
		t.Errorf("a run that never finished a step wrote %s", AdapterFile)
	}
}
