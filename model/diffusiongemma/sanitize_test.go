package diffusiongemma

import (
	"strings"
	"testing"

	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
)

// hfLayout rewrites an MLX-layout tensor map the way a raw Hugging Face checkpoint may hold
// it: experts without ".weight", a tied lm_head, the encoder's copies of every decoder
// weight, rotary buffers and vision clipping buffers.
func hfLayout(e mx.Engine, w map[string]*mx.Array, cfg *Config) map[string]*mx.Array {
	out := map[string]*mx.Array{}
	for n, a := range w {
		if strings.HasSuffix(n, ".experts.gate_up_proj.weight") || strings.HasSuffix(n, ".experts.down_proj.weight") {
			n = strings.TrimSuffix(n, ".weight")
		}
		out[n] = a
		if rest, ok := strings.CutPrefix(n, DecoderPrefix+"."); ok && !strings.HasPrefix(rest, "self_conditioning.") && !strings.HasSuffix(rest, ".layer_scalar") {
			out[EncoderLanguagePrefix+rest] = a
		}
	}
	out["lm_head.weight"] = w[DecoderPrefix+".embed_tokens.weight"]
	hd := cfg.TextConfig.HeadDim
	out[DecoderPrefix+".rotary_emb.sliding_attention_inv_freq"] = mx.Ones(e, []int{hd / 2}, mx.Float32)
	out[EncoderLanguagePrefix+"rotary_emb.full_attention_inv_freq"] = mx.Ones(e, []int{hd / 2}, mx.Float32)
	return out
}

// TestLoadRawHFCheckpoint: the same weights in the raw Hugging Face layout load to the
// same model, in f32 and in bf16, as in the MLX layout.
func TestLoadRawHFCheckpoint(t *testing.T) {
	e := mxtest.Go(t)
	prompt, canvas := roundTripIDs(e)
	for _, dt := range []mx.DType{mx.Float32, mx.BFloat16, mx.Float16} {
		t.Run(dt.String(), func(t *testing.T) {
			cfg, w := tinyCheckpoint(t, e, BitsNone)
			for n, a := range w {
				w[n] = mx.AsType(a, dt)
			}
			mlxDir, hfDir := t.TempDir(), t.TempDir()
			if err := WriteCheckpoint(mlxDir, cfg, w, nil); err != nil {
				t.Fatal(err)
			}
			if err := WriteCheckpoint(hfDir, cfg, hfLayout(e, w, cfg), nil); err != nil {
				t.Fatal(err)
			}
			want, err := Load(e, mlxDir, LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got, err := Load(e, hfDir, LoadOptions{})
			if err != nil {
				t.Fatalf("raw HF layout: %v", err)
			}
			wantIdentical(t, "raw-layout logits", got.Forward(prompt, canvas).Float32s(), want.Forward(prompt, canvas).Float32s())
		})
	}
}

// TestLoadVisionClippingBuffers: a vision tower's clipping buffers are dropped without
// use_clipped_linears.
func TestLoadVisionClippingBuffers(t *testing.T) {
	e := mxtest.Go(t)
	_, w := synthVisionModel(t, e, BitsNone, 31)
	cfg, err := Preset(PresetTiny)
	if err != nil {
		t.Fatal(err)
	}
	WithSyntheticVision(cfg)
	var linear string
	for n := range w {
		if strings.HasPrefix(n, "model.encoder.vision_tower.encoder.layers.0.self_attn.q_proj") {
			linear = strings.TrimSuffix(strings.TrimSuffix(n, ".weight"), ".linear")
		}
	}
	if linear == "" {
		t.Fatal("no vision q_proj in the synthetic tower")
	}
	for _, s := range clippingBuffers {
		w[linear+s] = mx.Scalar(e, 1e9, mx.Float32)
	}
	dir := t.TempDir()
	if err := WriteCheckpoint(dir, cfg, w, nil); err != nil {
		t.Fatal(err)
	}
	m, err := Load(e, dir, LoadOptions{})
	if err != nil {
		t.Fatalf("clipping buffers: %v", err)
	}
	if m.Vision == nil {
		t.Error("the vision tower was not built")
	}
}

// TestSanitizeErrors: a copy that is not a copy, a tensor spelled both ways, and a head
// that is not the embedding are each named.
func TestSanitizeErrors(t *testing.T) {
	e := mxtest.Go(t)
	for _, c := range []struct {
		name string
		edit func(w map[string]*mx.Array)
		want []string
	}{
		{"encoder copy differs", func(w map[string]*mx.Array) {
			n := EncoderLanguagePrefix + "layers.1.mlp.up_proj.weight"
			w[n] = mx.AddScalar(w[n], 1)
		}, []string{"1 copies differ", EncoderLanguagePrefix + "layers.1.mlp.up_proj.weight"}},
		{"encoder expert copy differs", func(w map[string]*mx.Array) {
			n := EncoderLanguagePrefix + "layers.0.experts.down_proj"
			w[n] = mx.MulScalar(w[n], 2)
		}, []string{EncoderLanguagePrefix + "layers.0.experts.down_proj"}},
		{"encoder copy of another shape", func(w map[string]*mx.Array) {
			n := EncoderLanguagePrefix + "norm.weight"
			w[n] = mx.Ones(e, []int{3}, mx.Float32)
		}, []string{EncoderLanguagePrefix + "norm.weight"}},
		{"copy without original", func(w map[string]*mx.Array) {
			w[EncoderLanguagePrefix+"layers.7.mlp.up_proj.weight"] = mx.Ones(e, []int{2}, mx.Float32)
		}, []string{EncoderLanguagePrefix + "layers.7.mlp.up_proj.weight has no counterpart model.decoder.layers.7.mlp.up_proj.weight"}},
		{"untied head", func(w map[string]*mx.Array) {
			w["lm_head.weight"] = mx.Negative(w["lm_head.weight"])
		}, []string{"lm_head.weight"}},
		{"experts spelled twice", func(w map[string]*mx.Array) {
			w[layer0+"experts.gate_up_proj.weight"] = w[layer0+"experts.gate_up_proj"]
		}, []string{"tensor " + layer0 + "experts.gate_up_proj.weight is there twice"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, w := tinyCheckpoint(t, e, BitsNone)
			raw := hfLayout(e, w, cfg)
			c.edit(raw)
			dir := t.TempDir()
			if err := WriteCheckpoint(dir, cfg, raw, nil); err != nil {
				t.Fatal(err)
			}
			_, err := Load(e, dir, LoadOptions{})
			if err == nil {
				t.Fatal("Load succeeded")
			}
			for _, s := range append(c.want, dir) {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("Load error %q\nwant it to contain %q", err, s)
				}
			}
		})
	}
}
