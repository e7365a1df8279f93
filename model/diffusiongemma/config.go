// The config.json schema: Config, TextConfig and VisionConfig with tags equal to the file's
// keys, the names that appear in config files, and the JSON forms of the field types that
// config files spell in more than one way. Generation config, quantization, defaults,
// reading and validation live in the other config_*.go files.

package diffusiongemma

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// LayerType is the attention kind of one decoder layer, spelled as in config.json's layer_types.
type LayerType string

const (
	// SlidingAttention layers attend within sliding_window, use head_dim and num_key_value_heads,
	// and have a v_proj.
	SlidingAttention LayerType = "sliding_attention"
	// FullAttention layers attend everywhere, use global_head_dim and num_global_key_value_heads,
	// proportional RoPE, and take their values from k_proj (no v_proj).
	FullAttention LayerType = "full_attention"
)

// RoPE kinds understood by the forward pass (diffusiongemma.md §3.1).
const (
	RopeDefault      = "default"
	RopeProportional = "proportional"
	// RopeAxial is what transformers calls the vision tower's 2-D RoPE (half the head turns
	// with the patch's x, half with its y); mlx-vlm and the google release say "default" for
	// the same rotation.
	RopeAxial = "axial"
)

// Names that appear in config files.
const (
	ModelType              = "diffusion_gemma"
	TextModelType          = "diffusion_gemma_text"
	VisionModelType        = "gemma4_vision"
	Architecture           = "DiffusionGemmaForBlockDiffusion"
	ActivationGeluTanh     = "gelu_pytorch_tanh"
	EntropyBoundSamplerCls = "EntropyBoundSamplerConfig"
	QuantModeAffine        = "affine"

	// LayoutNested and LayoutFlat name the two config.json layouts of §1.1.
	LayoutNested = "nested"
	LayoutFlat   = "flat"

	// Sources of the generation config, reported in Config.GenerationSource.
	GenerationFromFile     = "generation_config.json"
	GenerationFromConfig   = "config.json"
	GenerationFromDefaults = "defaults"
)

// Config is a DiffusionGemma config.json. JSON tags equal the file's keys; fields tagged
// `json:"-"` are derived by the loader.
type Config struct {
	Architectures            []string `json:"architectures,omitempty"`
	ModelType                string   `json:"model_type"`
	CanvasLength             int      `json:"canvas_length"`
	EOSTokenID               TokenIDs `json:"eos_token_id,omitempty"`
	BOITokenID               int      `json:"boi_token_id"`
	EOITokenID               int      `json:"eoi_token_id"`
	ImageTokenID             int      `json:"image_token_id"`
	VideoTokenID             *int     `json:"video_token_id,omitempty"`
	TieWordEmbeddings        bool     `json:"tie_word_embeddings"`
	VisionSoftTokensPerImage int      `json:"vision_soft_tokens_per_image,omitempty"`
	DiffusionGenerationKind  string   `json:"diffusion_generation_kind,omitempty"`
	InitializerRange         float64  `json:"initializer_range,omitempty"`
	Dtype                    string   `json:"dtype,omitempty"`
	// TorchDtype is transformers 4.x's spelling of Dtype (v5 writes dtype).
	TorchDtype       string            `json:"torch_dtype,omitempty"`
	TextConfig       TextConfig        `json:"text_config"`
	VisionConfig     *VisionConfig     `json:"vision_config,omitempty"`
	GenerationConfig *GenerationConfig `json:"generation_config,omitempty"`
	// Quantization is read from "quantization", or from "quantization_config" when the former
	// is absent. Nil means an unquantized checkpoint.
	Quantization *Quantization `json:"quantization,omitempty"`

	// Layout is LayoutNested or LayoutFlat: where the text fields were read from.
	Layout string `json:"-"`
	// GenerationSource says where GenerationConfig came from (GenerationFrom*).
	GenerationSource string `json:"-"`
}

