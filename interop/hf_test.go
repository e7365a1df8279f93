package interop

import (
	"fmt"
	"math"
	"path/filepath"
	"testing"

	dg "github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
)

const golden = "testdata/hf"

// reference returns the arrays transformers + PEFT computed (hf_golden.py).
func reference(t *testing.T, e mx.Engine) map[string]*mx.Array {
	t.Helper()
	ref, _, err := mx.LoadSafetensors(e, filepath.Join(golden, "reference.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

func load(t *testing.T, e mx.Engine, dir string) *dg.Model {
	t.Helper()
	m, err := dg.Load(e, filepath.Join(golden, dir), dg.LoadOptions{})
	if err != nil {
		t.Fatalf("load %s: %v", dir, err)
	}
	return m
}

func need(t *testing.T, ref map[string]*mx.Array, name string) *mx.Array {
	t.Helper()
	a, ok := ref[name]
	if !ok {
		t.Fatalf("reference.safetensors has no %s", name)
	}
	return a
}

// maxAbsDiff returns max |a−b| and max |b| over two same-shaped arrays.
func maxAbsDiff(t *testing.T, what string, a, b *mx.Array) (diff, scale float64) {
	t.Helper()
	if fmt.Sprint(a.Shape()) != fmt.Sprint(b.Shape()) {
		t.Fatalf("%s: shape %v, reference %v", what, a.Shape(), b.Shape())
	}
	av, bv := a.Float32s(), b.Float32s()
	for i := range av {
		diff = max(diff, math.Abs(float64(av[i])-float64(bv[i])))
		scale = max(scale, math.Abs(float64(bv[i])))
	}
	return diff, scale
}

func wantAbs(t *testing.T, what string, got, want *mx.Array, tol float64) {
	t.Helper()
	d, s := maxAbsDiff(t, what, got, want)
	t.Logf("%s: max |dgtune − transformers| = %.3g (max |transformers| = %.3g)", what, d, s)
	if !(d <= tol) {
		t.Errorf("%s: max |dgtune − transformers| = %.3g, want ≤ %g", what, d, tol)
	}
}

// TestRawCheckpointLogits: checkpoints transformers' save_pretrained wrote (f32 sharded,
// bf16 and f16 single files, experts without ".weight", the transformers config dialect)
// load, and give transformers' logits. The half-precision references are transformers in
// f32 on the rounded weights, which is what dgtune computes.
func TestRawCheckpointLogits(t *testing.T) {
	e := mxtest.Go(t)
	ref := reference(t, e)
	for _, tt := range []struct{ dir, prefix, logits string }{
		{"text-f32", "short", "base.short.logits"},
		{"text-bf16", "text-bf16", "text-bf16.logits"},
		{"text-f16", "text-f16", "text-f16.logits"},
	} {
		t.Run(tt.dir, func(t *testing.T) {
			m := load(t, e, tt.dir)
			got := m.Forward(need(t, ref, tt.prefix+".prompt"), need(t, ref, tt.prefix+".canvas"))
			wantAbs(t, tt.dir+" logits", got, need(t, ref, tt.logits), 2e-4)
		})
	}
}

// TestLongPromptLogits: a prompt longer than the sliding window. dgtune's canvas sees the
// last window−1 encoded positions on sliding layers, as mlx-vlm does; transformers agrees on
// both of its paths, generation (a KV cache) and training (encoder K/V passed as tensors).
func TestLongPromptLogits(t *testing.T) {
	e := mxtest.Go(t)
	ref := reference(t, e)
	m := load(t, e, "text-f32")
	got := m.Forward(need(t, ref, "long.prompt"), need(t, ref, "short.canvas"))
	wantAbs(t, "long prompt logits (cache path)", got, need(t, ref, "base.long.cache.logits"), 2e-4)
	wantAbs(t, "long prompt logits (no-cache path)", got, need(t, ref, "base.long.nocache.logits"), 2e-4)
}
