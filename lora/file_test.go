package lora

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
)

func TestSaveLoadMountRoundTrip(t *testing.T) {
	e := mxtest.Go(t)
	m := tinyModel(t, e, "0")
	a, err := Attach(m, Config{Rank: 4, Scale: 8, Dropout: 0.05}, 11)
	if err != nil {
		t.Fatal(err)
	}
	randomizeB(t, a, 4, 0.05)
	want := logits(m)
	dir := t.TempDir()
	if err := Save(dir, a, map[string]any{"step": 100, "note": "x"}); err != nil {
		t.Fatal(err)
	}
	ac := NewAdapterConfig(a.Config(), "/models/tiny")
	ac.Extra = map[string]any{"learning_rate": 1e-4, "iters": 200, "num_layers": 99}
	if err := WriteConfig(dir, ac); err != nil {
		t.Fatal(err)
	}
	a.Detach()

	f, err := LoadDir(e, dir)
	if err != nil {
		t.Fatal(err)
	}
	if f.Rank() != 4 || f.Scale() != 8 || f.Config.LoRAParameters.Dropout != 0.05 || f.Config.BaseModel != "/models/tiny" {
		t.Errorf("loaded config %+v", f.Config)
	}
	if f.Config.Extra["iters"] != 200.0 || f.Config.Extra["learning_rate"] != 1e-4 {
		t.Errorf("extra config not kept: %v", f.Config.Extra)
	}
	if len(f.Modules) != 13 {
		t.Errorf("%d modules, want 13", len(f.Modules))
	}
	b, err := Mount(m, f)
	if err != nil {
		t.Fatal(err)
	}
	assertBitwise(t, "mounted from disk", logits(m), want)
	if !slices.Equal(b.Names(), a.Names()) || b.NumParams() != a.NumParams() {
		t.Error("mounted adapter has other parameters than the saved one")
	}

	// The tensor file: f32 under the mlx-lm names, metadata with the extras.
	tensors, meta, err := mx.LoadSafetensors(e, filepath.Join(dir, AdaptersFile))
	if err != nil {
		t.Fatal(err)
	}
	if len(tensors) != 26 || meta["format"] != "mlx" || meta["step"] != "100" || meta["note"] != "x" {
		t.Errorf("%d tensors, metadata %v", len(tensors), meta)
	}
	q := tensors["model.decoder.layers.1.self_attn.q_proj.lora_b"]
	if q == nil || q.DType() != mx.Float32 || !slices.Equal(q.Shape(), []int{4, 128}) {
		t.Errorf("layer 1 q_proj lora_b = %v", q)
	}
	// The config file: indent 2, typed fields win over Extra's "num_layers".
	raw, err := os.ReadFile(filepath.Join(dir, ConfigFile))
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	lp := got["lora_parameters"].(map[string]any)
	if got["fine_tune_type"] != "lora" || got["model_type"] != "diffusion_gemma" || got["num_layers"] != -1.0 ||
		lp["rank"] != 4.0 || lp["scale"] != 8.0 || len(lp["keys"].([]any)) != 7 {
		t.Errorf("adapter_config.json = %s", raw)
	}
	if !strings.Contains(string(raw), "\n  \"base_model\": \"/models/tiny\"") {
		t.Errorf("adapter_config.json is not indented by 2:\n%s", raw)
	}
	if err := Save(dir, a, map[string]any{"format": "pt"}); err == nil {
		t.Error("Save accepted a metadata key overriding format")
	}
}

func TestAdapterFileWrite(t *testing.T) {
	e := mxtest.Go(t)
	m := tinyModel(t, e, "0")
	a, err := Attach(m, Config{Rank: 2, Scale: 3, Keys: []string{"mlp.down_proj", "self_attn.q_proj"}, NumLayers: 1}, 0)
	if err != nil {
		t.Fatal(err)
	}
	randomizeB(t, a, 1, 0.1)
	want := logits(m)
	a.Detach()
	dir := t.TempDir()
	if err := a.File("base").Write(dir); err != nil {
		t.Fatal(err)
	}
	f, err := LoadDir(e, dir)
	if err != nil {
		t.Fatal(err)
	}
	// NumLayers 1: only layer 1; keys come back in canonical order.
	if got := f.ModuleNames(); !slices.Equal(got, []string{"model.decoder.layers.1.self_attn.q_proj", "model.decoder.layers.1.mlp.down_proj"}) {
		t.Errorf("modules %v", got)
	}
	if got := f.Config.LoRAParameters.Keys; !slices.Equal(got, []string{"self_attn.q_proj", "mlp.down_proj"}) {
		t.Errorf("keys %v", got)
	}
	if f.Config.NumLayers != 1 || f.Scale() != 3 {
		t.Errorf("config %+v", f.Config)
	}
	if _, err := Mount(m, f); err != nil {
		t.Fatal(err)
	}
	assertBitwise(t, "written file", logits(m), want)
}

