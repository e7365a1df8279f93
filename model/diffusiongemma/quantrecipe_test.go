package diffusiongemma_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"path/filepath"
	"testing"

	dg "github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
	"github.com/dgtune/dgtune/tokenizer"
)

func TestKeepMatches(t *testing.T) {
	const q = "model.decoder.layers.3.self_attn.q_proj"
	tests := []struct {
		pattern, module string
		want            bool
	}{
		{"self_attn.q_proj", q, true},
		{"q_proj", q, true},
		{"_proj", q, false}, // a suffix counts only at a dot
		{q, q, true},
		{"layers.3.self_attn.q_proj", q, true},
		{"layers.4.self_attn.q_proj", q, false},
		{"*.layers.3.*", q, true},
		{"*.layers.[0-2].*", q, false},
		{"model.decoder.*", q, true},
		{"embed_tokens", "model.decoder.embed_tokens", true},
		{"embed_tokens", q, false},
	}
	for _, tc := range tests {
		if got := dg.KeepMatches(tc.pattern, tc.module); got != tc.want {
			t.Errorf("KeepMatches(%#q, %#q) = %v, want %v", tc.pattern, tc.module, got, tc.want)
		}
	}
}

// TestPlanQuantization checks the recipes on the small preset (hidden 256, intermediate
// 512, moe_intermediate 128, 16 experts) and the tiny one (moe_intermediate 32).
func TestPlanQuantization(t *testing.T) {
	shapes := func(cfg *dg.Config) map[string][]int {
		m := map[string][]int{}
		for _, ts := range dg.ExpectedTensors(cfg) {
			m[ts.Name] = ts.Shape
		}
		return m
	}
	small, tiny := preset(t, dg.PresetSmall), preset(t, dg.PresetTiny)
	l0 := dg.LayerPrefix(0)
	tests := []struct {
		name   string
		cfg    *dg.Config
		recipe dg.QuantRecipe
		// The expected map, as config.json spells it, for the modules checked.
		top     string
		modules map[string]string // module → its entry ("" = none: the default)
	}{
		{"4-bit g64", small, dg.QuantRecipe{Bits: "4", GroupSize: 64}, `{"group_size":64,"bits":4,"mode":"affine"}`,
			map[string]string{dg.DecoderPrefix + ".embed_tokens": "", l0 + ".experts.down_proj": "", l0 + ".router.proj": ""}},
		{"8-bit g128", small, dg.QuantRecipe{Bits: "8", GroupSize: 128}, `{"group_size":128,"bits":8,"mode":"affine"}`,
			map[string]string{l0 + ".experts.down_proj": "", l0 + ".mlp.down_proj": ""}},
		// mlx-vlm's predicate: 8 bits at group 64 for embedding, attention, dense MLP, router.
		{"mixed g128", small, dg.QuantRecipe{Bits: "mixed", GroupSize: 128}, `{"group_size":128,"bits":4,"mode":"affine"}`,
			map[string]string{
				dg.DecoderPrefix + ".embed_tokens":              `{"group_size":64,"bits":8}`,
				l0 + ".self_attn.q_proj":                        `{"group_size":64,"bits":8}`,
				l0 + ".mlp.down_proj":                           `{"group_size":64,"bits":8}`,
				l0 + ".router.proj":                             `{"group_size":64,"bits":8}`,
				l0 + ".experts.gate_up_proj":                    "",
				dg.DecoderPrefix + ".self_conditioning.up_proj": "",
			}},
		// tiny: experts.down_proj has in = 32, not a multiple of 64: left unquantized.
		{"tiny g64", tiny, dg.QuantRecipe{Bits: "4", GroupSize: 64}, `{"group_size":64,"bits":4,"mode":"affine"}`,
			map[string]string{l0 + ".experts.down_proj": "false", l0 + ".experts.gate_up_proj": ""}},
		{"keep", small, dg.QuantRecipe{Bits: "4", GroupSize: 32, Keep: []string{"router.proj", "*.layers.1.self_attn.*"}},
			`{"group_size":32,"bits":4,"mode":"affine"}`,
			map[string]string{l0 + ".router.proj": "false", dg.LayerPrefix(1) + ".self_attn.o_proj": "false", l0 + ".self_attn.o_proj": ""}},
	}
	for _, tc := range tests {
		_, q, err := dg.PlanQuantization(tc.cfg, tc.recipe, shapes(tc.cfg))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		b, _ := json.Marshal(q)
		var got map[string]json.RawMessage
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		top := dg.Quantization{GroupSize: q.GroupSize, Bits: q.Bits, Mode: q.Mode}
		if tb, _ := json.Marshal(top); string(tb) != tc.top {
			t.Errorf("%s: defaults %s, want %s", tc.name, tb, tc.top)
		}
		for m, want := range tc.modules {
			if g := string(got[m]); g != want {
				t.Errorf("%s: quantization[%s] = %q, want %q", tc.name, m, g, want)
			}
		}
	}
	_, _, err := dg.PlanQuantization(small, dg.QuantRecipe{Bits: "4", GroupSize: 64, Keep: []string{"q_porj"}}, shapes(small))
	if !errors.Is(err, dg.ErrRecipe) || err.Error() != `quantization recipe: keep pattern "q_porj" matches no quantizable module (patterns name modules such as model.decoder.layers.0.self_attn.q_proj or embed_tokens)` {
		t.Errorf("typo keep pattern: err = %v", err)
	}
	for _, r := range []dg.QuantRecipe{{Bits: "3", GroupSize: 64}, {Bits: "4", GroupSize: 48}, {Bits: "4", GroupSize: 64, Keep: []string{"[x"}}} {
		if err := r.Validate(); !errors.Is(err, dg.ErrRecipe) {
			t.Errorf("Validate(%+v) = %v, want ErrRecipe", r, err)
		}
	}
}