// TextConfig is the text model (model_type "diffusion_gemma_text"), §1.2.
type TextConfig struct {
	ModelType              string                `json:"model_type"`
	VocabSize              int                   `json:"vocab_size"`
	HiddenSize             int                   `json:"hidden_size"`
	IntermediateSize       int                   `json:"intermediate_size"`
	MoeIntermediateSize    int                   `json:"moe_intermediate_size"`
	NumHiddenLayers        int                   `json:"num_hidden_layers"`
	NumAttentionHeads      int                   `json:"num_attention_heads"`
	NumKeyValueHeads       int                   `json:"num_key_value_heads"`
	NumGlobalKeyValueHeads int                   `json:"num_global_key_value_heads"`
	HeadDim                int                   `json:"head_dim"`
	GlobalHeadDim          int                   `json:"global_head_dim"`
	HiddenActivation       string                `json:"hidden_activation"`
	RMSNormEps             float64               `json:"rms_norm_eps"`
	MaxPositionEmbeddings  int                   `json:"max_position_embeddings"`
	SlidingWindow          int                   `json:"sliding_window"`
	LayerTypes             []LayerType           `json:"layer_types"`
	RopeParameters         RopeParametersByLayer `json:"rope_parameters"`
	// FinalLogitSoftcapping c gives logits = c·tanh(z/c); 0 disables the cap.
	FinalLogitSoftcapping     float64                `json:"final_logit_softcapping"`
	NumExperts                int                    `json:"num_experts"`
	TopKExperts               int                    `json:"top_k_experts"`
	AttentionBias             bool                   `json:"attention_bias"`
	AttentionDropout          float64                `json:"attention_dropout"`
	TieWordEmbeddings         bool                   `json:"tie_word_embeddings"`
	UseBidirectionalAttention BidirectionalAttention `json:"use_bidirectional_attention"`
	PadTokenID                int                    `json:"pad_token_id"`
	EOSTokenID                TokenIDs               `json:"eos_token_id"`
	BOSTokenID                int                    `json:"bos_token_id"`
	Dtype                     string                 `json:"dtype,omitempty"`
	InitializerRange          float64                `json:"initializer_range,omitempty"`
}

// RopeParameters configures the rotary embedding of one layer kind.
type RopeParameters struct {
	RopeType  string  `json:"rope_type"`
	RopeTheta float64 `json:"rope_theta"`
	// PartialRotaryFactor (proportional only) is the fraction of the head that rotates;
	// absent means 1.
	PartialRotaryFactor *float64 `json:"partial_rotary_factor,omitempty"`
	// Factor divides the proportional inverse frequencies; absent means 1.
	Factor *float64 `json:"factor,omitempty"`
}

// Partial returns partial_rotary_factor, 1 when absent.
func (r RopeParameters) Partial() float64 {
	if r.PartialRotaryFactor == nil {
		return 1
	}
	return *r.PartialRotaryFactor
}

// ScalingFactor returns factor, 1 when absent.
func (r RopeParameters) ScalingFactor() float64 {
	if r.Factor == nil {
		return 1
	}
	return *r.Factor
}

// RopeParametersByLayer maps a layer kind to its RoPE. In JSON it is either keyed by layer kind
// (the DiffusionGemma form) or a single flat RoPE object, which then applies to every kind (the
// form transformers uses for single-RoPE models).
type RopeParametersByLayer map[LayerType]RopeParameters

// UnmarshalJSON accepts both the per-kind and the flat form.
func (m *RopeParametersByLayer) UnmarshalJSON(b []byte) error {
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		*m = nil
		return nil
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(b, &keys); err != nil {
		return fmt.Errorf("rope_parameters: %w", err)
	}
	_, hasType := keys["rope_type"]
	_, hasTheta := keys["rope_theta"]
	if hasType || hasTheta {
		var flat RopeParameters
		if err := json.Unmarshal(b, &flat); err != nil {
			return fmt.Errorf("rope_parameters: %w", err)
		}
		*m = RopeParametersByLayer{SlidingAttention: flat, FullAttention: clonePtrs(flat)}
		return nil
	}
	out := make(RopeParametersByLayer, len(keys))
	for k, raw := range keys {
		var r RopeParameters
		if err := json.Unmarshal(raw, &r); err != nil {
			return fmt.Errorf("rope_parameters.%s: %w", k, err)
		}
		out[LayerType(k)] = r
	}
	*m = out
	return nil
}

