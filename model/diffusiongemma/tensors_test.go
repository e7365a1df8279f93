package diffusiongemma

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func mustPreset(t *testing.T, name string) *Config {
	t.Helper()
	c, err := Preset(name)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func tensorMap(specs []TensorSpec) map[string]TensorSpec {
	m := make(map[string]TensorSpec, len(specs))
	for _, s := range specs {
		m[s.Name] = s
	}
	return m
}

// The §2.2 table, typed in by hand, for a sliding layer (0) and a full layer (5).
func TestExpectedTensorsRealLayers(t *testing.T) {
	specs := ExpectedTensors(mustPreset(t, PresetReal))
	got := tensorMap(specs)
	type row struct {
		shape       []int
		quantizable bool
	}
	sliding := map[string]row{
		"self_attn.q_proj.weight":             {[]int{4096, 2816}, true},
		"self_attn.k_proj.weight":             {[]int{2048, 2816}, true},
		"self_attn.v_proj.weight":             {[]int{2048, 2816}, true},
		"self_attn.o_proj.weight":             {[]int{2816, 4096}, true},
		"self_attn.q_norm.weight":             {[]int{256}, false},
		"self_attn.k_norm.weight":             {[]int{256}, false},
		"mlp.gate_proj.weight":                {[]int{2112, 2816}, true},
		"mlp.up_proj.weight":                  {[]int{2112, 2816}, true},
		"mlp.down_proj.weight":                {[]int{2816, 2112}, true},
		"router.proj.weight":                  {[]int{128, 2816}, true},
		"router.scale":                        {[]int{2816}, false},
		"router.per_expert_scale":             {[]int{128}, false},
		"experts.gate_up_proj.weight":         {[]int{128, 1408, 2816}, true},
		"experts.down_proj.weight":            {[]int{128, 2816, 704}, true},
		"input_layernorm.weight":              {[]int{2816}, false},
		"post_attention_layernorm.weight":     {[]int{2816}, false},
		"pre_feedforward_layernorm.weight":    {[]int{2816}, false},
		"post_feedforward_layernorm_1.weight": {[]int{2816}, false},
		"pre_feedforward_layernorm_2.weight":  {[]int{2816}, false},
		"post_feedforward_layernorm_2.weight": {[]int{2816}, false},
		"post_feedforward_layernorm.weight":   {[]int{2816}, false},
		"layer_scalar":                        {[]int{1}, false},
	}
	full := map[string]row{}
	for k, v := range sliding {
		full[k] = v
	}
	delete(full, "self_attn.v_proj.weight")
	full["self_attn.q_proj.weight"] = row{[]int{8192, 2816}, true}
	full["self_attn.k_proj.weight"] = row{[]int{1024, 2816}, true}
	full["self_attn.o_proj.weight"] = row{[]int{2816, 8192}, true}
	full["self_attn.q_norm.weight"] = row{[]int{512}, false}
	full["self_attn.k_norm.weight"] = row{[]int{512}, false}

	for _, layer := range []struct {
		n    int
		want map[string]row
	}{{0, sliding}, {5, full}} {
		prefix := fmt.Sprintf("model.decoder.layers.%d.", layer.n)
		n := 0
		for name := range got {
			if strings.HasPrefix(name, prefix) {
				n++
			}
		}
		if n != len(layer.want) {
			t.Errorf("layer %d has %d tensors, want %d", layer.n, n, len(layer.want))
		}
		for suffix, w := range layer.want {
			s, ok := got[prefix+suffix]
			if !ok {
				t.Errorf("missing %s", prefix+suffix)
				continue
			}
			if !slices.Equal(s.Shape, w.shape) || s.Quantizable != w.quantizable {
				t.Errorf("%s: shape %v quantizable %v, want %v %v", s.Name, s.Shape, s.Quantizable, w.shape, w.quantizable)
			}
		}
	}

	globals := map[string]row{
		"model.decoder.embed_tokens.weight":                   {[]int{262144, 2816}, true},
		"model.decoder.norm.weight":                           {[]int{2816}, false},
		"model.decoder.self_conditioning.pre_norm.weight":     {[]int{2816}, false},
		"model.decoder.self_conditioning.gate_proj.weight":    {[]int{2112, 2816}, true},
		"model.decoder.self_conditioning.up_proj.weight":      {[]int{2112, 2816}, true},
		"model.decoder.self_conditioning.down_proj.weight":    {[]int{2816, 2112}, true},
		"model.encoder.language_model.layers.0.layer_scalar":  {[]int{1}, false},
		"model.encoder.language_model.layers.29.layer_scalar": {[]int{1}, false},
	}
	for name, w := range globals {
		s, ok := got[name]
		if !ok {
			t.Errorf("missing %s", name)
			continue
		}
		if !slices.Equal(s.Shape, w.shape) || s.Quantizable != w.quantizable {
			t.Errorf("%s: shape %v quantizable %v, want %v %v", name, s.Shape, s.Quantizable, w.shape, w.quantizable)
		}
	}
	for _, absent := range []string{"lm_head.weight", "model.decoder.layers.5.self_attn.v_proj.weight",
		"model.decoder.self_conditioning.post_norm.weight", "model.decoder.layers.0.self_attn.v_norm.weight",
		"model.encoder.language_model.layers.30.layer_scalar"} {
		if _, ok := got[absent]; ok {
			t.Errorf("%s should not exist", absent)
		}
	}
}

func TestExpectedTensorsCountsAndModules(t *testing.T) {
	tests := []struct {
		preset string
		want   int
	}{
		// 6 globals + 30 encoder scalars + 25 sliding × 22 + 5 full × 21 = 6 + 30 + 550 + 105.
		{PresetReal, 691},
		// 6 + 2 + one sliding (22) + one full (21).
		{PresetTiny, 51},
		// 6 + 6 + 5 × 22 + 21.
		{PresetSmall, 143},
	}
	for _, tt := range tests {
		specs := ExpectedTensors(mustPreset(t, tt.preset))
		if len(specs) != tt.want {
			t.Errorf("%s: %d tensors, want %d", tt.preset, len(specs), tt.want)
		}
		seen := map[string]bool{}
		for _, s := range specs {
			if seen[s.Name] {
				t.Errorf("%s: duplicate tensor %s", tt.preset, s.Name)
			}
			seen[s.Name] = true
			// Module is the name minus ".weight", or minus the last component for bare parameters.
			want := strings.TrimSuffix(s.Name, ".weight")
			if want == s.Name {
				want = s.Name[:strings.LastIndex(s.Name, ".")]
			}
			if s.Module != want {
				t.Errorf("%s: Module = %q, want %q", s.Name, s.Module, want)
			}
			if s.Quantizable && !strings.HasSuffix(s.Name, ".weight") {
				t.Errorf("%s: quantizable without .weight", s.Name)
			}
		}
	}
	got := tensorMap(ExpectedTensors(mustPreset(t, PresetReal)))
	if m := got["model.decoder.layers.3.router.scale"].Module; m != "model.decoder.layers.3.router" {
		t.Errorf("router.scale module = %q", m)
	}
	if m := got["model.decoder.layers.3.layer_scalar"].Module; m != "model.decoder.layers.3" {
		t.Errorf("layer_scalar module = %q", m)
	}
}

// §2.4: packed columns for 4-bit / 8-bit and group count at group 64.
func TestQuantizedShapes(t *testing.T) {
	tests := []struct {
		logical       []int
		bits, group   int
		weight, scale []int
	}{
		{[]int{4096, 2816}, 4, 64, []int{4096, 352}, []int{4096, 44}},
		{[]int{4096, 2816}, 8, 64, []int{4096, 704}, []int{4096, 44}},
		{[]int{2816, 4096}, 4, 64, []int{2816, 512}, []int{2816, 64}},
		{[]int{2816, 4096}, 8, 64, []int{2816, 1024}, []int{2816, 64}},
		{[]int{2816, 8192}, 4, 64, []int{2816, 1024}, []int{2816, 128}},
		{[]int{2816, 8192}, 8, 64, []int{2816, 2048}, []int{2816, 128}},
		{[]int{2816, 2112}, 4, 64, []int{2816, 264}, []int{2816, 33}},
		{[]int{2816, 2112}, 8, 64, []int{2816, 528}, []int{2816, 33}},
		{[]int{1152, 768}, 4, 64, []int{1152, 96}, []int{1152, 12}},
		{[]int{1152, 768}, 8, 64, []int{1152, 192}, []int{1152, 12}},
		{[]int{2816, 1152}, 4, 64, []int{2816, 144}, []int{2816, 18}},
		{[]int{2816, 1152}, 8, 64, []int{2816, 288}, []int{2816, 18}},
		// Embedding 4-bit: u32 [262144, 352] + [262144, 44].
		{[]int{262144, 2816}, 4, 64, []int{262144, 352}, []int{262144, 44}},
		// Experts 4-bit: gate_up [128, 1408, 352] + [128, 1408, 44]; down [128, 2816, 88] + [128, 2816, 11].
		{[]int{128, 1408, 2816}, 4, 64, []int{128, 1408, 352}, []int{128, 1408, 44}},
		{[]int{128, 2816, 704}, 4, 64, []int{128, 2816, 88}, []int{128, 2816, 11}},
		{[]int{128, 2816, 704}, 8, 64, []int{128, 2816, 176}, []int{128, 2816, 11}},
		// Other bit widths: 2816·3/32 = 264, 2816·6/32 = 528; group 32 → 88 groups, 128 → 22.
		{[]int{10, 2816}, 3, 32, []int{10, 264}, []int{10, 88}},
		{[]int{10, 2816}, 6, 128, []int{10, 528}, []int{10, 22}},
		{[]int{10, 64}, 2, 32, []int{10, 4}, []int{10, 2}},
	}
	for _, tt := range tests {
		logical := slices.Clone(tt.logical)
		w, s, err := QuantizedShapes(logical, tt.bits, tt.group)
		if err != nil || !slices.Equal(w, tt.weight) || !slices.Equal(s, tt.scale) {
			t.Errorf("QuantizedShapes(%v, %d, %d) = %v, %v, %v; want %v, %v", tt.logical, tt.bits, tt.group, w, s, err, tt.weight, tt.scale)
			continue
		}
		w[0], s[0] = -1, -1
		if !slices.Equal(logical, tt.logical) {
			t.Errorf("QuantizedShapes(%v) result aliases its input", tt.logical)
		}
	}
}

func TestQuantizedShapesErrors(t *testing.T) {
	tests := []struct {
		logical     []int
		bits, group int
		want        string
	}{
		{nil, 4, 64, "need at least [out, in]"},
		{[]int{2816}, 4, 64, "need at least [out, in]"},
		{[]int{0, 2816}, 4, 64, "dimensions must be positive"},
		{[]int{4, -64}, 4, 64, "dimensions must be positive"},
		{[]int{4, 2816}, 7, 64, "bits 7 not in {2,3,4,5,6,8}"},
		{[]int{4, 2816}, 4, 16, "group_size 16 not in {32,64,128}"},
		// The vision MLP down_proj (in 4304) is why MLX leaves it unquantized (§1.6).
		{[]int{1152, 4304}, 4, 64, "input size 4304 is not divisible by group_size 64"},
	}
	for _, tt := range tests {
		_, _, err := QuantizedShapes(tt.logical, tt.bits, tt.group)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("QuantizedShapes(%v, %d, %d) error %v, want it to contain %q", tt.logical, tt.bits, tt.group, err, tt.want)
		}
	}
}

