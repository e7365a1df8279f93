package lora

import (
	"encoding/json"
	"testing"

	"github.com/dgtune/dgtune/model/diffusiongemma"
)

// TestFusedConfigJSON: an unchanged quantization map keeps config.json's bytes; a changed
// one replaces the map under each key the file has ("quantization", "quantization_config";
// "quantization" when it has neither or only nulls) and keeps every other key.
func TestFusedConfigJSON(t *testing.T) {
	before := &diffusiongemma.Quantization{GroupSize: 64, Bits: 4}
	after := &diffusiongemma.Quantization{GroupSize: 64, Bits: 4, Modules: map[string]diffusiongemma.ModuleQuantization{
		"model.decoder.layers.0.self_attn.q_proj": {Quantized: false}}}
	afterJSON, err := json.Marshal(after)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, orig string
		keys       []string // keys that must hold the new map
		absent     []string // keys that must stay absent
		null       []string // keys that must stay null
	}{
		{"both keys", `{"a": 1, "quantization": {"group_size": 64, "bits": 4}, "quantization_config": {"group_size": 64, "bits": 4}}`,
			[]string{"quantization", "quantization_config"}, nil, nil},
		{"mlx key only", `{"a": 1, "quantization": {"group_size": 64, "bits": 4}}`,
			[]string{"quantization"}, []string{"quantization_config"}, nil},
		{"hf key only", `{"a": 1, "quantization_config": {"group_size": 64, "bits": 4}}`,
			[]string{"quantization_config"}, []string{"quantization"}, nil},
		{"null hf key", `{"a": 1, "quantization_config": null}`,
			[]string{"quantization"}, nil, []string{"quantization_config"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			same, err := fusedConfigJSON([]byte(tc.orig), before, before)
			if err != nil || string(same) != tc.orig {
				t.Errorf("unchanged map: %q, %v; want the original bytes", same, err)
			}
			b, err := fusedConfigJSON([]byte(tc.orig), before, after)
			if err != nil {
				t.Fatal(err)
			}
			var top map[string]json.RawMessage
			if err := json.Unmarshal(b, &top); err != nil {
				t.Fatalf("fused config.json %q: %v", b, err)
			}
			if string(top["a"]) != "1" {
				t.Errorf("key a = %s, want 1", top["a"])
			}
			for _, k := range tc.keys {
				var got, want any
				json.Unmarshal(top[k], &got)
				json.Unmarshal(afterJSON, &want)
				if g, w := mustJSON(t, got), mustJSON(t, want); g != w {
					t.Errorf("%s = %s, want %s", k, g, w)
				}
			}
			for _, k := range tc.absent {
				if _, ok := top[k]; ok {
					t.Errorf("%s added: %s", k, top[k])
				}
			}
			for _, k := range tc.null {
				if string(top[k]) != "null" {
					t.Errorf("%s = %s, want null", k, top[k])
				}
			}
		})
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestFuseProbeLossy: a fused model is lossy beyond a tenth of the largest logit or half
// of the adapter's own effect, and not at or below both.
func TestFuseProbeLossy(t *testing.T) {
	for _, c := range []struct {
		diff, maxLogit, effect float64
		want                   bool
	}{
		{1e-5, 20, 10, false},
		{2, 20, 4, false},    // exactly a tenth of 20 and half of 4
		{2.01, 20, 10, true}, // over a tenth of 20
		{1, 20, 1.99, true},  // over half of 1.99
		{0, 0, 0, false},     // an adapter that changes nothing, fused exactly
		{1e-6, 20, 0, true},  // fusing moved the logits more than the adapter does
	} {
		p := FuseProbe{Diff: c.diff, MaxLogit: c.maxLogit, Effect: c.effect}
		if got := p.Lossy(); got != c.want {
			t.Errorf("FuseProbe{Diff: %g, MaxLogit: %g, Effect: %g}.Lossy() = %v, want %v", c.diff, c.maxLogit, c.effect, got, c.want)
		}
	}
}
