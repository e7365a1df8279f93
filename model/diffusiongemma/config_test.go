package diffusiongemma

import (
	"encoding/json"
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// checkpointDir builds a checkpoint directory from testdata files: dst name → testdata name.
func checkpointDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for dst, src := range files {
		b, err := os.ReadFile(filepath.Join("testdata", src))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, dst), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// writeDir writes literal files into a fresh directory.
func writeDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func loadNested(t *testing.T) *Config {
	t.Helper()
	c, err := LoadConfig(checkpointDir(t, map[string]string{"config.json": "config.nested.json"}))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// pattern renders layer types as S/F letters so expectations read at a glance.
func pattern(lt []LayerType) string {
	var b strings.Builder
	for _, l := range lt {
		switch l {
		case SlidingAttention:
			b.WriteByte('S')
		case FullAttention:
			b.WriteByte('F')
		default:
			b.WriteByte('?')
		}
	}
	return b.String()
}

// realPattern is [S×5, F]×5: full layers at 5, 11, 17, 23, 29 (§1.2).
const realPattern = "SSSSSF" + "SSSSSF" + "SSSSSF" + "SSSSSF" + "SSSSSF"

func TestLoadConfigNestedFixture(t *testing.T) {
	c := loadNested(t)
	tc := &c.TextConfig
	if c.Layout != LayoutNested || c.GenerationSource != GenerationFromConfig {
		t.Errorf("layout %q, generation source %q; want nested, config.json", c.Layout, c.GenerationSource)
	}
	ints := []struct {
		name      string
		got, want int
	}{
		{"vocab_size", tc.VocabSize, 262144},
		{"hidden_size", tc.HiddenSize, 2816},
		{"intermediate_size", tc.IntermediateSize, 2112},
		{"moe_intermediate_size", tc.MoeIntermediateSize, 704},
		{"num_hidden_layers", tc.NumHiddenLayers, 30},
		{"num_attention_heads", tc.NumAttentionHeads, 16},
		{"num_key_value_heads", tc.NumKeyValueHeads, 8},
		{"num_global_key_value_heads", tc.NumGlobalKeyValueHeads, 2},
		{"head_dim", tc.HeadDim, 256},
		{"global_head_dim", tc.GlobalHeadDim, 512},
		{"sliding_window", tc.SlidingWindow, 1024},
		{"num_experts", tc.NumExperts, 128},
		{"top_k_experts", tc.TopKExperts, 8},
		{"canvas_length", c.CanvasLength, 256},
		{"boi_token_id", c.BOITokenID, 255999},
		{"eoi_token_id", c.EOITokenID, 258882},
		{"image_token_id", c.ImageTokenID, 258880},
		{"vision_soft_tokens_per_image", c.VisionSoftTokensPerImage, 280},
		{"vision hidden_size", c.VisionConfig.HiddenSize, 1152},
		{"vision num_hidden_layers", c.VisionConfig.NumHiddenLayers, 27},
		{"vision head_dim", c.VisionConfig.HeadDim, 72},
		{"max_denoising_steps", c.GenerationConfig.MaxDenoisingSteps, 48},
		{"quantization bits", c.Quantization.Bits, 4},
		{"quantization group_size", c.Quantization.GroupSize, 64},
	}
	for _, tt := range ints {
		if tt.got != tt.want {
			t.Errorf("%s = %d, want %d", tt.name, tt.got, tt.want)
		}
	}
	if got := pattern(tc.LayerTypes); got != realPattern {
		t.Errorf("layer_types = %s, want %s", got, realPattern)
	}
	if got := c.EOSSet(); !slices.Equal(got, []int{1, 50, 106}) {
		t.Errorf("EOSSet() = %v, want [1 50 106]", got)
	}
	if c.VideoTokenID != nil {
		t.Errorf("video_token_id = %d, want absent", *c.VideoTokenID)
	}
	if r, on := c.GenerationConfig.Stop(); !on || r != (StopRule{0.005, 1}) {
		t.Errorf("Stop() = %+v, %v; want {0.005 1}, true (embedded thresholds)", r, on)
	}
}

// The flat OptiQ layout carries no text dims: back-filled from §1.2 they must equal the nested
// layout's explicit values. The one legitimate difference is eos_token_id: in the flat layout
// the top-level [1, 106] is also read as the text field (text = defaults ⊕ top level).
func TestLoadConfigLayoutsAgree(t *testing.T) {
	nested := loadNested(t)
	flat, err := LoadConfig(checkpointDir(t, map[string]string{
		"config.json":            "config.flat-optiq.json",
		"generation_config.json": "generation_config.json",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if flat.Layout != LayoutFlat {
		t.Errorf("flat layout detected as %q", flat.Layout)
	}
	if !slices.Equal(flat.TextConfig.EOSTokenID, []int{1, 106}) || !slices.Equal(nested.TextConfig.EOSTokenID, []int{1}) {
		t.Errorf("text eos: flat %v (want [1 106]), nested %v (want [1])", flat.TextConfig.EOSTokenID, nested.TextConfig.EOSTokenID)
	}
	ft := flat.TextConfig
	ft.EOSTokenID = nested.TextConfig.EOSTokenID
	if !reflect.DeepEqual(ft, nested.TextConfig) {
		t.Errorf("flat text config\n%+v\nwant (nested)\n%+v", ft, nested.TextConfig)
	}
	if !reflect.DeepEqual(flat.VisionConfig, nested.VisionConfig) {
		t.Errorf("vision configs differ:\n%+v\n%+v", flat.VisionConfig, nested.VisionConfig)
	}
	if !reflect.DeepEqual(flat.GenerationConfig, nested.GenerationConfig) {
		t.Errorf("generation configs differ:\n%+v\n%+v", flat.GenerationConfig, nested.GenerationConfig)
	}
	if flat.GenerationSource != GenerationFromFile {
		t.Errorf("flat generation source %q, want %q", flat.GenerationSource, GenerationFromFile)
	}
	if got := flat.EOSSet(); !slices.Equal(got, []int{1, 50, 106}) {
		t.Errorf("flat EOSSet() = %v, want [1 50 106]", got)
	}
	if bits, group, q := flat.Quantization.For("model.decoder.layers.0.self_attn.q_proj"); bits != 8 || group != 64 || !q {
		t.Errorf("flat q_proj quantization = %d/%d/%v, want 8/64/true", bits, group, q)
	}
	if bits, _, _ := flat.Quantization.For("model.decoder.layers.1.self_attn.q_proj"); bits != 4 {
		t.Errorf("flat layer-1 q_proj bits = %d, want default 4", bits)
	}
}

// Without generation_config.json the OptiQ checkpoint has no generation config at all (§4.6:
// optiq's loaded config has none): defaults, stop rule off, EOS from config.json only.
func TestLoadConfigFlatWithoutGenerationFile(t *testing.T) {
	c, err := LoadConfig(checkpointDir(t, map[string]string{"config.json": "config.flat-optiq.json"}))
	if err != nil {
		t.Fatal(err)
	}
	g := c.GenerationConfig
	if c.GenerationSource != GenerationFromDefaults {
		t.Errorf("generation source %q, want defaults", c.GenerationSource)
	}
	if _, on := g.Stop(); on {
		t.Error("stop rule on without a generation config")
	}
	if tMin, tMax := g.TemperatureRange(); tMin != 0.4 || tMax != 0.8 {
		t.Errorf("TemperatureRange() = %g, %g; want 0.4, 0.8", tMin, tMax)
	}
	if g.MaxDenoisingSteps != 48 || g.MaxNewTokens != 256 || g.EntropyBound() != 0.1 || g.SamplerConfig != nil {
		t.Errorf("defaults wrong: %+v, entropy bound %g", g, g.EntropyBound())
	}
	if got := c.EOSSet(); !slices.Equal(got, []int{1, 106}) {
		t.Errorf("EOSSet() = %v, want [1 106]", got)
	}
}

// An empty config is the flat layout with nothing given: every §1.2 value comes from the
// defaults, and layer_types from the default rule for 30 layers.
func TestParseConfigFlatDefaults(t *testing.T) {
	c, err := ParseConfig([]byte(`{"model_type": "diffusion_gemma"}`))
	if err != nil {
		t.Fatal(err)
	}
	tc := c.TextConfig
	want := DefaultTextConfig()
	want.LayerTypes = tc.LayerTypes
	if !reflect.DeepEqual(tc, want) {
		t.Errorf("text config\n%+v\nwant\n%+v", tc, want)
	}
	// Spot-check the §1.2 table independently of DefaultTextConfig.
	if tc.ModelType != "diffusion_gemma_text" || tc.HiddenActivation != "gelu_pytorch_tanh" ||
		tc.RMSNormEps != 1e-6 || tc.MaxPositionEmbeddings != 262144 || tc.FinalLogitSoftcapping != 30 ||
		tc.AttentionBias || tc.AttentionDropout != 0 || !tc.TieWordEmbeddings || tc.UseBidirectionalAttention != "vision" ||
		tc.PadTokenID != 0 || !slices.Equal(tc.EOSTokenID, []int{1}) || tc.BOSTokenID != 2 || tc.Dtype != "bfloat16" ||
		tc.InitializerRange != 0.02 || tc.NumExperts != 128 || tc.TopKExperts != 8 {
		t.Errorf("§1.2 defaults not applied: %+v", tc)
	}
	if got := pattern(tc.LayerTypes); got != realPattern {
		t.Errorf("layer_types = %s, want %s", got, realPattern)
	}
	sl, fu := tc.RopeParameters[SlidingAttention], tc.RopeParameters[FullAttention]
	if sl.RopeType != "default" || sl.RopeTheta != 10000 || sl.PartialRotaryFactor != nil {
		t.Errorf("sliding rope = %+v", sl)
	}
	if fu.RopeType != "proportional" || fu.RopeTheta != 1e6 || fu.Partial() != 0.25 || fu.ScalingFactor() != 1 {
		t.Errorf("full rope = %+v", fu)
	}
	if c.CanvasLength != 256 || c.BOITokenID != 255999 || c.EOITokenID != 258882 || c.ImageTokenID != 258880 {
		t.Errorf("top-level defaults not applied: %+v", c)
	}
	if c.VisionConfig != nil || c.Quantization != nil {
		t.Errorf("vision %v / quantization %v invented for a config without them", c.VisionConfig, c.Quantization)
	}
}

// Flat layout: text keys at the top level override the defaults.
func TestParseConfigFlatOverrides(t *testing.T) {
	c, err := ParseConfig([]byte(`{"hidden_size": 1024, "num_hidden_layers": 8, "top_k_experts": 4}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.TextConfig.HiddenSize != 1024 || c.TextConfig.TopKExperts != 4 || c.TextConfig.VocabSize != 262144 {
		t.Errorf("hidden %d top_k %d vocab %d; want 1024, 4, 262144 (default)",
			c.TextConfig.HiddenSize, c.TextConfig.TopKExperts, c.TextConfig.VocabSize)
	}
	// 8 layers: [S×5, F, S, S] → last forced full.
	if got := pattern(c.TextConfig.LayerTypes); got != "SSSSSFSF" {
		t.Errorf("layer_types = %s, want SSSSSFSF", got)
	}
}

func TestUnknownKeysIgnored(t *testing.T) {
	c, err := ParseConfig([]byte(`{
		"transformers_version": "5.0.0", "auto_map": {"x": "y"},
		"text_config": {"hidden_size": 2816, "attention_k_eq_v": true, "enable_moe_block": true, "rope_scaling": null},
		"vision_config": {"future_field": [1, 2]},
		"generation_config": {"do_sample": false, "t_max": 0.7}
	}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.TextConfig.HiddenSize != 2816 || c.VisionConfig.HiddenSize != 1152 || c.GenerationConfig.TMax != 0.7 {
		t.Errorf("known keys lost next to unknown ones: %+v", c)
	}
}

// The default rule: repeat [S×5, F], truncate to n, force the last layer to F.
func TestDefaultLayerTypes(t *testing.T) {
	tests := []struct {
		n    int
		want string
	}{
		{1, "F"},                          // [S] → last forced
		{2, "SF"},                         // tiny preset
		{3, "SSF"},                        //
		{5, "SSSSF"},                      // truncated before the natural F
		{6, "SSSSSF"},                     // exactly one period
		{7, "SSSSSFF"},                    // S at index 6 forced to F
		{8, "SSSSSFSF"},                   //
		{12, "SSSSSFSSSSSF"},              // two periods
		{13, "SSSSSFSSSSSFF"},             //
		{30, realPattern},                 // the real model
		{0, ""},                           // nothing to derive
		{-4, ""},                          // invalid count: Validate reports it
		{18, strings.Repeat("SSSSSF", 3)}, //
	}
	for _, tt := range tests {
		if got := pattern(DefaultLayerTypes(tt.n)); got != tt.want {
			t.Errorf("DefaultLayerTypes(%d) = %s, want %s", tt.n, got, tt.want)
		}
		if tt.n <= 0 {
			continue
		}
		c, err := ParseConfig([]byte(`{"text_config": {"num_hidden_layers": ` + itoa(tt.n) + `}}`))
		if err != nil {
			t.Fatalf("n=%d: %v", tt.n, err)
		}
		if got := pattern(c.TextConfig.LayerTypes); got != tt.want {
			t.Errorf("ParseConfig(num_hidden_layers %d) layer_types = %s, want %s", tt.n, got, tt.want)
		}
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// Explicit layer_types win over the rule, even if the last layer is sliding.
func TestExplicitLayerTypes(t *testing.T) {
	c, err := ParseConfig([]byte(`{"text_config": {"num_hidden_layers": 3,
		"layer_types": ["full_attention", "sliding_attention", "sliding_attention"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := pattern(c.TextConfig.LayerTypes); got != "FSS" {
		t.Errorf("layer_types = %s, want FSS", got)
	}
}

func TestGenerationConfigPrecedence(t *testing.T) {
	const embedded = `{"text_config": {}, "generation_config": {"t_min": 0.3, "confidence_threshold": 0.01}}`
	tests := []struct {
		name       string
		files      map[string]string
		wantSource string
		wantTMin   float64
		wantStop   bool
	}{
		{"file replaces embedded", map[string]string{
			"config.json":            embedded,
			"generation_config.json": `{"t_min": 0.5}`,
		}, GenerationFromFile, 0.5, false},
		{"embedded without file", map[string]string{"config.json": embedded}, GenerationFromConfig, 0.3, true},
		{"neither", map[string]string{"config.json": `{"text_config": {}}`}, GenerationFromDefaults, 0.4, false},
	}
	for _, tt := range tests {
		c, err := LoadConfig(writeDir(t, tt.files))
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		tMin, _ := c.GenerationConfig.TemperatureRange()
		_, stop := c.GenerationConfig.Stop()
		if c.GenerationSource != tt.wantSource || tMin != tt.wantTMin || stop != tt.wantStop {
			t.Errorf("%s: source %q t_min %g stop %v; want %q %g %v", tt.name, c.GenerationSource, tMin, stop,
				tt.wantSource, tt.wantTMin, tt.wantStop)
		}
	}
}

func TestGenerationStopRule(t *testing.T) {
	tests := []struct {
		json string
		want StopRule
		on   bool
	}{
		{`{}`, StopRule{}, false},
		{`{"confidence_threshold": 0.01}`, StopRule{0.01, 1}, true}, // stability defaults to 1
		{`{"stability_threshold": 3}`, StopRule{0.005, 3}, true},    // confidence defaults to 0.005
		{`{"confidence_threshold": 0.01, "stability_threshold": 2}`, StopRule{0.01, 2}, true},
		{`{"confidence_threshold": null}`, StopRule{}, false},
		// The dict form wins and fills its own defaults.
		{`{"diffusion_stopping_config": {"stability_threshold": 4}, "confidence_threshold": 0.5}`, StopRule{0.005, 4}, true},
	}
	for _, tt := range tests {
		var g GenerationConfig
		if err := json.Unmarshal([]byte(tt.json), &g); err != nil {
			t.Fatalf("%s: %v", tt.json, err)
		}
		if got, on := g.Stop(); got != tt.want || on != tt.on {
			t.Errorf("Stop(%s) = %+v, %v; want %+v, %v", tt.json, got, on, tt.want, tt.on)
		}
	}
}

func TestGenerationTemperatureAndSampler(t *testing.T) {
	tests := []struct {
		json       string
		tMin, tMax float64
		bound      float64
	}{
		{`{}`, 0.4, 0.8, 0.1},
		{`{"t_min": 0.2}`, 0.2, 0.8, 0.1},
		// The schedule dict wins over t_min/t_max and fills its own defaults.
		{`{"t_min": 0.2, "linear_temperature_schedule_config": {"t_max": 0.9}}`, 0.4, 0.9, 0.1},
		{`{"sampler_config": {"entropy_bound": 0.25}}`, 0.4, 0.8, 0.25},
	}
	for _, tt := range tests {
		var g GenerationConfig
		if err := json.Unmarshal([]byte(tt.json), &g); err != nil {
			t.Fatalf("%s: %v", tt.json, err)
		}
		tMin, tMax := g.TemperatureRange()
		if tMin != tt.tMin || tMax != tt.tMax || g.EntropyBound() != tt.bound {
			t.Errorf("%s: range %g..%g bound %g; want %g..%g bound %g", tt.json, tMin, tMax, g.EntropyBound(), tt.tMin, tt.tMax, tt.bound)
		}
	}
	var g GenerationConfig
	if err := json.Unmarshal([]byte(`{"sampler_config": {}}`), &g); err != nil {
		t.Fatal(err)
	}
	if g.SamplerConfig.ClsName != EntropyBoundSamplerCls {
		t.Errorf("sampler _cls_name default = %q, want %q", g.SamplerConfig.ClsName, EntropyBoundSamplerCls)
	}
}

func TestTokenIDsJSON(t *testing.T) {
	in := []struct {
		json string
		want TokenIDs
	}{
		{`1`, TokenIDs{1}},
		{`[1, 106, 50]`, TokenIDs{1, 106, 50}},
		{`[]`, TokenIDs{}},
		{`null`, nil},
	}
	for _, tt := range in {
		var got TokenIDs
		if err := json.Unmarshal([]byte(tt.json), &got); err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Unmarshal(%#q) = %v, %v; want %v", tt.json, got, err, tt.want)
		}
	}
	for _, bad := range []string{`"one"`, `[1.5]`, `{"a": 1}`, `1.5`} {
		var got TokenIDs
		if err := json.Unmarshal([]byte(bad), &got); err == nil || !strings.Contains(err.Error(), "token ids") {
			t.Errorf("Unmarshal(%#q) error = %v, want a token ids error", bad, err)
		}
	}
	out := []struct {
		ids  TokenIDs
		want string
	}{
		{TokenIDs{1}, `1`},
		{TokenIDs{1, 106}, `[1,106]`},
		{nil, `null`},
	}
	for _, tt := range out {
		b, err := json.Marshal(tt.ids)
		if err != nil || string(b) != tt.want {
			t.Errorf("Marshal(%v) = %s, %v; want %s", tt.ids, b, err, tt.want)
		}
	}
}

func TestBidirectionalAttentionJSON(t *testing.T) {
	tests := []struct {
		json string
		want BidirectionalAttention
	}{
		{`"vision"`, "vision"},
		{`null`, ""},
		{`false`, ""},
		{`true`, "all"},
	}
	for _, tt := range tests {
		var got BidirectionalAttention = "unset"
		if err := json.Unmarshal([]byte(tt.json), &got); err != nil || got != tt.want {
			t.Errorf("Unmarshal(%s) = %q, %v; want %q", tt.json, got, err, tt.want)
		}
	}
	var b BidirectionalAttention
	if err := json.Unmarshal([]byte(`5`), &b); err == nil {
		t.Error("Unmarshal(5) succeeded, want an error")
	}
}

func TestQuantizationFor(t *testing.T) {
	var q Quantization
	err := json.Unmarshal([]byte(`{
		"group_size": 64, "bits": 4, "mode": "affine",
		"m.q_proj": {"bits": 8},
		"m.k_proj": {"group_size": 32, "bits": 8},
		"m.v_proj": false,
		"m.o_proj": true,
		"quant_method": "mlx"
	}`), &q)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		module    string
		bits      int
		group     int
		quantized bool
	}{
		{"m.gate_proj", 4, 64, true},     // not in the map: default
		{"m.q_proj", 8, 64, true},        // bits overridden, group inherited
		{"m.q_proj.weight", 8, 64, true}, // tensor name tolerated
		{"m.k_proj", 8, 32, true},        // both overridden
		{"m.v_proj", 0, 0, false},        // false = stored unquantized
		{"m.o_proj", 4, 64, true},        // true = default parameters
	}
	for _, tt := range tests {
		bits, group, quantized := q.For(tt.module)
		if bits != tt.bits || group != tt.group || quantized != tt.quantized {
			t.Errorf("For(%q) = %d, %d, %v; want %d, %d, %v", tt.module, bits, group, quantized, tt.bits, tt.group, tt.quantized)
		}
	}
	if len(q.Modules) != 4 {
		t.Errorf("%d module entries, want 4 (quant_method is metadata)", len(q.Modules))
	}
	if bits, group, quantized := (Quantization{}).For("m.q_proj"); bits != 0 || group != 0 || quantized {
		t.Errorf("zero Quantization For = %d, %d, %v; want 0, 0, false", bits, group, quantized)
	}
}

func TestQuantizationJSONRoundTrip(t *testing.T) {
	q := Quantization{GroupSize: 64, Bits: 4, Mode: "affine", Modules: map[string]ModuleQuantization{
		"b.q_proj": {Quantized: true, Bits: 8},
		"a.norm":   {Quantized: false},
	}}
	b, err := json.Marshal(q)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"group_size":64,"bits":4,"mode":"affine","a.norm":false,"b.q_proj":{"bits":8}}`
	if string(b) != want {
		t.Errorf("Marshal = %s, want %s", b, want)
	}
	var back Quantization
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, q) {
		t.Errorf("round trip = %+v, %v; want %+v", back, err, q)
	}
}

func TestQuantizationKeys(t *testing.T) {
	tests := []struct {
		json string
		bits int
		none bool
	}{
		{`{"quantization_config": {"group_size": 64, "bits": 8}}`, 8, false},
		{`{"quantization": {"group_size": 64, "bits": 4}, "quantization_config": {"group_size": 64, "bits": 8}}`, 4, false},
		{`{"quantization": null, "quantization_config": {"group_size": 64, "bits": 2}}`, 2, false},
		{`{}`, 0, true},
	}
	for _, tt := range tests {
		c, err := ParseConfig([]byte(tt.json))
		if err != nil {
			t.Fatalf("%s: %v", tt.json, err)
		}
		if tt.none {
			if c.Quantization != nil {
				t.Errorf("%s: quantization %+v, want nil", tt.json, c.Quantization)
			}
			continue
		}
		if c.Quantization == nil || c.Quantization.Bits != tt.bits || c.Quantization.Mode != "affine" {
			t.Errorf("%s: quantization %+v, want bits %d mode affine", tt.json, c.Quantization, tt.bits)
		}
	}
}

func TestRopeParametersForms(t *testing.T) {
	// Flat form: one RoPE for every layer kind; default RoPE rotates every pair.
	c, err := ParseConfig([]byte(`{"text_config": {"rope_parameters": {"rope_type": "default", "rope_theta": 5000}}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []LayerType{SlidingAttention, FullAttention} {
		if r := c.TextConfig.RopeParameters[k]; r.RopeType != "default" || r.RopeTheta != 5000 {
			t.Errorf("%s rope = %+v, want default θ 5000", k, r)
		}
	}
	if got := c.TextConfig.RopeAngles(5); got != 256 { // full layer, head dim 512: all 256 pairs
		t.Errorf("RopeAngles(5) = %d, want 256", got)
	}

	// Partial per-kind form: the missing kind comes from §1.2, a missing theta from its kind.
	c, err = ParseConfig([]byte(`{"text_config": {"rope_parameters": {
		"full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.5}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if r := c.TextConfig.RopeParameters[SlidingAttention]; r.RopeType != "default" || r.RopeTheta != 10000 {
		t.Errorf("sliding rope = %+v, want the §1.2 default", r)
	}
	if r := c.TextConfig.RopeParameters[FullAttention]; r.RopeTheta != 1e6 {
		t.Errorf("full rope theta = %g, want 1e6", r.RopeTheta)
	}
	// floor(0.5 · 512 / 2) = 128.
	if got := c.TextConfig.RopeAngles(5); got != 128 {
		t.Errorf("RopeAngles(5) = %d, want 128", got)
	}
}

func TestDerivedGeometryReal(t *testing.T) {
	tc := &loadNested(t).TextConfig
	tests := []struct {
		layer            int
		full, v          bool
		headDim, kvHeads int
		ropeAngles       int
	}{
		// Sliding: default RoPE over head dim 256 → 128 pairs rotate.
		{0, false, true, 256, 8, 128},
		{4, false, true, 256, 8, 128},
		// Full: floor(0.25 · 512 / 2) = 64 pairs rotate.
		{5, true, false, 512, 2, 64},
		{29, true, false, 512, 2, 64},
	}
	for _, tt := range tests {
		if tc.IsFull(tt.layer) != tt.full || tc.HasVProj(tt.layer) != tt.v || tc.LayerHeadDim(tt.layer) != tt.headDim ||
			tc.LayerKVHeads(tt.layer) != tt.kvHeads || tc.RopeAngles(tt.layer) != tt.ropeAngles {
			t.Errorf("layer %d: full %v v %v hd %d kv %d angles %d; want %v %v %d %d %d", tt.layer,
				tc.IsFull(tt.layer), tc.HasVProj(tt.layer), tc.LayerHeadDim(tt.layer), tc.LayerKVHeads(tt.layer), tc.RopeAngles(tt.layer),
				tt.full, tt.v, tt.headDim, tt.kvHeads, tt.ropeAngles)
		}
	}
	// sqrt(2816) = 53.0659966456864…, 2816^-0.5 = 0.0188444590361102… (§1.3).
	if got := tc.EmbedScale(); math.Abs(got-53.0659966456864) > 1e-12 {
		t.Errorf("EmbedScale() = %.15g, want 53.0659966456864", got)
	}
	if got := tc.RouterRootScale(); math.Abs(got-0.0188444590361102) > 1e-15 {
		t.Errorf("RouterRootScale() = %.15g, want 0.0188444590361102", got)
	}
}

func TestRopeInvFreqs(t *testing.T) {
	tiny, err := Preset(PresetTiny)
	if err != nil {
		t.Fatal(err)
	}
	tc := &tiny.TextConfig
	// Sliding layer 0: d = 16, θ = 1e4, all 8 pairs: 1e4^(−2j/16) = 10^(−j/2).
	wantSliding := []float64{1, 0.31622776601683794, 0.1, 0.03162277660168379, 0.01, 0.0031622776601683794, 0.001, 0.00031622776601683794}
	// Full layer 1: d = 32, θ = 1e6, floor(0.25·32/2) = 4 rotated pairs: 1e6^(−2j/32) = 10^(−0.375 j),
	// then 12 zero frequencies (identity pairs).
	wantFull := append([]float64{1, 0.4216965034285822, 0.1778279410038923, 0.07498942093324558}, make([]float64, 12)...)
	for _, tt := range []struct {
		layer int
		want  []float64
	}{{0, wantSliding}, {1, wantFull}} {
		got := tc.RopeInvFreqs(tt.layer)
		if len(got) != len(tt.want) {
			t.Fatalf("RopeInvFreqs(%d) has %d entries, want %d", tt.layer, len(got), len(tt.want))
		}
		for j := range got {
			if math.Abs(got[j]-tt.want[j]) > 1e-15 {
				t.Errorf("RopeInvFreqs(%d)[%d] = %.17g, want %.17g", tt.layer, j, got[j], tt.want[j])
			}
		}
	}
	// factor 2 halves the proportional frequencies.
	two := 2.0
	r := tc.RopeParameters[FullAttention]
	r.Factor = &two
	tc.RopeParameters[FullAttention] = r
	if got := tc.RopeInvFreqs(1); math.Abs(got[1]-wantFull[1]/2) > 1e-15 || got[4] != 0 {
		t.Errorf("with factor 2: freq[1] = %g (want %g), freq[4] = %g (want 0)", got[1], wantFull[1]/2, got[4])
	}
}

func TestValidateErrors(t *testing.T) {
	quant := func(bits, group int, mode string) *Quantization {
		return &Quantization{Bits: bits, GroupSize: group, Mode: mode}
	}
	tests := []struct {
		name   string
		preset string
		mutate func(c *Config)
		want   []string
	}{
		{"top_k", PresetTiny, func(c *Config) { c.TextConfig.TopKExperts = 5 },
			[]string{"text_config.top_k_experts 5 > num_experts 4"}},
		{"layer_types length", PresetTiny, func(c *Config) { c.TextConfig.LayerTypes = []LayerType{SlidingAttention} },
			[]string{"text_config.layer_types has 1 entries != num_hidden_layers 2"}},
		{"unknown layer type", PresetTiny, func(c *Config) { c.TextConfig.LayerTypes[0] = "chunked_attention" },
			[]string{`text_config.layer_types[0] "chunked_attention" is unknown`}},
		{"unknown rope type", PresetTiny, func(c *Config) {
			c.TextConfig.RopeParameters[FullAttention] = RopeParameters{RopeType: "yarn", RopeTheta: 1e6}
		}, []string{`text_config.rope_parameters.full_attention.rope_type "yarn" is unknown`}},
		{"partial on default rope", PresetTiny, func(c *Config) {
			half := 0.5
			c.TextConfig.RopeParameters[SlidingAttention] = RopeParameters{RopeType: "default", RopeTheta: 1e4, PartialRotaryFactor: &half}
		}, []string{`sliding_attention.partial_rotary_factor 0.5 needs rope_type "proportional"`}},
		{"partial above 1", PresetTiny, func(c *Config) {
			p := 1.5
			c.TextConfig.RopeParameters[FullAttention] = RopeParameters{RopeType: "proportional", RopeTheta: 1e6, PartialRotaryFactor: &p}
		}, []string{"full_attention.partial_rotary_factor 1.5 must be in [0, 1]"}},
		{"rope theta", PresetTiny, func(c *Config) {
			c.TextConfig.RopeParameters[SlidingAttention] = RopeParameters{RopeType: "default"}
		}, []string{"sliding_attention.rope_theta must be positive, got 0"}},
		{"missing rope kind", PresetTiny, func(c *Config) { delete(c.TextConfig.RopeParameters, FullAttention) },
			[]string{"text_config.rope_parameters.full_attention is missing"}},
		{"sampler", PresetTiny, func(c *Config) { c.GenerationConfig.SamplerConfig.ClsName = "ConfidenceSamplerConfig" },
			[]string{`sampler_config._cls_name "ConfidenceSamplerConfig" is unknown (want "EntropyBoundSamplerConfig")`}},
		{"entropy bound", PresetTiny, func(c *Config) { c.GenerationConfig.SamplerConfig.EntropyBound = -1 },
			[]string{"entropy_bound must be >= 0, got -1"}},
		{"bits", PresetTiny, func(c *Config) { c.Quantization = quant(7, 32, "affine") },
			[]string{"quantization bits 7 not in {2,3,4,5,6,8}"}},
		{"group size", PresetTiny, func(c *Config) { c.Quantization = quant(4, 16, "affine") },
			[]string{"quantization group_size 16 not in {32,64,128}"}},
		{"mode", PresetTiny, func(c *Config) { c.Quantization = quant(4, 32, "mxfp4") },
			[]string{`quantization mode "mxfp4" is not supported (want "affine")`}},
		{"override bits", PresetTiny, func(c *Config) {
			c.Quantization = quant(4, 32, "affine")
			c.Quantization.Modules = map[string]ModuleQuantization{"model.decoder.layers.0.mlp.up_proj": {Quantized: true, Bits: 9}}
		}, []string{"quantization.model.decoder.layers.0.mlp.up_proj bits 9 not in"}},
		// tiny with group 128: inputs of 64 are hidden_size (embed, self-conditioning gate/up,
		// layer 0 q/k/v/o/gate/up/router/experts.gate_up, layer 1 the same minus v and o, whose
		// input is 4·32 = 128) = 3 + 8 + 6 = 17 modules; inputs of 32 are the two experts.down_proj.
		{"hidden not divisible by group", PresetTiny, func(c *Config) { c.Quantization = quant(4, 128, "affine") },
			[]string{
				"text_config.hidden_size 64 is not divisible by quantization group_size 128 (model.decoder.embed_tokens and 16 more)",
				"text_config.moe_intermediate_size 32 is not divisible by quantization group_size 128 (model.decoder.layers.0.experts.down_proj and 1 more)",
			}},
		{"kv heads", PresetTiny, func(c *Config) { c.TextConfig.NumKeyValueHeads = 3 },
			[]string{"text_config.num_attention_heads 4 is not divisible by num_key_value_heads 3"}},
		{"global kv heads", PresetTiny, func(c *Config) { c.TextConfig.NumGlobalKeyValueHeads = 3 },
			[]string{"text_config.num_attention_heads 4 is not divisible by num_global_key_value_heads 3"}},
		{"odd head dim", PresetTiny, func(c *Config) { c.TextConfig.HeadDim = 15 },
			[]string{"text_config.head_dim 15 must be even"}},
		{"odd global head dim", PresetTiny, func(c *Config) { c.TextConfig.GlobalHeadDim = 33 },
			[]string{"text_config.global_head_dim 33 must be even"}},
		{"temperature order", PresetTiny, func(c *Config) { c.GenerationConfig.TMin = 0.9 },
			[]string{"need 0 < t_min <= t_max, got t_min 0.9, t_max 0.8"}},
		{"zero temperature", PresetTiny, func(c *Config) { c.GenerationConfig.TMin = 0 },
			[]string{"need 0 < t_min <= t_max, got t_min 0, t_max 0.8"}},
		{"steps", PresetTiny, func(c *Config) { c.GenerationConfig.MaxDenoisingSteps = 0 },
			[]string{"generation_config.max_denoising_steps must be positive, got 0"}},
		{"stability", PresetTiny, func(c *Config) { *c.GenerationConfig.StabilityThreshold = -1 },
			[]string{"generation_config.stability_threshold must be >= 0, got -1"}},
		{"image token", PresetReal, func(c *Config) { c.ImageTokenID = 262144 },
			[]string{"image_token_id 262144 is outside the vocabulary [0, 262144)"}},
		{"generation eos", PresetTiny, func(c *Config) { c.GenerationConfig.EOSTokenID = TokenIDs{1, 600} },
			[]string{"generation_config.eos_token_id 600 is outside the vocabulary [0, 512)"}},
		{"negative bos", PresetTiny, func(c *Config) { c.TextConfig.BOSTokenID = -1 },
			[]string{"text_config.bos_token_id -1 is outside the vocabulary [0, 512)"}},
		{"vocab", PresetTiny, func(c *Config) { c.TextConfig.VocabSize = 0 },
			[]string{"text_config.vocab_size must be positive, got 0"}},
		{"too many layers", PresetTiny, func(c *Config) { c.TextConfig.NumHiddenLayers = 5000 },
			[]string{"text_config.num_hidden_layers 5000 exceeds the sanity limit 1024"}},
		{"canvas", PresetTiny, func(c *Config) { c.CanvasLength = 0 },
			[]string{"canvas_length must be positive, got 0"}},
		{"softcap", PresetTiny, func(c *Config) { c.TextConfig.FinalLogitSoftcapping = -1 },
			[]string{"final_logit_softcapping must be >= 0 (0 disables it), got -1"}},
		{"activation", PresetTiny, func(c *Config) { c.TextConfig.HiddenActivation = "silu" },
			[]string{`hidden_activation "silu" is not supported (want "gelu_pytorch_tanh")`}},
		{"eps", PresetTiny, func(c *Config) { c.TextConfig.RMSNormEps = 0 },
			[]string{"text_config.rms_norm_eps must be positive, got 0"}},
		{"attention bias", PresetTiny, func(c *Config) { c.TextConfig.AttentionBias = true },
			[]string{"attention_bias true is not supported"}},
		{"untied head", PresetTiny, func(c *Config) { c.TextConfig.TieWordEmbeddings = false },
			[]string{"tie_word_embeddings false is not supported"}},
		{"bidirectional", PresetTiny, func(c *Config) { c.TextConfig.UseBidirectionalAttention = "all" },
			[]string{`use_bidirectional_attention "all" is not supported`}},
		{"vision head dim", PresetReal, func(c *Config) { c.VisionConfig.HeadDim = 70 },
			[]string{"vision_config.head_dim 70 must be a multiple of 4"}},
		{"vision patch", PresetReal, func(c *Config) { c.VisionConfig.PatchSize = 0 },
			[]string{"vision_config.patch_size must be positive, got 0"}},
		{"vision rope", PresetReal, func(c *Config) { c.VisionConfig.RopeParameters.RopeType = "proportional" },
			[]string{`vision_config.rope_parameters.rope_type "proportional" is unknown`}},
		{"two problems at once", PresetTiny, func(c *Config) {
			c.TextConfig.TopKExperts = 9
			c.CanvasLength = -1
		}, []string{"top_k_experts 9 > num_experts 4", "canvas_length must be positive, got -1"}},
	}
	for _, tt := range tests {
		c, err := Preset(tt.preset)
		if err != nil {
			t.Fatal(err)
		}
		tt.mutate(c)
		err = c.Validate()
		var ve *ValidationError
		if !errors.As(err, &ve) {
			t.Errorf("%s: Validate() = %v, want a *ValidationError", tt.name, err)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: Validate() = %q\nwant it to contain %q", tt.name, err, w)
			}
		}
		if len(ve.Problems) != len(tt.want) {
			t.Errorf("%s: %d problems %q, want %d", tt.name, len(ve.Problems), ve.Problems, len(tt.want))
		}
	}
}

// A module stored unquantized (`false`) is exempt from the group-size rule: tiny's experts
// down_proj input 32 cannot be grouped by 64, so marking both layers' copies false makes
// group 64 valid.
func TestValidateQuantizationHonoursOverrides(t *testing.T) {
	c, err := Preset(PresetTiny)
	if err != nil {
		t.Fatal(err)
	}
	c.Quantization = &Quantization{Bits: 4, GroupSize: 64, Mode: "affine"}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "moe_intermediate_size 32") {
		t.Fatalf("Validate() = %v, want the moe_intermediate_size problem", err)
	}
	c.Quantization.Modules = map[string]ModuleQuantization{
		"model.decoder.layers.0.experts.down_proj": {Quantized: false},
		"model.decoder.layers.1.experts.down_proj": {Quantized: true, GroupSize: 32},
	}
	if err := c.Validate(); err != nil {
		t.Errorf("Validate() = %v, want nil", err)
	}
}

func TestParseConfigBadInput(t *testing.T) {
	tests := []struct {
		name, json, want string
	}{
		{"not json", `not json`, "diffusiongemma: parse config.json"},
		{"array", `[1, 2]`, "diffusiongemma: parse config.json"},
		{"truncated", `{"text_config": {"hidden_size": 28`, "diffusiongemma: parse config.json"},
		{"string dim", `{"text_config": {"hidden_size": "big"}}`, "hidden_size"},
		{"string dim flat", `{"hidden_size": "big"}`, "text fields at the top level"},
		{"eos string", `{"eos_token_id": "one"}`, "token ids"},
		{"quantization number", `{"quantization": 3}`, "quantization: want an object"},
		{"quantization module", `{"quantization": {"bits": 4, "group_size": 64, "m": {"bits": "x"}}}`, "quantization.m"},
		{"quantization_config", `{"quantization_config": [1]}`, "quantization_config"},
		{"rope entry", `{"text_config": {"rope_parameters": {"full_attention": 5}}}`, "rope_parameters.full_attention"},
		{"rope not object", `{"text_config": {"rope_parameters": 5}}`, "rope_parameters"},
		{"bidirectional number", `{"text_config": {"use_bidirectional_attention": 5}}`, "use_bidirectional_attention"},
		{"generation not object", `{"generation_config": 7}`, "diffusiongemma: parse config.json"},
		{"sampler", `{"generation_config": {"sampler_config": {"_cls_name": "Foo"}}}`, `_cls_name "Foo" is unknown`},
		{"negative layers", `{"text_config": {"num_hidden_layers": -3}}`, "num_hidden_layers must be positive, got -3"},
		// Must be rejected before any per-layer slice is sized from it.
		{"huge layers", `{"text_config": {"num_hidden_layers": 100000000000}}`, "exceeds the sanity limit 1024"},
		{"huge vocab", `{"text_config": {"vocab_size": 100000000000}}`, "vocab_size 100000000000 exceeds the sanity limit"},
		{"layer types length", `{"text_config": {"layer_types": ["sliding_attention"]}}`, "layer_types has 1 entries != num_hidden_layers 30"},
		{"vision patch", `{"vision_config": {"patch_size": 0}}`, "vision_config.patch_size must be positive, got 0"},
		{"bits", `{"quantization": {"bits": 7, "group_size": 64}}`, "quantization bits 7 not in"},
		{"missing bits", `{"quantization": {"group_size": 64}}`, "quantization bits 0 not in"},
	}
	for _, tt := range tests {
		c, err := ParseConfig([]byte(tt.json))
		if err == nil {
			t.Errorf("%s: ParseConfig(%#q) = %+v, want an error", tt.name, tt.json, c)
			continue
		}
		if !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: ParseConfig(%#q) error %q, want it to contain %q", tt.name, tt.json, err, tt.want)
		}
	}
}

func TestLoadConfigErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope")
	if _, err := LoadConfig(missing); err == nil || !errors.Is(err, fs.ErrNotExist) || err.Error() != "diffusiongemma: model directory "+missing+" does not exist" {
		t.Errorf("LoadConfig(missing dir) = %v, want a wrapped not-exist error", err)
	}
	// A Hugging Face Hub id that is not a directory here: nothing is downloaded.
	t.Chdir(t.TempDir())
	for _, id := range []string{"google/diffusiongemma-26b-a4b-it", "mlx-community/DiffusionGemma-26B-A4B-it-4bit"} {
		want := "diffusiongemma: model " + id + " is not a directory here; it looks like a Hugging Face Hub id, and nothing is downloaded here: download it first (hf download " + id + " --local-dir DIR) and pass that directory"
		if _, err := LoadConfig(id); err == nil || !errors.Is(err, fs.ErrNotExist) || err.Error() != want {
			t.Errorf("LoadConfig(%q) = %v\nwant %s", id, err, want)
		}
	}
	for _, notID := range []string{"models/a/b", "../x", "./x"} {
		if _, err := LoadConfig(notID); err == nil || strings.Contains(err.Error(), "Hub") {
			t.Errorf("LoadConfig(%q) = %v, want a missing directory, not a Hub id", notID, err)
		}
	}
	// An existing directory without config.json is not a Hub id either.
	if err := os.MkdirAll("google/gemma", 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadConfig("google/gemma"); err == nil || !strings.Contains(err.Error(), "read config") {
		t.Errorf("LoadConfig(existing dir without config.json) = %v, want read config", err)
	}
	tests := []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"bad config.json", map[string]string{"config.json": `{`}, "config.json"},
		{"bad generation_config.json", map[string]string{"config.json": `{}`, "generation_config.json": `{"t_min": "low"}`},
			"generation_config.json"},
		{"invalid generation values", map[string]string{"config.json": `{}`, "generation_config.json": `{"t_min": 0}`},
			"need 0 < t_min <= t_max"},
		{"invalid config values", map[string]string{"config.json": `{"canvas_length": -5}`}, "canvas_length must be positive, got -5"},
	}
	for _, tt := range tests {
		_, err := LoadConfig(writeDir(t, tt.files))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: LoadConfig error %v, want it to contain %q", tt.name, err, tt.want)
		}
	}
	// generation_config.json that cannot be read (a directory) is an error, not "absent".
	dir := writeDir(t, map[string]string{"config.json": `{}`})
	if err := os.Mkdir(filepath.Join(dir, "generation_config.json"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadConfig(dir); err == nil || !strings.Contains(err.Error(), "read generation config") {
		t.Errorf("LoadConfig(generation_config.json is a dir) = %v, want a read error", err)
	}
}

// MarshalNested → ParseConfig reproduces the config, whichever layout it came from.
func TestMarshalNestedRoundTrip(t *testing.T) {
	flat, err := LoadConfig(checkpointDir(t, map[string]string{
		"config.json":            "config.flat-optiq.json",
		"generation_config.json": "generation_config.json",
	}))
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]*Config{"nested fixture": loadNested(t), "flat fixture": flat}
	for _, name := range PresetNames() {
		p, err := Preset(name)
		if err != nil {
			t.Fatal(err)
		}
		cases["preset "+name] = p
	}
	for name, c := range cases {
		b, err := c.MarshalNested()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var keys map[string]json.RawMessage
		if err := json.Unmarshal(b, &keys); err != nil {
			t.Fatalf("%s: output is not JSON: %v", name, err)
		}
		if _, ok := keys["text_config"]; !ok {
			t.Errorf("%s: no text_config in %s", name, b)
		}
		back, err := ParseConfig(b)
		if err != nil {
			t.Fatalf("%s: reparse: %v\n%s", name, err, b)
		}
		if back.Layout != LayoutNested || back.GenerationSource != GenerationFromConfig {
			t.Errorf("%s: reparsed layout %q source %q", name, back.Layout, back.GenerationSource)
		}
		back.Layout, back.GenerationSource = c.Layout, c.GenerationSource
		if !reflect.DeepEqual(back, c) {
			t.Errorf("%s: round trip differs\n got %+v\nwant %+v", name, back, c)
		}
	}
}
