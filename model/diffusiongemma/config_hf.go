package diffusiongemma

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// This file reads the dialect transformers (≥ 5.13) writes into config.json. Where the MLX
// dialect (mlx-vlm, the google release) states the full-attention geometry as
// text_config.global_head_dim and num_global_key_value_heads, transformers writes
//
//	"per_layer_config": {"5": {"head_dim": 512, "num_key_value_heads": 2}, "11": {...}, ...}
//
// one entry per full-attention layer, and neither global key. Both dialects decode into the
// same TextConfig; a file that states both must agree.

// perLayerKeys are the per_layer_config entry keys this model understands.
var perLayerKeys = []string{"head_dim", "num_key_value_heads"}

// applyPerLayerConfig derives GlobalHeadDim and NumGlobalKeyValueHeads from per_layer_config
// (when the file has one). raw holds the text config's own keys, so that an explicit MLX-dialect
// value can be checked against the transformers one. It returns one error listing every
// problem.
func (t *TextConfig) applyPerLayerConfig(raw map[string]json.RawMessage) error {
	entries, ok := raw["per_layer_config"]
	if !ok || string(entries) == "null" {
		return nil
	}
	var byLayer map[string]map[string]json.RawMessage
	if err := json.Unmarshal(entries, &byLayer); err != nil {
		return fmt.Errorf("per_layer_config: want {\"<layer>\": {\"head_dim\": …, \"num_key_value_heads\": …}}: %w", err)
	}
	if t.NumHiddenLayers <= 0 || t.NumHiddenLayers > maxLayers {
		return nil // Validate reports the layer count; nothing can be checked against it
	}
	types := t.LayerTypes
	if len(types) == 0 {
		types = DefaultLayerTypes(t.NumHiddenLayers)
	}
	var problems []string
	var full []int
	for i, lt := range types {
		if lt == FullAttention {
			full = append(full, i)
		}
	}
	// Every full layer takes the same geometry here: the model has one global head_dim and
	// kv-head count.
	headDim, kvHeads := t.HeadDim, t.NumKeyValueHeads
	seen := map[int]bool{}
	first := true
	for _, k := range sortedLayerKeys(byLayer) {
		i, err := strconv.Atoi(k)
		if err != nil || i < 0 || i >= t.NumHiddenLayers {
			problems = append(problems, fmt.Sprintf("per_layer_config[%q] is not a layer index in [0, %d)", k, t.NumHiddenLayers))
			continue
		}
		if i < len(types) && types[i] != FullAttention {
			problems = append(problems, fmt.Sprintf("per_layer_config[%q] overrides %s layer %d; only full-attention layers may differ", k, types[i], i))
			continue
		}
		seen[i] = true
		// An entry changes the text config's head_dim and/or num_key_value_heads.
		var g struct{ HeadDim, NumKeyValueHeads *int }
		for _, key := range slices.Sorted(maps.Keys(byLayer[k])) {
			val := byLayer[k][key]
			if !slices.Contains(perLayerKeys, key) {
				problems = append(problems, fmt.Sprintf("per_layer_config[%q].%s is not supported (want %s)", k, key, strings.Join(perLayerKeys, ", ")))
				continue
			}
			var v int
			if err := json.Unmarshal(val, &v); err != nil {
				problems = append(problems, fmt.Sprintf("per_layer_config[%q].%s: want an integer: %v", k, key, err))
				continue
			}
			if key == "head_dim" {
				g.HeadDim = &v
			} else {
				g.NumKeyValueHeads = &v
			}
		}
		hd, kv := t.HeadDim, t.NumKeyValueHeads
		if g.HeadDim != nil {
			hd = *g.HeadDim
		}
		if g.NumKeyValueHeads != nil {
			kv = *g.NumKeyValueHeads
		}
		if first {
			headDim, kvHeads, first = hd, kv, false
		} else if hd != headDim || kv != kvHeads {
			problems = append(problems, fmt.Sprintf("per_layer_config[%q] gives head_dim %d, num_key_value_heads %d, but an earlier full layer %d, %d; all full-attention layers must share one geometry", k, hd, kv, headDim, kvHeads))
		}
	}
	var missing []string
	for _, i := range full {
		if !seen[i] {
			missing = append(missing, strconv.Itoa(i))
		}
	}
	if len(seen) > 0 && len(missing) > 0 {
		problems = append(problems, fmt.Sprintf("per_layer_config lists some full-attention layers but not %s; all full-attention layers must share one geometry", strings.Join(missing, ", ")))
	}
	// Explicit MLX-dialect keys must say the same.
	for _, c := range []struct {
		key      string
		explicit int
		derived  int
	}{{"global_head_dim", t.GlobalHeadDim, headDim}, {"num_global_key_value_heads", t.NumGlobalKeyValueHeads, kvHeads}} {
		if _, stated := raw[c.key]; stated && c.explicit != c.derived {
			problems = append(problems, fmt.Sprintf("the two config dialects disagree: %s is %d, per_layer_config gives %d", c.key, c.explicit, c.derived))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	t.GlobalHeadDim, t.NumGlobalKeyValueHeads = headDim, kvHeads
	return nil
}

func sortedLayerKeys(m map[string]map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(a, b int) bool {
		ia, ea := strconv.Atoi(keys[a])
		ib, eb := strconv.Atoi(keys[b])
		if ea == nil && eb == nil {
			return ia < ib
		}
		return keys[a] < keys[b]
	})
	return keys
}
