package diffusiongemma

import (
	"fmt"
	"strings"

	"github.com/dgtune/dgtune/mx"
)

// Vision tensor roots (§2.3).
const (
	VisionTowerPrefix = "model.encoder.vision_tower"
	EmbedVisionPrefix = "model.encoder.embed_vision"
)

// IsVisionTensor reports whether a checkpoint tensor belongs to the vision tower or
// embed_vision.
func IsVisionTensor(name string) bool {
	return strings.HasPrefix(name, VisionTowerPrefix+".") || strings.HasPrefix(name, EmbedVisionPrefix+".")
}

func hasVisionTensor(weights map[string]*mx.Array) bool {
	for n := range weights {
		if IsVisionTensor(n) {
			return true
		}
	}
	return false
}

// VisionLayerPrefix returns the name prefix of vision encoder layer i.
func VisionLayerPrefix(i int) string {
	return fmt.Sprintf("%s.encoder.layers.%d", VisionTowerPrefix, i)
}

// visionLinear is one linear of a vision layer; key is its path inside the layer.
type visionLinear struct {
	key     string
	in, out int
}

// visionLayerLinears lists a vision layer's linears; each is a ClippableLinear whose
// weights sit under "<key>.linear".
func visionLayerLinears(v *VisionConfig) []visionLinear {
	h := v.HiddenSize
	q := v.NumAttentionHeads * v.HeadDim
	kv := v.NumKeyValueHeads * v.HeadDim
	return []visionLinear{
		{"self_attn.q_proj.linear", h, q},
		{"self_attn.k_proj.linear", h, kv},
		{"self_attn.v_proj.linear", h, kv},
		{"self_attn.o_proj.linear", q, h},
		{"mlp.gate_proj.linear", h, v.IntermediateSize},
		{"mlp.up_proj.linear", h, v.IntermediateSize},
		{"mlp.down_proj.linear", v.IntermediateSize, h},
	}
}

// visionLayerNorms are the four per-layer RMSNorm weights of a vision block, all [hidden].
func visionLayerNorms() []string {
	return []string{"input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm", "post_feedforward_layernorm"}
}

// VisionTensors returns every vision tensor of §2.3 for cfg (nil without a vision_config):
// the patch embedder, each encoder layer, the standardization vectors, and embed_vision's
// projection to the text hidden size. Shapes are logical, as in ExpectedTensors.
func VisionTensors(cfg *Config) []TensorSpec {
	v := cfg.VisionConfig
	if v == nil {
		return nil
	}
	h := v.HiddenSize
	var out []TensorSpec
	weight := func(module string, quantizable bool, shape ...int) {
		kind := KindParam
		if quantizable {
			kind = KindLinear
		}
		out = append(out, TensorSpec{Name: module + ".weight", Shape: shape, Quantizable: quantizable, Kind: kind, Module: module})
	}
	pe := VisionTowerPrefix + ".patch_embedder"
	weight(pe+".input_proj", true, h, 3*v.PatchSize*v.PatchSize)
	out = append(out, TensorSpec{Name: pe + ".position_embedding_table", Shape: []int{2, v.PositionEmbeddingSize, h}, Module: pe})
	for i := range v.NumHiddenLayers {
		p := VisionLayerPrefix(i)
		for _, l := range visionLayerLinears(v) {
			if l.key == "mlp.gate_proj.linear" {
				weight(p+".self_attn.q_norm", false, v.HeadDim)
				weight(p+".self_attn.k_norm", false, v.HeadDim)
			}
			weight(p+"."+l.key, true, l.out, l.in)
		}
		for _, n := range visionLayerNorms() {
			weight(p+"."+n, false, h)
		}
	}
	if v.Standardize {
		out = append(out,
			TensorSpec{Name: VisionTowerPrefix + ".std_bias", Shape: []int{h}, Module: VisionTowerPrefix},
			TensorSpec{Name: VisionTowerPrefix + ".std_scale", Shape: []int{h}, Module: VisionTowerPrefix})
	}
	weight(EmbedVisionPrefix+".embedding_projection", true, cfg.TextConfig.HiddenSize, h)
	return out
}

// CountVisionParams is the number of (logical) vision parameters of cfg.
func CountVisionParams(cfg *Config) int64 {
	var n int64
	for _, ts := range VisionTensors(cfg) {
		k := int64(1)
		for _, d := range ts.Shape {
			k *= int64(d)
		}
		n += k
	}
	return n
}

// validateVision reports what the tower code cannot run; Config.Validate has checked the
// dimensions are positive and head_dim is a multiple of 4.
func validateVision(v *VisionConfig) []string {
	var p problems
	if v.UseClippedLinears {
		p.addf("vision_config.use_clipped_linears true is not supported (DiffusionGemma's checkpoints use plain linears)")
	}
	if v.HiddenActivation != "" && v.HiddenActivation != ActivationGeluTanh {
		p.addf("vision_config.hidden_activation %q is not supported (want %q)", v.HiddenActivation, ActivationGeluTanh)
	}
	return p
}

// buildVision assembles the tower from ws. It is called only when the config has a
// vision_config and the checkpoint holds at least one vision tensor; a partial tower is
// reported tensor by tensor through ws.
func buildVision(ws *weightSet, cfg *Config) *VisionTower {
	v := cfg.VisionConfig
	for _, msg := range validateVision(v) {
		ws.fail("%s", msg)
	}
	h := v.HiddenSize
	t := &VisionTower{Config: v, ropeInv: visionRopeInv(v.HeadDim, v.RopeParameters.RopeTheta)}
	pe := VisionTowerPrefix + ".patch_embedder"
	t.InputProj = ws.linear(pe+".input_proj", h, 3*v.PatchSize*v.PatchSize)
	t.PosTable = ws.param(pe+".position_embedding_table", 2, v.PositionEmbeddingSize, h)
	for i := range v.NumHiddenLayers {
		p := VisionLayerPrefix(i) + "."
		l := &VisionLayer{Heads: v.NumAttentionHeads, KVHeads: v.NumKeyValueHeads, HeadDim: v.HeadDim}
		lin := map[string]*Linear{
			"self_attn.q_proj.linear": &l.Q, "self_attn.k_proj.linear": &l.K,
			"self_attn.v_proj.linear": &l.V, "self_attn.o_proj.linear": &l.O,
			"mlp.gate_proj.linear": &l.Gate, "mlp.up_proj.linear": &l.Up, "mlp.down_proj.linear": &l.Down,
		}
		for _, ll := range visionLayerLinears(v) {
			*lin[ll.key] = ws.linear(p+ll.key, ll.out, ll.in)
		}
		l.QNorm = ws.param(p+"self_attn.q_norm.weight", v.HeadDim)
		l.KNorm = ws.param(p+"self_attn.k_norm.weight", v.HeadDim)
		l.InputNorm = ws.param(p+"input_layernorm.weight", h)
		l.PostAttnNorm = ws.param(p+"post_attention_layernorm.weight", h)
		l.PreFFNorm = ws.param(p+"pre_feedforward_layernorm.weight", h)
		l.PostFFNorm = ws.param(p+"post_feedforward_layernorm.weight", h)
		t.Layers = append(t.Layers, l)
	}
	if v.Standardize {
		t.StdBias = ws.param(VisionTowerPrefix+".std_bias", h)
		t.StdScale = ws.param(VisionTowerPrefix+".std_scale", h)
	}
	t.Projection = ws.linear(EmbedVisionPrefix+".embedding_projection", cfg.TextConfig.HiddenSize, h)
	return t
}