// §1.6: in = scales cols × group, bits = 32 × weight cols / in.
func TestInferBits(t *testing.T) {
	tests := []struct {
		weightCols, scalesCols, group int
		bits, in                      int
	}{
		{352, 44, 64, 4, 2816},   // 32·352/2816 = 4
		{704, 44, 64, 8, 2816},   // 32·704/2816 = 8
		{88, 11, 64, 4, 704},     // experts down, 4-bit
		{528, 33, 64, 8, 2112},   // dense down, 8-bit
		{1024, 128, 64, 4, 8192}, // full o_proj, 4-bit
		{264, 44, 64, 3, 2816},   // 3-bit
		{264, 88, 32, 3, 2816},   // same tensor, group 32
		{4, 2, 32, 2, 64},        // 2-bit
	}
	for _, tt := range tests {
		bits, in, err := InferBits(tt.weightCols, tt.scalesCols, tt.group)
		if err != nil || bits != tt.bits || in != tt.in {
			t.Errorf("InferBits(%d, %d, %d) = %d, %d, %v; want %d, %d", tt.weightCols, tt.scalesCols, tt.group, bits, in, err, tt.bits, tt.in)
		}
	}
	bad := []struct {
		weightCols, scalesCols, group int
		want                          string
	}{
		{0, 44, 64, "must be positive"},
		{352, 0, 64, "must be positive"},
		{352, 44, 0, "must be positive"},
		{100, 44, 64, "32 × weight cols 100 is not a multiple of input size 2816"},
		{1408, 44, 64, "give 16 bits"}, // 32·1408/2816 = 16: not a supported width
		{616, 44, 64, "give 7 bits"},   // 32·616/2816 = 7
	}
	for _, tt := range bad {
		_, _, err := InferBits(tt.weightCols, tt.scalesCols, tt.group)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("InferBits(%d, %d, %d) error %v, want it to contain %q", tt.weightCols, tt.scalesCols, tt.group, err, tt.want)
		}
	}
}