// writeAdapter writes a tensor file and configs into a fresh directory.
func writeAdapter(t *testing.T, file string, tensors map[string]*mx.Array, configs map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	if tensors != nil {
		if err := mx.SaveSafetensors(filepath.Join(dir, file), tensors, nil); err != nil {
			t.Fatal(err)
		}
	}
	for name, body := range configs {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestLoadVariants(t *testing.T) {
	e := mxtest.Go(t)
	mod := "model.decoder.layers.0.self_attn.q_proj"
	// A [3, 2] = [[1 2] [3 4] [5 6]], B [2, 1] = [[7] [8]] in canonical orientation;
	// PEFT stores Aᵀ = [[1 3 5] [2 4 6]] and Bᵀ = [[7 8]].
	aVals, bVals := []float32{1, 2, 3, 4, 5, 6}, []float32{7, 8}
	mlxT := func(prefix string) map[string]*mx.Array {
		return map[string]*mx.Array{
			prefix + mod + ".lora_a": mx.FromFloat32(e, aVals, 3, 2),
			prefix + mod + ".lora_b": mx.FromFloat32(e, bVals, 2, 1),
		}
	}
	peftT := func(prefix, module string) map[string]*mx.Array {
		return map[string]*mx.Array{
			prefix + module + ".lora_A.weight": mx.FromFloat32(e, []float32{1, 3, 5, 2, 4, 6}, 2, 3),
			prefix + module + ".lora_B.weight": mx.FromFloat32(e, bVals, 1, 2),
		}
	}
	mlxCfg := `{"fine_tune_type": "lora", "lora_parameters": {"rank": 2, "scale": 6.5, "dropout": 0.0}}`
	for _, tc := range []struct {
		name    string
		file    string
		tensors map[string]*mx.Array
		configs map[string]string
		scale   float64
	}{
		{"mlx", AdaptersFile, mlxT(""), map[string]string{ConfigFile: mlxCfg}, 6.5},
		{"mlx language_model prefix", AdaptersFile, mlxT("language_model."), map[string]string{ConfigFile: mlxCfg}, 6.5},
		// lora_parameters without scale: mlx-lm's default 20.
		{"mlx default scale", AdaptersFile, mlxT(""), map[string]string{ConfigFile: `{"lora_parameters": {"rank": 2}}`}, 20},
		// optiq_lora_config.json's scale wins over adapter_config.json's.
		{"optiq config", AdaptersFile, mlxT(""), map[string]string{ConfigFile: mlxCfg, OptiqConfigFile: `{"rank": 2, "scale": 4, "lora_parameters": {"scale": 3}}`}, 3},
		{"optiq config only", AdaptersFile, mlxT(""), map[string]string{OptiqConfigFile: `{"rank": 2, "scale": 4}`}, 4},
		// PEFT: scale = lora_alpha / r = 16 / 2 = 8.
		{"peft", PEFTWeightsFile, peftT("base_model.model.", mod), map[string]string{ConfigFile: `{"peft_type": "LORA", "r": 2, "lora_alpha": 16}`}, 8},
		{"peft no prefix", PEFTWeightsFile, peftT("", mod), map[string]string{ConfigFile: `{"peft_type": "LORA", "r": 2, "lora_alpha": 16}`}, 8},
		// rsLoRA: lora_alpha / √r = 16 / √2.
		{"peft rslora", PEFTWeightsFile, peftT("base_model.model.", mod), map[string]string{ConfigFile: `{"r": 2, "lora_alpha": 16, "use_rslora": true}`}, 16 / math.Sqrt(2)},
		// PEFT without lora_alpha: PEFT's default 8, so 8 / 2 = 4.
		{"peft default alpha", PEFTWeightsFile, peftT("", mod), map[string]string{ConfigFile: `{"r": 2}`}, 4},
		{"peft hf text path", PEFTWeightsFile, peftT("base_model.model.", "model.language_model.layers.0.self_attn.q_proj"),
			map[string]string{ConfigFile: `{"r": 2, "lora_alpha": 2}`}, 1},
		{"peft language_model prefix", PEFTWeightsFile, peftT("base_model.model.language_model.", mod),
			map[string]string{ConfigFile: `{"r": 2, "lora_alpha": 2}`}, 1},
	} {
		dir := writeAdapter(t, tc.file, tc.tensors, tc.configs)
		f, err := LoadDir(e, dir)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		w, ok := f.Modules[mod]
		if !ok || len(f.Modules) != 1 {
			t.Errorf("%s: modules %v, want only %s", tc.name, f.ModuleNames(), mod)
			continue
		}
		if !slices.Equal(w.A.Shape(), []int{3, 2}) || !slices.Equal(w.A.Float32s(), aVals) ||
			!slices.Equal(w.B.Shape(), []int{2, 1}) || !slices.Equal(w.B.Float32s(), bVals) {
			t.Errorf("%s: A %v %v, B %v %v; want canonical [3 2] %v, [2 1] %v", tc.name,
				w.A.Shape(), w.A.Float32s(), w.B.Shape(), w.B.Float32s(), aVals, bVals)
		}
		if f.Scale() != tc.scale || f.Rank() != 2 {
			t.Errorf("%s: scale %v rank %d, want %v and 2", tc.name, f.Scale(), f.Rank(), tc.scale)
		}
		if !slices.Equal(f.Config.LoRAParameters.Keys, []string{"self_attn.q_proj"}) {
			t.Errorf("%s: keys %v", tc.name, f.Config.LoRAParameters.Keys)
		}
	}
}

func TestLoadErrors(t *testing.T) {
	e := mxtest.Go(t)
	mod := "model.decoder.layers.0.self_attn.q_proj"
	good := func() map[string]*mx.Array {
		return map[string]*mx.Array{
			mod + ".lora_a": mx.Zeros(e, []int{64, 4}, mx.Float32),
			mod + ".lora_b": mx.Zeros(e, []int{4, 64}, mx.Float32),
		}
	}
	cfg := map[string]string{ConfigFile: `{"lora_parameters": {"rank": 4, "scale": 8}}`}
	with := func(edit func(map[string]*mx.Array)) map[string]*mx.Array {
		m := good()
		edit(m)
		return m
	}
	for _, tc := range []struct {
		name    string
		tensors map[string]*mx.Array
		configs map[string]string
		want    string
	}{
		{"no config", good(), nil, "neither adapter_config.json nor optiq_lora_config.json"},
		{"bad json", good(), map[string]string{ConfigFile: `{"lora_parameters": `}, "adapter_config.json"},
		{"bad field type", good(), map[string]string{ConfigFile: `{"lora_parameters": {"rank": "four"}}`}, "lora_parameters"},
		{"dora", good(), map[string]string{ConfigFile: `{"fine_tune_type": "dora", "lora_parameters": {"rank": 4, "scale": 8}}`}, `fine_tune_type "dora"`},
		{"peft ia3", good(), map[string]string{ConfigFile: `{"peft_type": "IA3", "r": 4}`}, `peft_type "IA3"`},
		{"rank pattern", good(), map[string]string{ConfigFile: `{"peft_type": "LORA", "r": 4, "rank_pattern": {"q_proj": 8}}`}, "rank_pattern"},
		{"no scale", good(), map[string]string{ConfigFile: `{"base_model": "x"}`}, "no scale"},
		{"not lora", with(func(m map[string]*mx.Array) { m["model.decoder.norm.weight"] = mx.Zeros(e, []int{64}, mx.Float32) }), cfg,
			`tensor "model.decoder.norm.weight" is not a LoRA tensor`},
		{"missing b", with(func(m map[string]*mx.Array) { delete(m, mod+".lora_b") }), cfg, mod + ".lora_b: missing"},
		{"3-d", with(func(m map[string]*mx.Array) { m[mod+".lora_a"] = mx.Zeros(e, []int{1, 64, 4}, mx.Float32) }), cfg, "want 2-D"},
		{"int dtype", with(func(m map[string]*mx.Array) { m[mod+".lora_b"] = mx.Zeros(e, []int{4, 64}, mx.Int32) }), cfg, "dtype int32"},
		{"rank vs config", good(), map[string]string{ConfigFile: `{"lora_parameters": {"rank": 8, "scale": 8}}`},
			mod + ".lora_a: shape [64 4], want [in, r] with r = 8"},
		{"two spellings", with(func(m map[string]*mx.Array) {
			m["base_model.model."+mod+".lora_A.weight"] = mx.Zeros(e, []int{4, 64}, mx.Float32)
		}), cfg,
			"are both " + mod + ".lora_a"},
	} {
		dir := writeAdapter(t, AdaptersFile, tc.tensors, tc.configs)
		_, err := LoadDir(e, dir)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: LoadDir error = %v, want it to contain %q", tc.name, err, tc.want)
		}
	}

	if _, err := LoadDir(e, t.TempDir()); !errors.Is(err, ErrFormat) {
		t.Errorf("empty dir: %v, want ErrFormat", err)
	}
	// A truncated tensor file is an error, never a panic.
	dir := writeAdapter(t, AdaptersFile, good(), cfg)
	p := filepath.Join(dir, AdaptersFile)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b[:len(b)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadFile(e, p); err == nil {
		t.Error("truncated file loaded")
	}
}

func TestConfigJSON(t *testing.T) {
	c := Config{Rank: 16, Scale: 4, Dropout: 0.1, Keys: []string{"mlp.up_proj"}, NumLayers: 8}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"num_layers":8,"lora_parameters":{"rank":16,"scale":4,"dropout":0.1,"keys":["mlp.up_proj"]}}`
	if string(b) != want {
		t.Errorf("json.Marshal(Config) = %s, want %s", b, want)
	}
	var back Config
	if err := json.Unmarshal(b, &back); err != nil || back.Rank != 16 || back.Scale != 4 || back.Dropout != 0.1 ||
		back.NumLayers != 8 || !slices.Equal(back.Keys, c.Keys) {
		t.Errorf("round trip = %+v, %v", back, err)
	}
	if err := json.Unmarshal([]byte(`{"lora_parameters": []}`), &back); err == nil {
		t.Error("a list as lora_parameters was accepted")
	}
	var ac AdapterConfig
	if err := json.Unmarshal([]byte(`[1]`), &ac); err == nil {
		t.Error("a list as adapter config was accepted")
	}
	// optiq writes no num_layers: it reads as 0 (all layers) and is not written back.
	if err := json.Unmarshal([]byte(`{"base_model": "m", "fine_tune_type": "lora", "model_type": "diffusion_gemma",
		"lora_parameters": {"rank": 8, "scale": 8.0, "dropout": 0.0, "keys": ["self_attn.q_proj"]}, "seed": 3}`), &ac); err != nil {
		t.Fatal(err)
	}
	if ac.NumLayers != 0 || ac.LoRAConfig().numLayers() != -1 || ac.Extra["seed"] != 3.0 {
		t.Errorf("optiq config = %+v", ac)
	}
	out, err := json.Marshal(ac)
	if err != nil {
		t.Fatal(err)
	}
	const wantAC = `{"base_model":"m","fine_tune_type":"lora","lora_parameters":{"rank":8,"scale":8,"dropout":0,"keys":["self_attn.q_proj"]},"model_type":"diffusion_gemma","seed":3}`
	if string(out) != wantAC {
		t.Errorf("json.Marshal(AdapterConfig) = %s, want %s", out, wantAC)
	}
	if err := WriteConfig(filepath.Join(t.TempDir(), "a", "b"), ac); err != nil {
		t.Errorf("WriteConfig into a new directory: %v", err)
	}
	ac.Extra = map[string]any{"bad": math.Inf(1)}
	if err := WriteConfig(t.TempDir(), ac); err == nil {
		t.Error("WriteConfig wrote a non-finite number")
	}
}