// TestConvertTensorChunks: converting in chunks of a few rows gives the bytes one
// whole-tensor cast and quantize give (MLX quantizes each group on its own).
func TestConvertTensorChunks(t *testing.T) {
	e := mxtest.Go(t)
	rng := rand.New(rand.NewPCG(3, 4))
	vals := make([]float32, 3*7*128)
	for i := range vals {
		vals[i] = float32(rng.NormFloat64())
	}
	shape := []int{3, 7, 128}
	src := mx.AsType(mx.FromFloat32(e, vals, shape...), mx.Float32)
	raw := mx.Bytes(src)
	for _, q := range []dg.ModuleQuant{{}, {Bits: 4, GroupSize: 32}, {Bits: 8, GroupSize: 128}} {
		whole := mx.AsType(src, mx.BFloat16)
		var want [3][]byte
		if q.Bits == 0 {
			want[0] = mx.Bytes(whole)
		} else {
			w, s, b := mx.Quantize(whole, q.GroupSize, q.Bits)
			want = [3][]byte{mx.Bytes(w), mx.Bytes(s), mx.Bytes(b)}
		}
		var got [3][]byte
		for i := range got {
			got[i] = make([]byte, len(want[i]))
		}
		calls := 0
		ts := dg.TensorSource{DType: mx.Float32, Shape: shape, Read: func(dst []byte, off int64) error {
			calls++
			copy(dst, raw[off:])
			return nil
		}}
		rowBytes := 128 * 4
		bf := mx.BFloat16
		err := dg.ConvertTensorChunked(e, ts, &bf, q, func(piece int, off int64, b []byte) error {
			copy(got[piece][off:], b)
			return nil
		}, 4*rowBytes)
		if err != nil {
			t.Fatal(err)
		}
		if calls != 6 { // 21 rows in chunks of 4
			t.Errorf("%+v: %d reads, want 6", q, calls)
		}
		for i := range got {
			if !bytes.Equal(got[i], want[i]) {
				t.Errorf("%+v: piece %d differs from the whole-tensor conversion", q, i)
			}
		}
	}
}

// TestQuantizeOnLoad: loading a bf16 checkpoint in the release layout with Quantize
// gives the modules, bits and config map the recipe plans, and refuses a quantized base.
func TestQuantizeOnLoad(t *testing.T) {
	e := mxtest.Go(t)
	dir := filepath.Join(t.TempDir(), "bf16")
	tok, err := tokenizer.NewSynthetic(512, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dg.WriteSyntheticBF16Shards(dir, preset(t, dg.PresetTiny), 5, true, tok); err != nil {
		t.Fatal(err)
	}
	m, err := dg.Load(e, dir, dg.LoadOptions{Quantize: &dg.QuantRecipe{Bits: "8", GroupSize: 64}})
	if err != nil {
		t.Fatal(err)
	}
	if q, ok := m.Layers[0].Q.(*dg.Quantized); !ok || q.Bits != 8 || q.GroupSize != 64 {
		t.Errorf("layer 0 q_proj %T, want 8-bit group 64", m.Layers[0].Q)
	}
	if m.Layers[0].Experts.Quant != nil {
		t.Error("experts.down_proj (in 32) was quantized at group 64")
	}
	if q := m.Config.Quantization; q == nil || q.Bits != 8 || q.GroupSize != 64 {
		t.Errorf("config quantization %+v", m.Config.Quantization)
	}
	q4 := filepath.Join(t.TempDir(), "q4")
	if _, err := dg.WriteSyntheticShards(q4, preset(t, dg.PresetTiny), 5, dg.Bits4, tok); err != nil {
		t.Fatal(err)
	}
	_, err = dg.Load(e, q4, dg.LoadOptions{Quantize: &dg.QuantRecipe{Bits: "4", GroupSize: 64}})
	if !errors.Is(err, dg.ErrRecipe) {
		t.Errorf("quantize_on_load over a quantized checkpoint: err = %v", err)
	}
}