// Every QuantizedShapes result inverts through InferBits.
func TestQuantizedShapesInferBitsAgree(t *testing.T) {
	for _, ts := range ExpectedTensors(mustPreset(t, PresetReal)) {
		if !ts.Quantizable {
			continue
		}
		for _, bits := range []int{2, 3, 4, 5, 6, 8} {
			w, s, err := QuantizedShapes(ts.Shape, bits, 64)
			if err != nil {
				t.Fatalf("%s: %v", ts.Name, err)
			}
			gotBits, in, err := InferBits(w[len(w)-1], s[len(s)-1], 64)
			if err != nil || gotBits != bits || in != ts.Shape[len(ts.Shape)-1] {
				t.Errorf("%s %d-bit: InferBits = %d, %d, %v", ts.Name, bits, gotBits, in, err)
			}
		}
	}
}

func TestCountParams(t *testing.T) {
	tests := []struct {
		preset        string
		total, active int64
	}{
		// real (§2.2 shapes; H 2816, V 262144, I 2112, M 704, E 128, k 8):
		//   globals: embed 262144·2816 = 738,197,504; norm 2816; self-conditioning
		//     2816 + 3·2112·2816 = 17,844,992; 30 encoder scalars → 756,045,342.
		//   sliding layer: attention q 4096·2816 + k,v 2·2048·2816 + o 2816·4096 = 34,603,008
		//     + q/k norms 512; dense MLP 3·2112·2816 = 17,842,176; router 128·2816 + 2816 + 128
		//     = 363,392; experts 128·(1408·2816 + 2816·704) = 761,266,176; 7 norms 19,712;
		//     scalar 1 → 814,094,977.
		//   full layer: attention 8192·2816 + 1024·2816 + 2816·8192 = 49,020,928 + norms 1,024,
		//     rest as sliding → 828,513,409.
		//   total = 756,045,342 + 25·814,094,977 + 5·828,513,409 = 25,250,986,812.
		//   active: experts count 8/128 of 761,266,176 = 47,579,136 per layer, i.e.
		//     713,687,040 less per layer: 25,250,986,812 − 30·713,687,040 = 3,840,375,612.
		{PresetReal, 25_250_986_812, 3_840_375_612},
		// tiny (H 64, V 512, I 128, M 32, E 4, k 2):
		//   globals 512·64 + 64 + 64 + 3·128·64 + 2 = 57,474;
		//   layer 0 (hd 16, kv 2): 4·16·64 + 2·32·64 + 64·64 + 32 + 3·128·64 + (4·64 + 64 + 4)
		//     + 4·(64·64 + 64·32) + 7·64 + 1 = 62,245;
		//   layer 1 (hd 32, kv 1): 128·64 + 32·64 + 64·128 + 64 + 24,576 + 324 + 24,576 + 448 + 1
		//     = 68,421; total 188,140.
		//   active: experts 24,576 per layer of which 2/4 used → 188,140 − 2·12,288 = 163,564.
		{PresetTiny, 188_140, 163_564},
	}
	for _, tt := range tests {
		total, active := CountParams(mustPreset(t, tt.preset))
		t.Logf("%s: total %d (%.3f B), active per token %d (%.3f B)", tt.preset, total, float64(total)/1e9, active, float64(active)/1e9)
		if total != tt.total || active != tt.active {
			t.Errorf("CountParams(%s) = %d, %d; want %d, %d", tt.preset, total, active, tt.total, tt.active)
		}
	}
	// Independent sanity from §2.4's rounded figures: experts ≈ 22.8 B, attention ≈ 25·34.6 M
	// + 5·49.0 M ≈ 1.11 B, dense MLP ≈ 30·17.8 M ≈ 0.53 B, embedding ≈ 0.74 B → ≈ 25.2 B;
	// active ≈ 25.2 B − 30·(761 M − 47.6 M) ≈ 3.8 B. The name says "26B-A4B".
	total, active := CountParams(mustPreset(t, PresetReal))
	if total < 25.0e9 || total > 26.0e9 || active < 3.5e9 || active > 4.2e9 {
		t.Errorf("real totals %d / %d outside [25 B, 26 B] / [3.5 B, 4.2 B]", total, active)
	}
}

