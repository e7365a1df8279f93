package diffusiongemma

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// readTransformersConfig returns testdata/config.transformers.json — the config.json that
// transformers 5.17's save_pretrained wrote for interop/hf_golden.py's text model — decoded
// into a generic map for editing.
func readTransformersConfig(t *testing.T) map[string]any {
	t.Helper()
	b, err := os.ReadFile("testdata/config.transformers.json")
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestTransformersDialect: the file transformers writes (per_layer_config, no
// global_head_dim, vision RoPE "axial") parses to the same geometry as the MLX dialect of
// the same model.
func TestTransformersDialect(t *testing.T) {
	hf := readTransformersConfig(t)
	c, err := ParseConfig(mustJSON(t, hf))
	if err != nil {
		t.Fatalf("ParseConfig(transformers config.json) = %v", err)
	}
	tc := c.TextConfig
	if tc.GlobalHeadDim != 16 || tc.NumGlobalKeyValueHeads != 1 || tc.HeadDim != 8 || tc.NumKeyValueHeads != 2 {
		t.Errorf("geometry = head_dim %d kv %d, global %d kv %d; want 8, 2, 16, 1",
			tc.HeadDim, tc.NumKeyValueHeads, tc.GlobalHeadDim, tc.NumGlobalKeyValueHeads)
	}
	if got := c.VisionConfig.RopeParameters.RopeType; got != RopeAxial {
		t.Errorf("vision rope_type = %q, want %q", got, RopeAxial)
	}

	// The MLX dialect of the same model: global keys instead of per_layer_config.
	mlx := readTransformersConfig(t)
	text := mlx["text_config"].(map[string]any)
	delete(text, "per_layer_config")
	text["global_head_dim"] = 16
	text["num_global_key_value_heads"] = 1
	m, err := ParseConfig(mustJSON(t, mlx))
	if err != nil {
		t.Fatal(err)
	}
	a, b := c.TextConfig, m.TextConfig
	if ja, jb := string(mustJSON(t, a)), string(mustJSON(t, b)); ja != jb {
		t.Errorf("the two dialects give different text configs:\n transformers %s\n mlx          %s", ja, jb)
	}
	for i := range tc.NumHiddenLayers {
		if c.TextConfig.LayerHeadDim(i) != m.TextConfig.LayerHeadDim(i) || c.TextConfig.LayerKVHeads(i) != m.TextConfig.LayerKVHeads(i) {
			t.Errorf("layer %d geometry differs between dialects", i)
		}
	}

	// Both dialects at once, agreeing, is fine.
	both := readTransformersConfig(t)
	bt := both["text_config"].(map[string]any)
	bt["global_head_dim"] = 16
	bt["num_global_key_value_heads"] = 1
	if _, err := ParseConfig(mustJSON(t, both)); err != nil {
		t.Errorf("agreeing dialects: ParseConfig = %v", err)
	}
}

// TestPerLayerConfigErrors: each malformed or contradictory per_layer_config is one clear
// message.
func TestPerLayerConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		edit func(text map[string]any)
		want string
	}{
		{"dialects disagree", func(x map[string]any) { x["global_head_dim"] = 512 },
			"the two config dialects disagree: global_head_dim is 512, per_layer_config gives 16"},
		{"kv disagree", func(x map[string]any) { x["num_global_key_value_heads"] = 2 },
			"num_global_key_value_heads is 2, per_layer_config gives 1"},
		{"sliding layer", func(x map[string]any) {
			x["per_layer_config"] = map[string]any{"0": map[string]any{"head_dim": 16}, "2": map[string]any{"head_dim": 16}}
		}, `per_layer_config["0"] overrides sliding_attention layer 0`},
		{"not an index", func(x map[string]any) {
			x["per_layer_config"] = map[string]any{"x": map[string]any{"head_dim": 16}}
		}, `per_layer_config["x"] is not a layer index in [0, 3)`},
		{"out of range", func(x map[string]any) {
			x["per_layer_config"] = map[string]any{"7": map[string]any{"head_dim": 16}}
		}, `per_layer_config["7"] is not a layer index in [0, 3)`},
		{"unknown key", func(x map[string]any) {
			x["per_layer_config"] = map[string]any{"2": map[string]any{"head_dim": 16, "sliding_window": 4}}
		}, `per_layer_config["2"].sliding_window is not supported`},
		{"not a number", func(x map[string]any) {
			x["per_layer_config"] = map[string]any{"2": map[string]any{"head_dim": "big"}}
		}, `per_layer_config["2"].head_dim: want an integer`},
		{"two full layers differ", func(x map[string]any) {
			x["num_hidden_layers"] = 6
			x["layer_types"] = []string{"sliding_attention", "full_attention", "sliding_attention", "sliding_attention", "sliding_attention", "full_attention"}
			x["per_layer_config"] = map[string]any{"1": map[string]any{"head_dim": 16}, "5": map[string]any{"head_dim": 32}}
		}, "all full-attention layers must share one geometry"},
		{"a full layer missing", func(x map[string]any) {
			x["num_hidden_layers"] = 6
			x["layer_types"] = []string{"sliding_attention", "full_attention", "sliding_attention", "sliding_attention", "sliding_attention", "full_attention"}
			x["per_layer_config"] = map[string]any{"5": map[string]any{"head_dim": 16}}
		}, "per_layer_config lists some full-attention layers but not 1"},
		{"not an object", func(x map[string]any) { x["per_layer_config"] = []int{1} },
			"per_layer_config: want"},
	}
	for _, tt := range tests {
		cfg := readTransformersConfig(t)
		tt.edit(cfg["text_config"].(map[string]any))
		_, err := ParseConfig(mustJSON(t, cfg))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: ParseConfig = %v, want an error containing %q", tt.name, err, tt.want)
		}
	}
}

