package lora

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
)

func separateConfig() Config {
	return Config{Rank: 4, Scale: 2, Keys: []string{"self_attn.q_proj", "self_attn.k_proj", "mlp.down_proj"}, Encoder: EncoderModeSeparate}
}

// TestSeparateAttach: a fresh separate adapter computes the base model (B = 0 in both
// passes), has an encoder-pass pair per module, draws its decoder A from the other half of
// the key than its encoder A, and counts both passes' parameters.
func TestSeparateAttach(t *testing.T) {
	e := mxtest.Go(t)
	m := tinyModel(t, e, "0")
	base := logits(m)
	a, err := Attach(m, separateConfig(), 3)
	if err != nil {
		t.Fatal(err)
	}
	assertBitwise(t, "step-0 separate adapter", logits(m), base)
	p := a.Params()
	// q, k, down on 2 layers, two passes, A and B.
	if len(p) != 24 {
		t.Fatalf("%d tensors, want 24: %v", len(p), a.Names())
	}
	dec, enc := "model.decoder.layers.0.self_attn.q_proj.lora_a", "model.encoder.language_model.layers.0.self_attn.q_proj.lora_a"
	if p[dec] == nil || p[enc] == nil {
		t.Fatalf("missing %s or %s in %v", dec, enc, a.Names())
	}
	if slices.Equal(p[dec].Float32s(), p[enc].Float32s()) {
		t.Error("the two passes' A are equal: they must be drawn independently")
	}
	shared, err := Attach(tinyModel(t, e, "0"), Config{Rank: 4, Scale: 2, Keys: separateConfig().Keys}, 3)
	if err != nil {
		t.Fatal(err)
	}
	if 2*shared.NumParams() != a.NumParams() {
		t.Errorf("separate has %d parameters, shared %d: want twice", a.NumParams(), shared.NumParams())
	}
}

// TestSeparateSemantics pins what each pass computes. A separate adapter whose encoder
// weights equal its decoder weights is the shared adapter, bit for bit; one without encoder
// weights leaves the encoder pass to the base model, which is what encoding with the
// adapter detached and decoding with it attached computes.
func TestSeparateSemantics(t *testing.T) {
	e := mxtest.Go(t)
	m := tinyModel(t, e, "0")
	sh, err := Attach(m, Config{Rank: 4, Scale: 2, Keys: separateConfig().Keys}, 3)
	if err != nil {
		t.Fatal(err)
	}
	randomizeB(t, sh, 9, 0.2)
	want := logits(m)
	f := sh.File("base")
	sh.Detach()

	equal := &AdapterFile{Config: f.Config, Modules: map[string]Weights{}}
	equal.Config.LoRAParameters.Encoder = EncoderModeSeparate
	decoderOnly := &AdapterFile{Config: equal.Config, Modules: map[string]Weights{}}
	for mod, w := range f.Modules {
		enc, _ := diffusiongemma.EncoderModule(mod)
		equal.Modules[mod], equal.Modules[enc] = w, w
		decoderOnly.Modules[mod] = w
	}
	a, err := Mount(m, equal)
	if err != nil {
		t.Fatal(err)
	}
	assertBitwise(t, "separate with equal weights", logits(m), want)
	a.Detach()

	// Encoder pass without the adapter, decoder pass with it.
	prompt := mx.FromInt32(e, []int32{2, 105, 7, 8, 9, 106, 107, 105, 10, 11, 12}, 1, 11)
	canvas := mx.FromInt32(e, []int32{5, 9, 300, 4, 1, 1}, 1, 6)
	c := m.NewCache()
	m.Encode(prompt, c)
	if _, err = Mount(m, decoderOnly); err != nil {
		t.Fatal(err)
	}
	byHand := m.Decode(canvas, c, nil).Float32s()
	assertBitwise(t, "decoder-only adapter", logits(m), byHand)
	if maxAbsDiff(byHand, want) < 1e-3 {
		t.Fatal("the encoder pass's adapter changes nothing: the test proves nothing")
	}
}