func TestLoRATargetsReal(t *testing.T) {
	c := mustPreset(t, PresetReal)
	targets, err := LoRATargets(c, nil, -1)
	if err != nil {
		t.Fatal(err)
	}
	// 25 sliding × 7 + 5 full × 6 (no v_proj) = 205 linears, each with lora_a and lora_b.
	if len(targets) != 205 || 2*len(targets) != 410 {
		t.Errorf("%d targets, want 205 (410 tensors)", len(targets))
	}
	// Rank 8, Σ r·(in + out):
	//   sliding: q 2816+4096, k 2816+2048, v 2816+2048, o 4096+2816, gate/up 2816+2112 each,
	//     down 2112+2816 → 38,336 · 8 = 306,688;
	//   full: q 2816+8192, k 2816+1024, o 8192+2816, MLP 3·4,928 → 40,640 · 8 = 325,120;
	//   total 25·306,688 + 5·325,120 = 9,292,800 (§5.3).
	if got := LoRAParamCount(targets, 8); got != 9_292_800 {
		t.Errorf("LoRAParamCount(rank 8) = %d, want 9,292,800", got)
	}
	perLayer := map[int][]LoRATarget{}
	for _, tg := range targets {
		perLayer[tg.Layer] = append(perLayer[tg.Layer], tg)
		if tg.Module != LayerPrefix(tg.Layer)+"."+tg.Key {
			t.Errorf("target %+v: module does not match layer/key", tg)
		}
	}
	if got := LoRAParamCount(perLayer[0], 8); got != 306_688 {
		t.Errorf("sliding layer 0: %d trainable, want 306,688", got)
	}
	if got := LoRAParamCount(perLayer[5], 8); got != 325_120 {
		t.Errorf("full layer 5: %d trainable, want 325,120", got)
	}
	// §6.1's example shapes: A [in, r], B [r, out].
	want0 := []LoRATarget{
		{"model.decoder.layers.0.self_attn.q_proj", 2816, 4096, 0, "self_attn.q_proj"},
		{"model.decoder.layers.0.self_attn.k_proj", 2816, 2048, 0, "self_attn.k_proj"},
		{"model.decoder.layers.0.self_attn.v_proj", 2816, 2048, 0, "self_attn.v_proj"},
		{"model.decoder.layers.0.self_attn.o_proj", 4096, 2816, 0, "self_attn.o_proj"},
		{"model.decoder.layers.0.mlp.gate_proj", 2816, 2112, 0, "mlp.gate_proj"},
		{"model.decoder.layers.0.mlp.up_proj", 2816, 2112, 0, "mlp.up_proj"},
		{"model.decoder.layers.0.mlp.down_proj", 2112, 2816, 0, "mlp.down_proj"},
	}
	if !reflect.DeepEqual(perLayer[0], want0) {
		t.Errorf("layer 0 targets\n%+v\nwant\n%+v", perLayer[0], want0)
	}
	want5 := []LoRATarget{
		{"model.decoder.layers.5.self_attn.q_proj", 2816, 8192, 5, "self_attn.q_proj"},
		{"model.decoder.layers.5.self_attn.k_proj", 2816, 1024, 5, "self_attn.k_proj"},
		{"model.decoder.layers.5.self_attn.o_proj", 8192, 2816, 5, "self_attn.o_proj"},
		{"model.decoder.layers.5.mlp.gate_proj", 2816, 2112, 5, "mlp.gate_proj"},
		{"model.decoder.layers.5.mlp.up_proj", 2816, 2112, 5, "mlp.up_proj"},
		{"model.decoder.layers.5.mlp.down_proj", 2112, 2816, 5, "mlp.down_proj"},
	}
	if !reflect.DeepEqual(perLayer[5], want5) {
		t.Errorf("layer 5 targets\n%+v\nwant\n%+v", perLayer[5], want5)
	}
}