// clonePtrs copies a RopeParameters so two map entries never share a pointer.
func clonePtrs(r RopeParameters) RopeParameters {
	if r.PartialRotaryFactor != nil {
		v := *r.PartialRotaryFactor
		r.PartialRotaryFactor = &v
	}
	if r.Factor != nil {
		v := *r.Factor
		r.Factor = &v
	}
	return r
}

// BidirectionalAttention is use_bidirectional_attention: "vision" (the encoder is bidirectional
// inside image blocks) or "" (JSON null/false: purely causal). JSON true reads as "all".
type BidirectionalAttention string

// UnmarshalJSON accepts a string, null or a boolean.
func (b *BidirectionalAttention) UnmarshalJSON(data []byte) error {
	switch s := string(bytes.TrimSpace(data)); s {
	case "null", "false":
		*b = ""
		return nil
	case "true":
		*b = "all"
		return nil
	}
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("use_bidirectional_attention: want a string, null or boolean: %w", err)
	}
	*b = BidirectionalAttention(s)
	return nil
}

// MarshalJSON writes "" as null.
func (b BidirectionalAttention) MarshalJSON() ([]byte, error) {
	if b == "" {
		return []byte("null"), nil
	}
	return json.Marshal(string(b))
}

// TokenIDs is a token id field that config files write either as one int or as a list.
type TokenIDs []int

// UnmarshalJSON accepts an int, a list of ints or null.
func (t *TokenIDs) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if bytes.Equal(b, []byte("null")) {
		*t = nil
		return nil
	}
	if len(b) > 0 && b[0] == '[' {
		var ids []int
		if err := json.Unmarshal(b, &ids); err != nil {
			return fmt.Errorf("token ids: want an int or a list of ints: %w", err)
		}
		*t = ids
		return nil
	}
	var id int
	if err := json.Unmarshal(b, &id); err != nil {
		return fmt.Errorf("token ids: want an int or a list of ints: %w", err)
	}
	*t = TokenIDs{id}
	return nil
}

// MarshalJSON writes a single id as an int (as the text config does) and several as a list.
func (t TokenIDs) MarshalJSON() ([]byte, error) {
	switch len(t) {
	case 0:
		return []byte("null"), nil
	case 1:
		return json.Marshal(t[0])
	}
	return json.Marshal([]int(t))
}

// VisionConfig is the gemma4_vision tower (§1.4). Present only for image-capable checkpoints.
type VisionConfig struct {
	ModelType             string         `json:"model_type"`
	HiddenSize            int            `json:"hidden_size"`
	IntermediateSize      int            `json:"intermediate_size"`
	NumHiddenLayers       int            `json:"num_hidden_layers"`
	NumAttentionHeads     int            `json:"num_attention_heads"`
	NumKeyValueHeads      int            `json:"num_key_value_heads"`
	HeadDim               int            `json:"head_dim"`
	GlobalHeadDim         int            `json:"global_head_dim"`
	HiddenActivation      string         `json:"hidden_activation,omitempty"`
	PatchSize             int            `json:"patch_size"`
	PoolingKernelSize     int            `json:"pooling_kernel_size"`
	RMSNormEps            float64        `json:"rms_norm_eps"`
	Standardize           bool           `json:"standardize"`
	UseClippedLinears     bool           `json:"use_clipped_linears"`
	RopeParameters        RopeParameters `json:"rope_parameters"`
	PositionEmbeddingSize int            `json:"position_embedding_size"`
	DefaultOutputLength   int            `json:"default_output_length,omitempty"`
}