// TestSeparateFiles: a separate adapter writes its encoder-pass weights under
// "model.encoder.language_model.layers.N.<key>" and lora_parameters.encoder "separate",
// and reads back to the same function; a shared one writes neither.
func TestSeparateFiles(t *testing.T) {
	e := mxtest.Go(t)
	m := tinyModel(t, e, "0")
	a, err := Attach(m, separateConfig(), 3)
	if err != nil {
		t.Fatal(err)
	}
	randomizeB(t, a, 4, 0.2)
	want := logits(m)
	dir := t.TempDir()
	if err := a.File("base").Write(dir); err != nil {
		t.Fatal(err)
	}
	a.Detach()
	var ac struct {
		LoRAParameters map[string]any `json:"lora_parameters"`
	}
	raw, err := os.ReadFile(filepath.Join(dir, ConfigFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &ac); err != nil || ac.LoRAParameters["encoder"] != EncoderModeSeparate {
		t.Errorf("adapter_config.json lora_parameters %v (%v), want encoder %q", ac.LoRAParameters, err, EncoderModeSeparate)
	}
	f, err := LoadDir(e, dir)
	if err != nil {
		t.Fatal(err)
	}
	if !f.Separate() || len(f.Modules) != 12 {
		t.Errorf("loaded separate %v with %d modules, want true and 12", f.Separate(), len(f.Modules))
	}
	if _, ok := f.Modules["model.encoder.language_model.layers.1.mlp.down_proj"]; !ok {
		t.Errorf("no encoder-pass module in %v", f.ModuleNames())
	}
	if _, err := Mount(m, f); err != nil {
		t.Fatal(err)
	}
	assertBitwise(t, "separate adapter read back", logits(m), want)

	// A config that says shared next to encoder-pass tensors contradicts itself.
	ac.LoRAParameters["encoder"] = EncoderModeShared
	var full map[string]any
	if err := json.Unmarshal(raw, &full); err != nil {
		t.Fatal(err)
	}
	full["lora_parameters"] = ac.LoRAParameters
	b, _ := json.Marshal(full)
	if err := os.WriteFile(filepath.Join(dir, ConfigFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadDir(e, dir); err == nil || !strings.Contains(err.Error(), `says encoder "shared" but the file holds encoder-pass weights`) {
		t.Errorf("shared config with encoder tensors: %v", err)
	}
}

// TestSeparateMergeAndFuse: merging a separate adapter with a shared one computes both
// stacked, pass by pass; fusing a separate adapter is refused with the reason.
func TestSeparateMergeAndFuse(t *testing.T) {
	e := mxtest.Go(t)
	m := tinyModel(t, e, "0")
	a1, err := Attach(m, separateConfig(), 1)
	if err != nil {
		t.Fatal(err)
	}
	randomizeB(t, a1, 1, 0.2)
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
	if !merged.Separate() || merged.Rank() != 6 {
		t.Errorf("merged: separate %v rank %d, want true and 6", merged.Separate(), merged.Rank())
	}
	if _, err := Mount(m, merged); err != nil {
		t.Fatal(err)
	}
	if d, tol := maxAbsDiff(logits(m), stacked), 1e-6*maxAbs(stacked); d > tol {
		t.Errorf("merged vs stacked: max diff %g > %g", d, tol)
	}
	w := map[string]*mx.Array{}
	for n, p := range m.DenseTensors() {
		w[n] = *p
	}
	if _, _, err := FuseTensors(m.Config, w, f1, false); !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "one set of weights for both passes") {
		t.Errorf("fusing a separate adapter: %v", err)
	}
}

// TestCheckTargets: a PEFT target_modules that names no linear of the model is refused,
// as a regex or as a list; one that names some is fine.
func TestCheckTargets(t *testing.T) {
	e := mxtest.Go(t)
	m := tinyModel(t, e, "0")
	for _, c := range []struct {
		raw string
		ok  bool
	}{
		{`"^model\\.decoder\\.layers\\.(?:0|1)\\.self_attn\\.q_proj$"`, true},
		{`["q_proj", "v_proj"]`, true},
		{`"^model\\.decoder\\.layers\\.(?:7|8)\\.self_attn\\.q_proj$"`, false},
		{`["query_key_value"]`, false},
		{`"(?<=lookbehind)x"`, true}, // Python-only syntax: not checked here
		{`42`, false},
	} {
		err := checkTargets(m, json.RawMessage(c.raw))
		if (err == nil) != c.ok {
			t.Errorf("checkTargets(%s) = %v, want ok %v", c.raw, err, c.ok)
		}
	}
}