func TestLoRATargetsSelection(t *testing.T) {
	rc := mustPreset(t, PresetReal)
	tests := []struct {
		name       string
		keys       []string
		numLayers  int
		count      int
		firstLayer int
	}{
		{"last layer (full)", nil, 1, 6, 29},
		{"last two", nil, 2, 13, 28},    // sliding 28 (7) + full 29 (6)
		{"last six", nil, 6, 41, 24},    // 5 sliding + 1 full
		{"all thirty", nil, 30, 205, 0}, //
		{"two keys, all", []string{"mlp.down_proj", "self_attn.q_proj"}, -1, 60, 0},
		{"v only", []string{"self_attn.v_proj"}, -1, 25, 0}, // full layers skip it silently
		{"router", []string{"router.proj"}, 1, 1, 29},
		{"duplicate key", []string{"mlp.up_proj", "mlp.up_proj"}, -1, 30, 0},
	}
	for _, tt := range tests {
		got, err := LoRATargets(rc, tt.keys, tt.numLayers)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if len(got) != tt.count || got[0].Layer != tt.firstLayer {
			t.Errorf("%s: %d targets from layer %d, want %d from layer %d", tt.name, len(got), got[0].Layer, tt.count, tt.firstLayer)
		}
	}
	// Canonical order within a layer whatever the key order; router in [2816 → 128].
	got, err := LoRATargets(rc, []string{"router.proj", "mlp.down_proj", "self_attn.q_proj"}, 1)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, tg := range got {
		keys = append(keys, tg.Key)
	}
	if !slices.Equal(keys, []string{"self_attn.q_proj", "mlp.down_proj", "router.proj"}) || got[2].In != 2816 || got[2].Out != 128 {
		t.Errorf("targets %+v", got)
	}
	// tiny, rank 8: layer 0 q 64+64, k 64+32, v 64+32, o 64+64, gate/up 64+128, down 128+64
	// = 1,024; layer 1 q 64+128, k 64+32, o 128+64, MLP 576 = 1,056; (1,024 + 1,056)·8 = 16,640.
	tiny, err := LoRATargets(mustPreset(t, PresetTiny), nil, -1)
	if err != nil {
		t.Fatal(err)
	}
	if got := LoRAParamCount(tiny, 8); len(tiny) != 13 || got != 16_640 {
		t.Errorf("tiny: %d targets, %d params; want 13, 16,640", len(tiny), got)
	}
}