// TestPerLayerConfigDefaults: an empty per_layer_config means the full layers use the
// sliding geometry; an entry without num_key_value_heads keeps num_key_value_heads.
func TestPerLayerConfigDefaults(t *testing.T) {
	cfg := readTransformersConfig(t)
	text := cfg["text_config"].(map[string]any)
	text["per_layer_config"] = map[string]any{}
	c, err := ParseConfig(mustJSON(t, cfg))
	if err != nil {
		t.Fatal(err)
	}
	if c.TextConfig.GlobalHeadDim != 8 || c.TextConfig.NumGlobalKeyValueHeads != 2 {
		t.Errorf("empty per_layer_config: global %d/%d, want 8/2", c.TextConfig.GlobalHeadDim, c.TextConfig.NumGlobalKeyValueHeads)
	}
	text["per_layer_config"] = map[string]any{"2": map[string]any{"head_dim": 16}}
	if c, err = ParseConfig(mustJSON(t, cfg)); err != nil {
		t.Fatal(err)
	}
	if c.TextConfig.GlobalHeadDim != 16 || c.TextConfig.NumGlobalKeyValueHeads != 2 {
		t.Errorf("head_dim only: global %d/%d, want 16/2", c.TextConfig.GlobalHeadDim, c.TextConfig.NumGlobalKeyValueHeads)
	}
}

// TestTextOnlyImageIDs: without a vision tower the image token ids are not checked, so a
// text-only config that leaves them at the real checkpoint's defaults loads with a small
// vocabulary; with a tower they must lie inside it.
func TestTextOnlyImageIDs(t *testing.T) {
	cfg := readTransformersConfig(t)
	delete(cfg, "vision_config")
	for _, k := range []string{"boi_token_id", "eoi_token_id", "image_token_id"} {
		delete(cfg, k)
	}
	c, err := ParseConfig(mustJSON(t, cfg))
	if err != nil {
		t.Fatalf("text-only config without image ids: %v", err)
	}
	if c.ImageTokenID != 258880 {
		t.Errorf("image_token_id = %d, want the default 258880", c.ImageTokenID)
	}
	withTower := readTransformersConfig(t)
	delete(withTower, "image_token_id")
	if _, err := ParseConfig(mustJSON(t, withTower)); err == nil || !strings.Contains(err.Error(), "image_token_id 258880 is outside the vocabulary [0, 256)") {
		t.Errorf("vision tower with an out-of-range image id: ParseConfig = %v", err)
	}
}
