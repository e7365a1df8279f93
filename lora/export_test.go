package lora

import (
	"encoding/json"
	"errors"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
)

func TestExportPEFT(t *testing.T) {
	e := mxtest.Go(t)
	m := tinyModel(t, e, "0")
	a, err := Attach(m, Config{Rank: 4, Scale: 8, Keys: []string{"self_attn.q_proj", "self_attn.v_proj", "mlp.gate_proj"}, NumLayers: 2}, 3)
	if err != nil {
		t.Fatal(err)
	}
	randomizeB(t, a, 5, 0.05)
	want := logits(m)
	a.Detach()
	dir := t.TempDir()
	if err := ExportPEFT(a.File(""), dir, "org/tiny"); err != nil {
		t.Fatal(err)
	}
	f, err := LoadDir(e, dir)
	if err != nil {
		t.Fatal(err)
	}
	// lora_alpha = 8·4 = 32 and PEFT's alpha/r = 32/4 gives the scale back exactly.
	if f.Scale() != 8 || f.Rank() != 4 || f.Config.BaseModel != "org/tiny" {
		t.Errorf("loaded PEFT config %+v", f.Config)
	}
	if _, err := Mount(m, f); err != nil {
		t.Fatal(err)
	}
	assertBitwise(t, "PEFT export mounted", logits(m), want)

	tensors, meta, err := mx.LoadSafetensors(e, filepath.Join(dir, PEFTWeightsFile))
	if err != nil {
		t.Fatal(err)
	}
	// 5 modules (q, v, gate on sliding layer 0; q, gate on full layer 1), two tensors each,
	// under the decoder's and the encoder's module names (transformers runs the encoder
	// through modules of its own).
	if len(tensors) != 20 || meta["format"] != "pt" {
		t.Errorf("%d tensors, metadata %v", len(tensors), meta)
	}
	for name, shape := range map[string][]int{
		"base_model.model.model.decoder.layers.1.self_attn.q_proj.lora_A.weight":                {4, 64},
		"base_model.model.model.decoder.layers.1.self_attn.q_proj.lora_B.weight":                {128, 4},
		"base_model.model.model.decoder.layers.0.self_attn.v_proj.lora_B.weight":                {32, 4},
		"base_model.model.model.encoder.language_model.layers.0.self_attn.v_proj.lora_B.weight": {32, 4},
	} {
		if arr := tensors[name]; arr == nil || !slices.Equal(arr.Shape(), shape) {
			t.Errorf("%s = %v, want shape %v", name, arr, shape)
		}
	}
	// lora_B.weight is Bᵀ: element (o, k) of the file is B[k, o].
	bt := tensors["base_model.model.model.decoder.layers.1.self_attn.q_proj.lora_B.weight"].Float32s()
	b := a.Layer("model.decoder.layers.1.self_attn.q_proj").B.Float32s()
	if bt[5*4+2] != b[2*128+5] {
		t.Errorf("lora_B.weight[5, 2] = %v, want B[2, 5] = %v", bt[5*4+2], b[2*128+5])
	}
	raw, err := os.ReadFile(filepath.Join(dir, ConfigFile))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]any{
		"peft_type": "LORA", "r": 4.0, "lora_alpha": 32.0, "base_model_name_or_path": "org/tiny", "task_type": nil,
		"bias": "none", "fan_in_fan_out": false, "lora_dropout": 0.0, "inference_mode": true, "layers_to_transform": nil,
	} {
		if got, ok := cfg[k]; !ok || got != v {
			t.Errorf("adapter_config.json %s = %v, want %v", k, cfg[k], v)
		}
	}
	// target_modules full-matches exactly the ten exported modules among every linear name
	// of the model's language layers in both passes (and nothing of the vision tower).
	re := regexp.MustCompile(cfg["target_modules"].(string))
	matched := 0
	for _, prefix := range []string{"model.decoder.layers.", "model.encoder.language_model.layers.", "model.encoder.vision_tower.encoder.layers."} {
		for layer := range 2 {
			for _, key := range append(diffusiongemma.LoRAKeys(), "router.proj") {
				name := prefix + strconv.Itoa(layer) + "." + key
				if !re.MatchString(name) {
					continue
				}
				matched++
				if _, ok := tensors["base_model.model."+name+".lora_A.weight"]; !ok {
					t.Errorf("target_modules matches %s, which the export does not hold", name)
				}
			}
		}
	}
	if matched != 10 {
		t.Errorf("target_modules %q matches %d module names, want the 10 exported", cfg["target_modules"], matched)
	}
	if err := ExportPEFT(&AdapterFile{Config: NewAdapterConfig(Config{Rank: 4, Scale: 1}, "")}, t.TempDir(), ""); !errors.Is(err, ErrFormat) {
		t.Errorf("exporting an empty adapter: %v, want ErrFormat", err)
	}
}