func TestLoRATargetsErrors(t *testing.T) {
	rc := mustPreset(t, PresetReal)
	tests := []struct {
		keys      []string
		numLayers int
		want      string
	}{
		{[]string{"experts.gate_up_proj"}, -1, `lora key "experts.gate_up_proj" is not a linear of a decoder layer`},
		{[]string{"q_proj"}, -1, `lora key "q_proj"`},
		{[]string{"self_attn.q_proj", ""}, -1, `lora key ""`},
		{nil, 0, "num_layers 0 must be -1 (all) or in [1, 30]"},
		{nil, -2, "num_layers -2 must be -1 (all) or in [1, 30]"},
		{nil, 31, "num_layers 31 must be -1 (all) or in [1, 30]"},
	}
	for _, tt := range tests {
		_, err := LoRATargets(rc, tt.keys, tt.numLayers)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("LoRATargets(%q, %d) error %v, want it to contain %q", tt.keys, tt.numLayers, err, tt.want)
		}
	}
	_, err := LoRATargets(rc, []string{"bogus"}, -1)
	if err == nil || !strings.Contains(err.Error(), "self_attn.q_proj, self_attn.k_proj") {
		t.Errorf("unknown-key error %v should list the valid keys", err)
	}
	// A hand-built config whose layer_types disagree with num_hidden_layers is refused, not indexed.
	broken := mustPreset(t, PresetTiny)
	broken.TextConfig.LayerTypes = broken.TextConfig.LayerTypes[:1]
	if _, err := LoRATargets(broken, nil, -1); err == nil || !strings.Contains(err.Error(), "invalid config") {
		t.Errorf("LoRATargets(invalid config) error %v, want an invalid-config error", err)
	}
}
