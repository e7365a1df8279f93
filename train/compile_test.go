package train

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"testing"

	dg "github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
)

// compiledAgainstUncompiled trains the same run with and without compile: true on the
// backend and checks the losses and adapters agree up to summation order (the compiled
// step scores every canvas row with its 0/1 weight instead of gathering the scored ones).
func compiledAgainstUncompiled(t *testing.T, backend, bits string) {
	t.Helper()
	dir := t.TempDir()
	cfg := resumeConfig(t, dir)
	cfg.Backend = backend
	cfg.Model = writeTinyModel(t, filepath.Join(dir, "model-"+bits), bits, nil)
	cfg.Iters, cfg.SaveEvery = 6, 0
	runs := map[bool]string{}
	for _, compile := range []bool{false, true} {
		c := cfg
		c.Compile = compile
		c.AdapterPath = filepath.Join(dir, map[bool]string{false: "plain", true: "compiled"}[compile])
		if _, err := Run(context.Background(), c, Options{}); err != nil {
			t.Fatalf("compile %v: %v", compile, err)
		}
		runs[compile] = c.AdapterPath
	}
	plain, compiled := readMetrics(t, runs[false]), readMetrics(t, runs[true])
	if len(plain) != len(compiled) {
		t.Fatalf("%d metrics lines uncompiled, %d compiled", len(plain), len(compiled))
	}
	// The first two losses (the forward, then the first update's effect) agree to rounding,
	// 1e-6; later losses to 1e-4 and the adapters to 1e-3. On a GPU the compiled step's
	// fused kernels contract multiply-adds the uncompiled kernels round apart, and AdamW
	// grows that rounding step by step (its update m/√v is ±lr however small a near-zero
	// gradient is): on the H200 the 4-bit losses agreed to 5e-8 and 1.2e-7 in steps 1 and
	// 2 and drifted to 3e-3 by step 6, a pattern no real mismatch makes (it would start
	// large), so there later losses and the adapters are held to 1e-2.
	firstTol, laterTol, adapterTol := 1e-6, 1e-4, 1e-3
	if backend == "mlx" {
		if e, err := mx.Open(backend); err == nil {
			if d, ok := e.(interface{ Device() string }); ok && d.Device() == "gpu" {
				laterTol, adapterTol = 1e-2, 1e-2
			}
		}
	}
	var drift []string // relative loss differences step by step: rounding grows, a bug starts large
	for i := range plain {
		if (plain[i].TrainLoss == nil) != (compiled[i].TrainLoss == nil) {
			t.Fatalf("line %d: train loss present in one run only", i)
		}
		if plain[i].TrainLoss == nil {
			continue
		}
		rel := math.Abs(*plain[i].TrainLoss-*compiled[i].TrainLoss) / math.Abs(*plain[i].TrainLoss)
		drift = append(drift, fmt.Sprintf("%d:%.1e", plain[i].Iteration, rel))
		tol := laterTol
		if plain[i].Iteration <= 2 {
			tol = firstTol
		}
		if rel > tol {
			t.Errorf("step %d: train loss %v uncompiled, %v compiled", plain[i].Iteration, *plain[i].TrainLoss, *compiled[i].TrainLoss)
		}
	}
	t.Logf("%s bits=%s: relative train loss differences by step %v", backend, bits, drift)
	e := mxtest.Go(t)
	want, _, err := mx.LoadSafetensors(e, filepath.Join(runs[false], AdapterFile))
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := mx.LoadSafetensors(e, filepath.Join(runs[true], AdapterFile))
	if err != nil {
		t.Fatal(err)
	}
	moved := 0
	for n, w := range want {
		wv, gv := w.Float32s(), got[n].Float32s()
		for i := range wv {
			if d := math.Abs(float64(wv[i] - gv[i])); d > adapterTol*math.Max(1, math.Abs(float64(wv[i]))) {
				t.Fatalf("%s[%d]: %v uncompiled, %v compiled", n, i, wv[i], gv[i])
			}
			if wv[i] != gv[i] {
				moved++
			}
		}
	}
	t.Logf("%s bits=%s: %d tensors, %d values differ in the last bits", backend, bits, len(want), moved)
}

// TestCompileMatchesUncompiled: compile: true on the go engine (which runs the step as
// it is, through the dense form) trains the uncompiled run's adapter.
func TestCompileMatchesUncompiled(t *testing.T) {
	compiledAgainstUncompiled(t, "go", dg.BitsNone)
}

// TestCompileRefusesDropout: a compiled step would replay one dropout mask.
func TestCompileRefusesDropout(t *testing.T) {
	dir := t.TempDir()
	cfg := resumeConfig(t, dir)
	cfg.Compile = true
	cfg.LoRAParameters.Dropout = 0.1
	_, err := Run(context.Background(), cfg, Options{})
	if err == nil || err.Error() != "compile: true needs lora_parameters.dropout 0 (a compiled step would replay one dropout mask)" {
		t.Fatalf("err %v", err)
	}
}