func TestMergeEqualsStacked(t *testing.T) {
	e := mxtest.Go(t)
	m := tinyModel(t, e, "0")
	a1, err := Attach(m, Config{Rank: 4, Scale: 8}, 1)
	if err != nil {
		t.Fatal(err)
	}
	base := logits(m)
	randomizeB(t, a1, 1, 0.03)
	// The second adapter covers only q/o on the last layer, at another rank and scale.
	a2, err := Attach(m, Config{Rank: 2, Scale: 0.5, Keys: []string{"self_attn.q_proj", "self_attn.o_proj"}, NumLayers: 1}, 2)
	if err != nil {
		t.Fatal(err)
	}
	randomizeB(t, a2, 2, 0.3)
	stacked := logits(m)
	f1, f2 := a1.File("base"), a2.File("base")
	a2.Detach()
	a1.Detach()

	merged, err := Merge(f1, f2)
	if err != nil {
		t.Fatal(err)
	}
	// r = 4 + 2 everywhere, scale 1, the union of modules (13: adapter 2's are a subset).
	if merged.Rank() != 6 || merged.Scale() != 1 || len(merged.Modules) != 13 || merged.Config.NumLayers != -1 {
		t.Errorf("merged: rank %d scale %v modules %d num_layers %d", merged.Rank(), merged.Scale(), len(merged.Modules), merged.Config.NumLayers)
	}
	// A module only adapter 1 has: A_m = [A1 | 0], B_m = [8·B1 ; 0].
	mod := "model.decoder.layers.0.mlp.up_proj"
	am, bm := merged.Modules[mod].A.Float32s(), merged.Modules[mod].B.Float32s()
	a1v, b1v := f1.Modules[mod].A.Float32s(), f1.Modules[mod].B.Float32s()
	if am[0] != a1v[0] || am[3] != a1v[3] || am[4] != 0 || am[5] != 0 || am[6] != a1v[4] {
		t.Errorf("A_m row 0 = %v, want [A1 row 0 | 0 0]", am[:6])
	}
	if bm[0] != 8*b1v[0] || bm[4*128] != 0 || bm[5*128+127] != 0 {
		t.Errorf("B_m: %v %v %v, want 8·B1[0,0] = %v and zero rows 4-5", bm[0], bm[4*128], bm[5*128+127], 8*b1v[0])
	}
	if _, err := Mount(m, merged); err != nil {
		t.Fatal(err)
	}
	// Through the whole model the two differ only by float32 summation order (a few ulps per
	// linear), amplified by two layers; the logits reach |15|, so the bound is 1e-6 relative
	// to the largest logit. The adapters' own effect is orders of magnitude larger.
	got := logits(m)
	tol := 1e-6 * maxAbs(stacked)
	d := maxAbsDiff(got, stacked)
	t.Logf("merge: max logit diff vs stacked %g (tolerance %g, adapters' effect %g)", d, tol, maxAbsDiff(stacked, base))
	if d > tol {
		t.Errorf("merged vs both adapters stacked: max logit diff %g, want ≤ %g", d, tol)
	}
	if maxAbsDiff(stacked, base) < 1000*tol {
		t.Errorf("the adapters barely change the logits (%g); the comparison would prove nothing", maxAbsDiff(stacked, base))
	}

	// Disagreeing geometry and bad inputs.
	bad := &AdapterFile{Config: f2.Config, Modules: map[string]Weights{
		"model.decoder.layers.1.self_attn.q_proj": {A: mx.Zeros(e, []int{32, 2}, mx.Float32), B: mx.Zeros(e, []int{2, 128}, mx.Float32)},
	}}
	if _, err := Merge(f1, bad); err == nil || !strings.Contains(err.Error(), "adapter 1 is [64, 128] (in, out), adapter 2 [32, 128]") {
		t.Errorf("merging other geometry: %v", err)
	}
	if _, err := Merge(f1, nil); err == nil {
		t.Error("Merge with nil succeeded")
	}
	if _, err := Merge(f1, &AdapterFile{Config: f2.Config}); !errors.Is(err, ErrFormat) {
		t.Errorf("merging an empty adapter: %v, want ErrFormat", err)
	}
}

