package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
)

// hfGoldenDir holds the output of interop/hf_selfcond.py: a small random DiffusionGemma
// written by transformers (config.json, model.safetensors), a LoRA adapter and
// golden.safetensors with transformers' logits, loss and gradients.
const hfGoldenDir = "testdata/hf_selfcond"

// TestForwardSelfCondMatchesTransformers checks the `probe forward --self-cond` contract
// against transformers' DiffusionGemmaForBlockDiffusion: the first decoder pass, the
// second with self_conditioning_logits = the first pass's logits, and — with a LoRA
// adapter shared by the encoder and decoder passes — the loss (second pass over every
// position, first held constant, plus the encoder's next-token CE) and its gradients.
func TestForwardSelfCondMatchesTransformers(t *testing.T) {
	if _, err := os.Stat(filepath.Join(hfGoldenDir, "golden.safetensors")); os.IsNotExist(err) {
		t.Skip("no transformers goldens: run `python interop/hf_selfcond.py OUTDIR` where transformers is installed and copy OUTDIR to cmd/probe/" + hfGoldenDir)
	}
	checkHFGolden(t, hfGoldenDir)
}

// checkHFGolden runs probe forward on dir's checkpoint and compares with its goldens.
func checkHFGolden(t *testing.T, dir string) {
	e := mxtest.Go(t)
	golden, meta, err := mx.LoadSafetensors(e, filepath.Join(dir, "golden.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("goldens from transformers %s, torch %s", meta["transformers"], meta["torch"])
	ids := func(name string) string {
		a, ok := golden[name]
		if !ok {
			t.Fatalf("golden.safetensors has no %q", name)
		}
		var parts []string
		for _, v := range a.Int32s() {
			parts = append(parts, fmt.Sprint(v))
		}
		return strings.Join(parts, ",")
	}
	in := []string{"--model", dir, "--prompt", ids("prompt"), "--canvas", ids("canvas"), "--backend", "go"}
	run := func(extra ...string) map[string]*mx.Array {
		out := filepath.Join(t.TempDir(), "out.safetensors")
		mustProbe(t, append(append(append([]string{"forward"}, in...), extra...), "--out", out)...)
		got, _, err := mx.LoadSafetensors(e, out)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	compare := func(what string, got, want *mx.Array, atol, rtol float64) {
		t.Helper()
		if want == nil || got == nil {
			t.Errorf("%s: missing (dgtune %v, transformers %v)", what, got != nil, want != nil)
			return
		}
		if !slices.Equal(got.Shape(), want.Shape()) {
			t.Errorf("%s: shape %v, transformers %v", what, got.Shape(), want.Shape())
			return
		}
		g, w := got.Float32s(), want.Float32s()
		worst, at := 0.0, -1
		for i := range g {
			d := math.Abs(float64(g[i] - w[i]))
			if d > atol+rtol*math.Abs(float64(w[i])) && d > worst {
				worst, at = d, i
			}
		}
		if at >= 0 {
			t.Errorf("%s: differs from transformers by %.3g at %d (%v vs %v)", what, worst, at, g[at], w[at])
		}
		t.Logf("%s: max |Δ| %.3g", what, maxAbsDiff(g, w))
	}

	plain := run()
	compare("logits (no self-conditioning)", plain["logits"], golden["logits_first"], 2e-4, 0)
	sc := run("--self-cond")
	compare("logits (--self-cond)", sc["logits"], golden["logits_sc"], 2e-4, 0)

	adapter := filepath.Join(dir, "adapter")
	loss := run("--adapter", adapter, "--self-cond", "--target", ids("target"), "--corrupt", ids("corrupt"),
		"--loss-positions", "all", "--encoder-loss-weight", meta["encoder_loss_weight"])
	compare("adapter logits (--self-cond)", loss["logits"], golden["lora.logits_sc"], 2e-4, 0)
	compare("loss", loss["loss"], golden["lora.loss"], 2e-4, 0)
	compare("encoder_loss", loss["encoder_loss"], golden["lora.encoder_loss"], 2e-4, 0)
	n := 0
	for name, want := range golden {
		key, ok := strings.CutPrefix(name, "lora.")
		if !ok || !strings.HasPrefix(key, "grad.") {
			continue
		}
		n++
		compare(name, loss[key], want, 2e-4, 1e-3)
	}
	if n == 0 {
		t.Error("golden.safetensors has no lora.grad.* tensors")
	}
	for name := range loss {
		if strings.HasPrefix(name, "grad.") && golden["lora."+name] == nil {
			t.Errorf("%s: not in the goldens", name)
		}
	}
}
