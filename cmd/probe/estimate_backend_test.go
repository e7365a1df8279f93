package main

import (
	"encoding/json"
	"testing"
)

// TestEstimateBackendMLX: --backend mlx predicts MLX's peak: no mapped weights, no GC
// headroom, so the total is weights + LoRA + activations; bfloat16 compute holds the
// small preset's unquantized weights in half the bytes; an unknown backend is refused.
func TestEstimateBackendMLX(t *testing.T) {
	run := func(args ...string) estimateJSON {
		t.Helper()
		var r estimateJSON
		out := mustProbe(t, append([]string{"estimate", "--preset", "small", "--prompt-len", "16", "--canvas-len", "16", "--json"}, args...)...)
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("estimate output %q is not JSON: %v", out, err)
		}
		return r
	}
	f32, bf16 := run("--backend", "mlx"), run("--backend", "mlx", "--compute-dtype", "bfloat16")
	for _, r := range []estimateJSON{f32, bf16} {
		if r.Backend != "mlx" || r.MappedWeightsBytes != 0 || r.GCHeadroomBytes != 0 || r.TotalBytes != r.WeightsBytes+r.LoRABytes+r.ActivationsBytes {
			t.Errorf("--backend mlx --compute-dtype %s: %+v; want backend mlx, nothing mapped, no GC headroom, total = weights + LoRA + activations", r.ComputeDType, r)
		}
	}
	if f32.ComputeDType != "float32" || bf16.ComputeDType != "bfloat16" || 2*bf16.WeightsBytes != f32.WeightsBytes {
		t.Errorf("weights %d B at %s, %d B at %s; want the bfloat16 ones half", f32.WeightsBytes, f32.ComputeDType, bf16.WeightsBytes, bf16.ComputeDType)
	}
	if g := run(); g.Backend != "go" || g.GCHeadroomBytes == 0 {
		t.Errorf("default backend: %+v; want go with GC headroom", g)
	}
	if _, errs, code := probe(t, "estimate", "--preset", "small", "--backend", "tpu"); code != 1 || errs == "" {
		t.Errorf("--backend tpu: exit %d, stderr %q; want a refusal", code, errs)
	}
}