func TestMergeLayerExact(t *testing.T) {
	e := mxtest.Go(t)
	rng := rand.New(rand.NewPCG(1, 1))
	// One linear, in 16 → out 8: s1·x·A1·B1 + s2·x·A2·B2 against x·[A1|A2]·[s1·B1; s2·B2].
	// Outputs are O(1), so the only difference is float32 summation order: ≤ 1e-6.
	base := &diffusiongemma.Dense{W: mxtest.RandN(e, rng, 8, 16)}
	x := mxtest.RandN(e, rng, 3, 16)
	w1 := Weights{A: mxtest.RandN(e, rng, 16, 4), B: mxtest.RandN(e, rng, 4, 8)}
	w2 := Weights{A: mxtest.RandN(e, rng, 16, 2), B: mxtest.RandN(e, rng, 2, 8)}
	const mod = "model.decoder.layers.0.self_attn.q_proj"
	f1 := &AdapterFile{Config: NewAdapterConfig(Config{Rank: 4, Scale: 0.7}, ""), Modules: map[string]Weights{mod: w1}}
	f2 := &AdapterFile{Config: NewAdapterConfig(Config{Rank: 2, Scale: -1.3}, ""), Modules: map[string]Weights{mod: w2}}
	stacked := (&Linear{Base: &Linear{Base: base, A: w1.A, B: w1.B, Scale: 0.7}, A: w2.A, B: w2.B, Scale: -1.3}).Forward(x).Float32s()
	mf, err := Merge(f1, f2)
	if err != nil {
		t.Fatal(err)
	}
	mw := mf.Modules[mod]
	merged := (&Linear{Base: base, A: mw.A, B: mw.B, Scale: mf.Scale()}).Forward(x).Float32s()
	if d := maxAbsDiff(merged, stacked); d > 1e-6 {
		t.Errorf("merged layer vs stacked layers: max diff %g, want ≤ 1e-6", d)
	}
	// Fusing the merged adapter into W gives the same layer within float32 rounding.
	fusedW := mx.Add(base.W, delta(mw.A, mw.B, mf.Scale(), mx.Float32))
	fused := (&diffusiongemma.Dense{W: fusedW}).Forward(x).Float32s()
	if d := maxAbsDiff(fused, stacked); d > 1e-5 {
		t.Errorf("fused layer vs stacked layers: max diff %g, want ≤ 1e-5", d)
	}
}

func TestFuseDense(t *testing.T) {
	e := mxtest.Go(t)
	m, before := tinyCheckpoint(t, e, "0")
	a, err := Attach(m, Config{Rank: 4, Scale: 8}, 7)
	if err != nil {
		t.Fatal(err)
	}
	randomizeB(t, a, 7, 0.05)
	want := logits(m)
	f := a.File("")
	weights, cfg, err := FuseTensors(m.Config, before, f, false)
	if err != nil {
		t.Fatal(err)
	}
	fused, err := diffusiongemma.Build(e, cfg, weights, diffusiongemma.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// x·(W + 8·Bᵀ·Aᵀ)ᵀ and x·Wᵀ + 8·(x·A)·B differ by float32 rounding of W' (≈ 6e-8
	// relative), amplified by the two layers; logits reach |15|: bound 1e-5 relative.
	d := maxAbsDiff(logits(fused), want)
	tol := 1e-5 * maxAbs(want)
	t.Logf("unquantized fuse: max logit diff vs base+adapter %g (tolerance %g)", d, tol)
	if d > tol {
		t.Errorf("fused vs base+adapter: max logit diff %g, want ≤ %g", d, tol)
	}
	// Untouched tensors are the very same arrays.
	for _, n := range []string{"model.decoder.embed_tokens.weight", "model.decoder.layers.0.router.proj.weight", "model.decoder.layers.1.experts.down_proj.weight"} {
		if weights[n] != before[n] {
			t.Errorf("%s was not passed through", n)
		}
	}
	if weights["model.decoder.layers.0.self_attn.q_proj.weight"] == before["model.decoder.layers.0.self_attn.q_proj.weight"] {
		t.Error("q_proj was not fused")
	}
	// W' = W + 8·Bᵀ·Aᵀ checked by hand on one element: W'[o, i] − W[o, i] = 8·Σ_k B[k, o]·A[i, k].
	mod := "model.decoder.layers.1.mlp.down_proj"
	w0 := before[mod+".weight"].Float32s()
	w1 := weights[mod+".weight"].Float32s()
	av, bv := f.Modules[mod].A.Float32s(), f.Modules[mod].B.Float32s()
	const o, i, in, out = 3, 17, 128, 64
	want1 := 0.0
	for k := range 4 {
		want1 += 8 * float64(bv[k*out+o]) * float64(av[i*4+k])
	}
	if got := float64(w1[o*in+i] - w0[o*in+i]); got-want1 > 1e-6 || want1-got > 1e-6 {
		t.Errorf("W'−W at [%d, %d] = %v, want %v", o, i, got, want1)
	}
}

func TestFuseQuantized(t *testing.T) {
	e := mxtest.Go(t)
	m, raw := tinyCheckpoint(t, e, "mixed")
	// The model computes with float32 copies of the bfloat16 scales and biases; fuse those,
	// so the comparison below measures the fuse, not bfloat16 storage.
	raw = maps.Clone(raw)
	for n, arr := range raw {
		if arr.DType().IsFloat() {
			raw[n] = mx.AsType(arr, mx.Float32)
		}
	}
	a, err := Attach(m, Config{Rank: 4, Scale: 8}, 8)
	if err != nil {
		t.Fatal(err)
	}
	randomizeB(t, a, 8, 0.05)
	want := logits(m)
	f := a.File("")
	a.Detach()
	adapterEffect := maxAbsDiff(want, logits(m))

	// Re-quantized with each module's own bits (8 for attention and dense MLP under "mixed").
	weights, cfg, err := FuseTensors(m.Config, raw, f, false)
	if err != nil {
		t.Fatal(err)
	}
	q := "model.decoder.layers.0.self_attn.q_proj"
	if weights[q+".scales"] == nil || weights[q+".weight"].DType() != mx.Uint32 || !slices.Equal(weights[q+".weight"].Shape(), []int{64, 16}) {
		t.Fatalf("%s not re-quantized at 8 bits: %v", q, weights[q+".weight"])
	}
	fused, err := diffusiongemma.Build(e, cfg, weights, diffusiongemma.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dq := maxAbsDiff(logits(fused), want)
	t.Logf("quantized fuse (re-quantized, 8-bit modules): max logit diff vs base+adapter %g (adapter moves logits by up to %g)", dq, adapterEffect)
	// Re-quantizing rounds each fused weight to its group's 8-bit grid (error ≤ half a step,
	// 0.2% of the group's range). The random tiny model amplifies small weight changes (a few
	// percent moves the logits by several units, partly through top-k routing flips), so the
	// bound is relative to what the adapter does: the fused model must sit at least ten
	// times closer to base+adapter than the base does.
	if dq > adapterEffect/10 {
		t.Errorf("re-quantized fuse: max logit diff %g, want ≤ %g (a tenth of the adapter's effect)", dq, adapterEffect/10)
	}

	// dequantize: adapted modules dense, so only float rounding separates the two.
	weights, cfg, err = FuseTensors(m.Config, raw, f, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := weights[q+".scales"]; ok || weights[q+".weight"].DType() != mx.Float32 {
		t.Fatalf("%s not stored dense", q)
	}
	if bits, _, isQ := cfg.Quantization.For(q); isQ {
		t.Errorf("quantization map still says %s is %d-bit", q, bits)
	}
	if _, _, isQ := cfg.Quantization.For("model.decoder.layers.0.router.proj"); !isQ {
		t.Error("the router lost its quantization")
	}
	if _, _, isQ := m.Config.Quantization.For(q); !isQ {
		t.Error("FuseTensors changed the base model's config")
	}
	fused, err = diffusiongemma.Build(e, cfg, weights, diffusiongemma.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Dense W' = dequant(W) + Δ against the quantized matmul plus the residual: float32
	// rounding only, as in TestFuseDense.
	dd := maxAbsDiff(logits(fused), want)
	tol := 1e-5 * maxAbs(want)
	t.Logf("quantized fuse (dequantized): max logit diff vs base+adapter %g (tolerance %g)", dd, tol)
	if dd > tol {
		t.Errorf("dequantized fuse: max logit diff %g, want ≤ %g", dd, tol)
	}

	// An adapter that does not fit is refused before anything is computed.
	wrong := &AdapterFile{Config: f.Config, Modules: map[string]Weights{
		q: {A: mx.Zeros(e, []int{32, 4}, mx.Float32), B: mx.Zeros(e, []int{4, 64}, mx.Float32)},
	}}
	if _, _, err := FuseTensors(m.Config, raw, wrong, false); !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), q+".lora_a: adapter [32 4], model [64 4]") {
		t.Errorf("fusing a misfit adapter: %v", err)
	}
	if _, _, err := FuseTensors(m.Config, raw, nil, false); err == nil {
		t.Error("FuseTensors(nil adapter) succeeded")
	}
	// A checkpoint map that lacks the adapted weight.
	raw = maps.Clone(raw)
	delete(raw, q+".scales")
	delete(raw, q+".weight")
	if _, _, err := FuseTensors(m.Config, raw, f, false); err == nil || !strings.Contains(err.Error(), "no "+q+".weight") {
		t.Errorf("fusing into a map without %s: %v", q, err)
	}
}
