package diffusiongemma

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
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

// Sanity limits, checked before anything is sized from a config (a hostile or corrupt
// config.json must produce an error, not an out-of-memory crash). They are far above any real
// model and keep every parameter count within int64.
const (
	maxLayers  = 1024
	maxDim     = 1 << 18
	maxVocab   = 1 << 22
	maxExperts = 1 << 12
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

// GenerationConfig drives the denoising sampler (§1.5, §4).
type GenerationConfig struct {
	MaxDenoisingSteps int     `json:"max_denoising_steps"`
	MaxNewTokens      int     `json:"max_new_tokens"`
	TMin              float64 `json:"t_min"`
	TMax              float64 `json:"t_max"`
	// LinearTemperatureScheduleConfig, when present, overrides t_min/t_max (mlx-vlm accepts
	// the schedule in this form as well).
	LinearTemperatureScheduleConfig *TemperatureSchedule `json:"linear_temperature_schedule_config,omitempty"`
	SamplerConfig                   *SamplerConfig       `json:"sampler_config,omitempty"`
	// ConfidenceThreshold and StabilityThreshold switch the stable-and-confident stop rule on
	// when either is present (§4.6); nil means absent.
	ConfidenceThreshold *float64 `json:"confidence_threshold,omitempty"`
	StabilityThreshold  *int     `json:"stability_threshold,omitempty"`
	// DiffusionStoppingConfig, when present, takes precedence over the two fields above.
	DiffusionStoppingConfig *StopRule `json:"diffusion_stopping_config,omitempty"`
	EOSTokenID              TokenIDs  `json:"eos_token_id,omitempty"`
	PadTokenID              int       `json:"pad_token_id"`
}

// TemperatureSchedule is the linear logit-temperature schedule t_min → t_max.
type TemperatureSchedule struct {
	TMin float64 `json:"t_min"`
	TMax float64 `json:"t_max"`
}

// SamplerConfig is generation_config.sampler_config.
type SamplerConfig struct {
	ClsName      string  `json:"_cls_name"`
	EntropyBound float64 `json:"entropy_bound"`
}

// StopRule is the stable-and-confident early stop of §4.6: stop a block once the argmax canvas
// has been identical for StabilityThreshold steps and the mean token entropy is below
// ConfidenceThreshold.
type StopRule struct {
	ConfidenceThreshold float64 `json:"confidence_threshold"`
	StabilityThreshold  int     `json:"stability_threshold"`
}

// §1.5 defaults.
const (
	defaultMaxDenoisingSteps   = 48
	defaultMaxNewTokens        = 256
	defaultTMin                = 0.4
	defaultTMax                = 0.8
	defaultEntropyBound        = 0.1
	defaultConfidenceThreshold = 0.005
	defaultStabilityThreshold  = 1
)

// UnmarshalJSON fills absent keys with the §1.5 defaults (mlx-vlm reads each key with a default).
func (t *TemperatureSchedule) UnmarshalJSON(b []byte) error {
	type temperatureSchedule TemperatureSchedule
	p := temperatureSchedule{TMin: defaultTMin, TMax: defaultTMax}
	if err := json.Unmarshal(b, &p); err != nil {
		return fmt.Errorf("linear_temperature_schedule_config: %w", err)
	}
	*t = TemperatureSchedule(p)
	return nil
}

// UnmarshalJSON fills absent keys with the defaults (_cls_name defaults to the entropy-bound
// sampler, as in mlx-vlm).
func (s *SamplerConfig) UnmarshalJSON(b []byte) error {
	type samplerConfig SamplerConfig
	p := samplerConfig{ClsName: EntropyBoundSamplerCls, EntropyBound: defaultEntropyBound}
	if err := json.Unmarshal(b, &p); err != nil {
		return fmt.Errorf("sampler_config: %w", err)
	}
	*s = SamplerConfig(p)
	return nil
}

// UnmarshalJSON fills absent keys with the §1.5 defaults.
func (s *StopRule) UnmarshalJSON(b []byte) error {
	type stopRule StopRule
	p := stopRule{ConfidenceThreshold: defaultConfidenceThreshold, StabilityThreshold: defaultStabilityThreshold}
	if err := json.Unmarshal(b, &p); err != nil {
		return fmt.Errorf("diffusion_stopping_config: %w", err)
	}
	*s = StopRule(p)
	return nil
}

// DefaultGenerationConfig returns the §1.5 defaults without the stop rule and without a
// sampler_config: what a checkpoint that ships no generation config gets.
func DefaultGenerationConfig() GenerationConfig {
	return GenerationConfig{
		MaxDenoisingSteps: defaultMaxDenoisingSteps,
		MaxNewTokens:      defaultMaxNewTokens,
		TMin:              defaultTMin,
		TMax:              defaultTMax,
	}
}

// UnmarshalJSON decodes over DefaultGenerationConfig, so absent keys keep their defaults.
func (g *GenerationConfig) UnmarshalJSON(b []byte) error {
	type generationConfig GenerationConfig
	p := generationConfig(DefaultGenerationConfig())
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*g = GenerationConfig(p)
	return nil
}

// TemperatureRange returns the schedule's (t_min, t_max).
func (g *GenerationConfig) TemperatureRange() (tMin, tMax float64) {
	if s := g.LinearTemperatureScheduleConfig; s != nil {
		return s.TMin, s.TMax
	}
	return g.TMin, g.TMax
}

// Stop returns the stable-and-confident stop rule and whether it is on. It is on only if the
// generation config provided it: diffusion_stopping_config, or either threshold key (the other
// then takes its default).
func (g *GenerationConfig) Stop() (StopRule, bool) {
	if g.DiffusionStoppingConfig != nil {
		return *g.DiffusionStoppingConfig, true
	}
	if g.ConfidenceThreshold == nil && g.StabilityThreshold == nil {
		return StopRule{}, false
	}
	r := StopRule{ConfidenceThreshold: defaultConfidenceThreshold, StabilityThreshold: defaultStabilityThreshold}
	if g.ConfidenceThreshold != nil {
		r.ConfidenceThreshold = *g.ConfidenceThreshold
	}
	if g.StabilityThreshold != nil {
		r.StabilityThreshold = *g.StabilityThreshold
	}
	return r, true
}

// EntropyBound returns sampler_config.entropy_bound (0.1 when there is no sampler_config).
func (g *GenerationConfig) EntropyBound() float64 {
	if g.SamplerConfig == nil {
		return defaultEntropyBound
	}
	return g.SamplerConfig.EntropyBound
}

// Quantization is the MLX quantization map (§1.6): a default for every quantized module plus
// per-module overrides keyed by module path (the tensor name without ".weight").
type Quantization struct {
	GroupSize int
	Bits      int
	Mode      string
	Modules   map[string]ModuleQuantization
}

// ModuleQuantization overrides the default for one module. Quantized false is the JSON value
// `false` (the module is stored unquantized); zero GroupSize/Bits/empty Mode inherit the default.
type ModuleQuantization struct {
	Quantized bool
	GroupSize int
	Bits      int
	Mode      string
}

// For resolves a module's quantization. modulePath is the tensor name without ".weight" (a
// trailing ".weight" is tolerated). The answer is only meaningful for quantizable modules
// (linears, embeddings, experts): MLX never quantizes norms, so the map never names them.
func (q Quantization) For(modulePath string) (bits, groupSize int, quantized bool) {
	modulePath = strings.TrimSuffix(modulePath, ".weight")
	bits, groupSize, quantized = q.Bits, q.GroupSize, q.Bits > 0
	m, ok := q.Modules[modulePath]
	if !ok {
		return bits, groupSize, quantized
	}
	if !m.Quantized {
		return 0, 0, false
	}
	if m.Bits > 0 {
		bits = m.Bits
	}
	if m.GroupSize > 0 {
		groupSize = m.GroupSize
	}
	return bits, groupSize, bits > 0
}

// mode resolves a module's quantization mode.
func (q Quantization) mode(modulePath string) string {
	if m, ok := q.Modules[modulePath]; ok && m.Mode != "" {
		return m.Mode
	}
	return q.Mode
}

type quantParams struct {
	GroupSize int    `json:"group_size,omitempty"`
	Bits      int    `json:"bits,omitempty"`
	Mode      string `json:"mode,omitempty"`
}

// UnmarshalJSON reads the flat MLX map: group_size/bits/mode at the top level, and every other
// key whose value is an object or a boolean as a module override. Keys with other values are
// metadata and ignored.
func (q *Quantization) UnmarshalJSON(b []byte) error {
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(b, &keys); err != nil {
		return fmt.Errorf("quantization: want an object: %w", err)
	}
	var out Quantization
	var top quantParams
	if err := json.Unmarshal(b, &top); err != nil {
		return fmt.Errorf("quantization: %w", err)
	}
	out.GroupSize, out.Bits, out.Mode = top.GroupSize, top.Bits, top.Mode
	if out.Mode == "" {
		out.Mode = QuantModeAffine
	}
	for k, raw := range keys {
		if k == "group_size" || k == "bits" || k == "mode" {
			continue
		}
		raw = bytes.TrimSpace(raw)
		var m ModuleQuantization
		switch {
		case bytes.Equal(raw, []byte("false")):
			m = ModuleQuantization{Quantized: false}
		case bytes.Equal(raw, []byte("true")):
			m = ModuleQuantization{Quantized: true}
		case len(raw) > 0 && raw[0] == '{':
			var p quantParams
			if err := json.Unmarshal(raw, &p); err != nil {
				return fmt.Errorf("quantization.%s: %w", k, err)
			}
			m = ModuleQuantization{Quantized: true, GroupSize: p.GroupSize, Bits: p.Bits, Mode: p.Mode}
		default:
			continue
		}
		if out.Modules == nil {
			out.Modules = map[string]ModuleQuantization{}
		}
		out.Modules[k] = m
	}
	*q = out
	return nil
}

// MarshalJSON writes the flat MLX map, defaults first, then modules in sorted order.
func (q Quantization) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	fmt.Fprintf(&buf, `{"group_size":%d,"bits":%d`, q.GroupSize, q.Bits)
	if q.Mode != "" {
		mode, err := json.Marshal(q.Mode)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&buf, `,"mode":%s`, mode)
	}
	names := make([]string, 0, len(q.Modules))
	for k := range q.Modules {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		m := q.Modules[k]
		key, err := json.Marshal(k)
		if err != nil {
			return nil, err
		}
		var val []byte
		if m.Quantized {
			val, err = json.Marshal(quantParams{GroupSize: m.GroupSize, Bits: m.Bits, Mode: m.Mode})
		} else {
			val = []byte("false")
		}
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&buf, ",%s:%s", key, val)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// DefaultTextConfig returns the real 26B-A4B text config (§1.2). It is the back-fill for every
// key a config.json leaves out; layer_types stays nil so that it is derived from the file's own
// num_hidden_layers.
func DefaultTextConfig() TextConfig {
	return TextConfig{
		ModelType:                 TextModelType,
		VocabSize:                 262144,
		HiddenSize:                2816,
		IntermediateSize:          2112,
		MoeIntermediateSize:       704,
		NumHiddenLayers:           30,
		NumAttentionHeads:         16,
		NumKeyValueHeads:          8,
		NumGlobalKeyValueHeads:    2,
		HeadDim:                   256,
		GlobalHeadDim:             512,
		HiddenActivation:          ActivationGeluTanh,
		RMSNormEps:                1e-6,
		MaxPositionEmbeddings:     262144,
		SlidingWindow:             1024,
		RopeParameters:            DefaultRopeParameters(),
		FinalLogitSoftcapping:     30,
		NumExperts:                128,
		TopKExperts:               8,
		AttentionBias:             false,
		AttentionDropout:          0,
		TieWordEmbeddings:         true,
		UseBidirectionalAttention: "vision",
		PadTokenID:                0,
		EOSTokenID:                TokenIDs{1},
		BOSTokenID:                2,
		Dtype:                     "bfloat16",
		InitializerRange:          0.02,
	}
}

// DefaultRopeParameters returns §1.2's RoPE: default θ=1e4 on sliding layers, proportional
// (25 % rotated) θ=1e6 on full layers.
func DefaultRopeParameters() RopeParametersByLayer {
	return RopeParametersByLayer{
		SlidingAttention: defaultRope(SlidingAttention),
		FullAttention:    defaultRope(FullAttention),
	}
}

func defaultRope(kind LayerType) RopeParameters {
	if kind == FullAttention {
		partial := 0.25
		return RopeParameters{RopeType: RopeProportional, RopeTheta: 1e6, PartialRotaryFactor: &partial}
	}
	return RopeParameters{RopeType: RopeDefault, RopeTheta: 10000}
}

// UnmarshalJSON decodes over DefaultTextConfig, so absent keys keep the §1.2 values, and
// reads transformers' per_layer_config dialect into GlobalHeadDim and NumGlobalKeyValueHeads
// (config_hf.go). Configs are written in the MLX dialect.
func (t *TextConfig) UnmarshalJSON(b []byte) error {
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		return nil
	}
	type textConfig TextConfig
	p := textConfig(DefaultTextConfig())
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	tc := TextConfig(p)
	if err := tc.applyPerLayerConfig(raw); err != nil {
		return err
	}
	*t = tc
	return nil
}

// DefaultVisionConfig returns the real vision tower (§1.4); it back-fills a vision_config's
// absent keys.
func DefaultVisionConfig() VisionConfig {
	return VisionConfig{
		ModelType:             VisionModelType,
		HiddenSize:            1152,
		IntermediateSize:      4304,
		NumHiddenLayers:       27,
		NumAttentionHeads:     16,
		NumKeyValueHeads:      16,
		HeadDim:               72,
		GlobalHeadDim:         72,
		HiddenActivation:      ActivationGeluTanh,
		PatchSize:             16,
		PoolingKernelSize:     3,
		RMSNormEps:            1e-6,
		Standardize:           true,
		UseClippedLinears:     false,
		RopeParameters:        RopeParameters{RopeType: RopeDefault, RopeTheta: 100},
		PositionEmbeddingSize: 10240,
	}
}

// UnmarshalJSON decodes over DefaultVisionConfig.
func (v *VisionConfig) UnmarshalJSON(b []byte) error {
	type visionConfig VisionConfig
	p := visionConfig(DefaultVisionConfig())
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*v = VisionConfig(p)
	return nil
}

// defaultConfig holds the top-level defaults of mlx-vlm's ModelConfig, which equal the real
// checkpoint's values.
func defaultConfig() Config {
	return Config{
		Architectures:           []string{Architecture},
		ModelType:               ModelType,
		CanvasLength:            256,
		BOITokenID:              255999,
		EOITokenID:              258882,
		ImageTokenID:            258880,
		TieWordEmbeddings:       true,
		DiffusionGenerationKind: "block",
		InitializerRange:        0.02,
		TextConfig:              DefaultTextConfig(),
	}
}

// UnmarshalJSON reads either layout (§1.1): text fields from "text_config" when present,
// otherwise from the top level; both over the §1.2 defaults. It only decodes: LoadConfig also
// derives and validates.
func (c *Config) UnmarshalJSON(b []byte) error {
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(b, &keys); err != nil {
		return err
	}
	// The alias drops this method (no recursion); its name shows in JSON error messages.
	type config Config
	p := config(defaultConfig())
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	if present(keys, "text_config") {
		p.Layout = LayoutNested
	} else {
		p.Layout = LayoutFlat
		if err := json.Unmarshal(b, &p.TextConfig); err != nil {
			return fmt.Errorf("text fields at the top level: %w", err)
		}
		// At the top level model_type names the outer model, not the text model.
		p.TextConfig.ModelType = TextModelType
	}
	if p.Quantization == nil && present(keys, "quantization_config") {
		var q Quantization
		if err := json.Unmarshal(keys["quantization_config"], &q); err != nil {
			return fmt.Errorf("quantization_config: %w", err)
		}
		p.Quantization = &q
	}
	*c = Config(p)
	return nil
}

func present(keys map[string]json.RawMessage, k string) bool {
	raw, ok := keys[k]
	return ok && !bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
}

func parseConfig(data []byte) (*Config, error) {
	if err := checkModelType(data); err != nil {
		return nil, err
	}
	var c Config
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, err
	}
	c.GenerationSource = GenerationFromConfig
	if c.GenerationConfig == nil {
		g := DefaultGenerationConfig()
		c.GenerationConfig = &g
		c.GenerationSource = GenerationFromDefaults
	}
	c.normalize()
	return &c, nil
}

// hubID matches a Hugging Face Hub repository id (owner/name), which a user may pass as
// a model as they would to transformers or mlx-lm.
var hubID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$`)

// missingModel explains a model directory that does not exist; for a Hub id, that nothing
// is downloaded here. It is an fs.ErrNotExist.
func missingModel(dir string) error {
	if hubID.MatchString(dir) && !strings.Contains(dir, "..") {
		return notExist(fmt.Sprintf("diffusiongemma: model %s is not a directory here; it looks like a Hugging Face Hub id, and nothing is downloaded here: download it first (hf download %s --local-dir DIR) and pass that directory", dir, dir))
	}
	return notExist("diffusiongemma: model directory " + dir + " does not exist")
}

// notExist is a message that is an fs.ErrNotExist without saying so twice.
type notExist string

func (e notExist) Error() string { return string(e) }
func (e notExist) Unwrap() error { return fs.ErrNotExist }

// LoadConfig reads DIR/config.json and, if present, DIR/generation_config.json, which then
// replaces any generation config embedded in config.json (see the package documentation).
// The result is validated.
func LoadConfig(dir string) (*Config, error) {
	path := filepath.Join(dir, "config.json")
	data, err := os.ReadFile(path)
	if err != nil {
		if _, serr := os.Stat(dir); errors.Is(serr, fs.ErrNotExist) {
			return nil, missingModel(dir)
		}
		return nil, fmt.Errorf("diffusiongemma: read config: %w", err)
	}
	c, err := parseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("diffusiongemma: parse %s: %w", path, err)
	}
	genPath := filepath.Join(dir, "generation_config.json")
	gdata, err := os.ReadFile(genPath)
	switch {
	case err == nil:
		var g GenerationConfig
		if err := json.Unmarshal(gdata, &g); err != nil {
			return nil, fmt.Errorf("diffusiongemma: parse %s: %w", genPath, err)
		}
		c.GenerationConfig = &g
		c.GenerationSource = GenerationFromFile
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("diffusiongemma: read generation config: %w", err)
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	return c, nil
}

// normalize derives what a config may leave implicit: layer_types, RoPE for every layer kind,
// and the rope_type/theta of partially specified RoPE entries. It replaces rather than edits
// the slices, maps and pointers it changes, so a shallow copy can be normalized safely.
func (c *Config) normalize() {
	t := &c.TextConfig
	if len(t.LayerTypes) == 0 && t.NumHiddenLayers > 0 && t.NumHiddenLayers <= maxLayers {
		t.LayerTypes = DefaultLayerTypes(t.NumHiddenLayers)
	}
	rope := make(RopeParametersByLayer, len(t.RopeParameters)+2)
	for k, r := range t.RopeParameters {
		rope[k] = r
	}
	for _, kind := range []LayerType{SlidingAttention, FullAttention} {
		r, ok := rope[kind]
		if !ok {
			rope[kind] = defaultRope(kind)
			continue
		}
		if r.RopeType == "" {
			r.RopeType = RopeDefault
		}
		if r.RopeTheta == 0 {
			r.RopeTheta = defaultRope(kind).RopeTheta
		}
		rope[kind] = r
	}
	t.RopeParameters = rope
	if v := c.VisionConfig; v != nil && v.RopeParameters.RopeType == "" {
		vc := *v
		vc.RopeParameters.RopeType = RopeDefault
		c.VisionConfig = &vc
	}
}

// DefaultLayerTypes is the rule for a config without layer_types: repeat [sliding×5, full],
// truncate to n, and make the last layer full.
func DefaultLayerTypes(n int) []LayerType {
	if n <= 0 {
		return nil
	}
	out := make([]LayerType, n)
	for i := range out {
		if i%6 == 5 {
			out[i] = FullAttention
		} else {
			out[i] = SlidingAttention
		}
	}
	out[n-1] = FullAttention
	return out
}

// MarshalNested returns the config as an indented nested-layout config.json (text fields under
// "text_config", every derived default written out).
func (c *Config) MarshalNested() ([]byte, error) {
	cp := *c
	cp.normalize()
	b, err := json.MarshalIndent(&cp, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("diffusiongemma: marshal config: %w", err)
	}
	return append(b, '\n'), nil
}

// Per-layer geometry (§1.2 "Per-layer geometry").

// LayerType returns the attention kind of layer i.
func (t *TextConfig) LayerType(i int) LayerType { return t.LayerTypes[i] }

// IsFull reports whether layer i is a full-attention layer.
func (t *TextConfig) IsFull(i int) bool { return t.LayerTypes[i] == FullAttention }

// HasVProj reports whether layer i has a v_proj; full layers reuse the raw k projection.
func (t *TextConfig) HasVProj(i int) bool { return !t.IsFull(i) }

// LayerHeadDim returns the head dimension of layer i.
func (t *TextConfig) LayerHeadDim(i int) int {
	if t.IsFull(i) {
		return t.GlobalHeadDim
	}
	return t.HeadDim
}

// LayerKVHeads returns the number of key/value heads of layer i.
func (t *TextConfig) LayerKVHeads(i int) int {
	if t.IsFull(i) {
		return t.NumGlobalKeyValueHeads
	}
	return t.NumKeyValueHeads
}

// Rope returns the RoPE parameters of layer i.
func (t *TextConfig) Rope(i int) RopeParameters { return t.RopeParameters[t.LayerTypes[i]] }

// RopeAngles returns how many of the head's d/2 rotate-half pairs of layer i rotate: all of them
// for default RoPE, floor(partial·d/2) for proportional RoPE (pairs i ≥ RopeAngles keep angle 0).
func (t *TextConfig) RopeAngles(i int) int {
	d := t.LayerHeadDim(i)
	r := t.Rope(i)
	if r.RopeType != RopeProportional {
		return d / 2
	}
	return int(math.Floor(r.Partial() * float64(d) / 2))
}

// RopeInvFreqs returns the d/2 inverse frequencies of layer i: θ^(−2j/d) for rotated pairs
// (divided by factor for proportional RoPE) and 0 for the rest. The exponent's denominator is
// the full head dim even when only part of the head rotates (§3.1).
func (t *TextConfig) RopeInvFreqs(i int) []float64 {
	d := t.LayerHeadDim(i)
	r := t.Rope(i)
	angles := t.RopeAngles(i)
	scale := 1.0
	if r.RopeType == RopeProportional {
		scale = r.ScalingFactor()
	}
	out := make([]float64, d/2)
	for j := 0; j < angles; j++ {
		out[j] = math.Pow(r.RopeTheta, -2*float64(j)/float64(d)) / scale
	}
	return out
}

// EmbedScale is sqrt(hidden_size), the factor applied to token embeddings (§1.3).
func (t *TextConfig) EmbedScale() float64 { return math.Sqrt(float64(t.HiddenSize)) }

// RouterRootScale is hidden_size^-0.5, applied to the router input (§1.3, §3.4).
func (t *TextConfig) RouterRootScale() float64 { return 1 / math.Sqrt(float64(t.HiddenSize)) }

// EOSSet returns the sorted union of every configured EOS id: the top-level eos_token_id, the
// text config's, and the generation config's (§4.6).
func (c *Config) EOSSet() []int {
	var ids []int
	ids = append(ids, c.EOSTokenID...)
	ids = append(ids, c.TextConfig.EOSTokenID...)
	if c.GenerationConfig != nil {
		ids = append(ids, c.GenerationConfig.EOSTokenID...)
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// ValidationError lists every problem found in a config.
type ValidationError struct {
	Problems []string
}

func (e *ValidationError) Error() string {
	return "diffusiongemma: invalid config: " + strings.Join(e.Problems, "; ")
}

type problems []string

func (p *problems) addf(format string, args ...any) { *p = append(*p, fmt.Sprintf(format, args...)) }

// Validate checks the config for everything the model code relies on and reports all problems
// at once as a *ValidationError.
func (c *Config) Validate() error {
	var p problems
	textOK := c.validateText(&p)
	c.validateTop(&p)
	if c.VisionConfig != nil {
		c.VisionConfig.validate(&p)
	}
	if c.GenerationConfig != nil {
		c.GenerationConfig.validate(&p, c.TextConfig.VocabSize)
	}
	if c.Quantization != nil {
		c.validateQuantization(&p, textOK)
	}
	if len(p) > 0 {
		return &ValidationError{Problems: p}
	}
	return nil
}

// validateText reports whether the geometry is sound enough to enumerate tensors.
func (c *Config) validateText(p *problems) bool {
	t := &c.TextConfig
	n := len(*p)
	dims := []struct {
		name string
		v    int
		max  int
	}{
		{"vocab_size", t.VocabSize, maxVocab},
		{"hidden_size", t.HiddenSize, maxDim},
		{"intermediate_size", t.IntermediateSize, maxDim},
		{"moe_intermediate_size", t.MoeIntermediateSize, maxDim},
		{"num_hidden_layers", t.NumHiddenLayers, maxLayers},
		{"num_attention_heads", t.NumAttentionHeads, maxDim},
		{"num_key_value_heads", t.NumKeyValueHeads, maxDim},
		{"num_global_key_value_heads", t.NumGlobalKeyValueHeads, maxDim},
		{"head_dim", t.HeadDim, maxDim},
		{"global_head_dim", t.GlobalHeadDim, maxDim},
		{"sliding_window", t.SlidingWindow, math.MaxInt32},
		{"num_experts", t.NumExperts, maxExperts},
		{"top_k_experts", t.TopKExperts, maxExperts},
	}
	for _, d := range dims {
		switch {
		case d.v <= 0:
			p.addf("text_config.%s must be positive, got %d", d.name, d.v)
		case d.v > d.max:
			p.addf("text_config.%s %d exceeds the sanity limit %d", d.name, d.v, d.max)
		}
	}
	if len(*p) > n {
		return false
	}
	if t.NumAttentionHeads > maxDim/t.GlobalHeadDim || t.NumAttentionHeads > maxDim/t.HeadDim {
		p.addf("text_config.num_attention_heads %d × head dim %d exceeds the sanity limit %d",
			t.NumAttentionHeads, max(t.HeadDim, t.GlobalHeadDim), maxDim)
	}
	if t.NumAttentionHeads%t.NumKeyValueHeads != 0 {
		p.addf("text_config.num_attention_heads %d is not divisible by num_key_value_heads %d",
			t.NumAttentionHeads, t.NumKeyValueHeads)
	}
	if t.NumAttentionHeads%t.NumGlobalKeyValueHeads != 0 {
		p.addf("text_config.num_attention_heads %d is not divisible by num_global_key_value_heads %d",
			t.NumAttentionHeads, t.NumGlobalKeyValueHeads)
	}
	if t.HeadDim%2 != 0 {
		p.addf("text_config.head_dim %d must be even (rotate-half RoPE pairs dims i and i+d/2)", t.HeadDim)
	}
	if t.GlobalHeadDim%2 != 0 {
		p.addf("text_config.global_head_dim %d must be even (rotate-half RoPE pairs dims i and i+d/2)", t.GlobalHeadDim)
	}
	if t.TopKExperts > t.NumExperts {
		p.addf("text_config.top_k_experts %d > num_experts %d", t.TopKExperts, t.NumExperts)
	}
	if len(t.LayerTypes) != t.NumHiddenLayers {
		p.addf("text_config.layer_types has %d entries != num_hidden_layers %d", len(t.LayerTypes), t.NumHiddenLayers)
	}
	for i, lt := range t.LayerTypes {
		if lt != SlidingAttention && lt != FullAttention {
			p.addf("text_config.layer_types[%d] %q is unknown (want %q or %q)", i, lt, SlidingAttention, FullAttention)
		}
	}
	for _, kind := range []LayerType{SlidingAttention, FullAttention} {
		r, ok := t.RopeParameters[kind]
		if !ok {
			p.addf("text_config.rope_parameters.%s is missing", kind)
			continue
		}
		validateRope(p, "text_config.rope_parameters."+string(kind), r)
	}
	if t.HiddenActivation != ActivationGeluTanh {
		p.addf("text_config.hidden_activation %q is not supported (want %q)", t.HiddenActivation, ActivationGeluTanh)
	}
	if !(t.RMSNormEps > 0) {
		p.addf("text_config.rms_norm_eps must be positive, got %g", t.RMSNormEps)
	}
	if t.FinalLogitSoftcapping < 0 || math.IsNaN(t.FinalLogitSoftcapping) {
		p.addf("text_config.final_logit_softcapping must be >= 0 (0 disables it), got %g", t.FinalLogitSoftcapping)
	}
	if t.AttentionBias {
		p.addf("text_config.attention_bias true is not supported (DiffusionGemma has no attention biases)")
	}
	if !t.TieWordEmbeddings {
		p.addf("text_config.tie_word_embeddings false is not supported (the LM head is the embedding table)")
	}
	if t.UseBidirectionalAttention != "" && t.UseBidirectionalAttention != "vision" {
		p.addf("text_config.use_bidirectional_attention %q is not supported (want \"vision\" or null)", t.UseBidirectionalAttention)
	}
	checkID(p, "text_config.pad_token_id", t.PadTokenID, t.VocabSize)
	checkID(p, "text_config.bos_token_id", t.BOSTokenID, t.VocabSize)
	for _, id := range t.EOSTokenID {
		checkID(p, "text_config.eos_token_id", id, t.VocabSize)
	}
	return len(*p) == n
}

func validateRope(p *problems, where string, r RopeParameters) {
	switch r.RopeType {
	case RopeDefault:
		if r.PartialRotaryFactor != nil && *r.PartialRotaryFactor != 1 {
			p.addf("%s.partial_rotary_factor %g needs rope_type %q, not %q", where, *r.PartialRotaryFactor, RopeProportional, r.RopeType)
		}
	case RopeProportional:
		if f := r.Partial(); !(f >= 0 && f <= 1) {
			p.addf("%s.partial_rotary_factor %g must be in [0, 1]", where, f)
		}
		if f := r.ScalingFactor(); !(f > 0) {
			p.addf("%s.factor must be positive, got %g", where, f)
		}
	default:
		p.addf("%s.rope_type %q is unknown (want %q or %q)", where, r.RopeType, RopeDefault, RopeProportional)
	}
	if !(r.RopeTheta > 0) {
		p.addf("%s.rope_theta must be positive, got %g", where, r.RopeTheta)
	}
}

func checkID(p *problems, name string, id, vocab int) {
	if id < 0 || id >= vocab {
		p.addf("%s %d is outside the vocabulary [0, %d)", name, id, vocab)
	}
}

func (c *Config) validateTop(p *problems) {
	vocab := c.TextConfig.VocabSize
	if c.CanvasLength <= 0 {
		p.addf("canvas_length must be positive, got %d", c.CanvasLength)
	}
	if vocab <= 0 {
		return // already reported; id ranges would be noise
	}
	// Image token ids matter only with a vision tower: a text-only config may omit them and
	// keep the real checkpoint's defaults, which lie outside a small vocabulary.
	if c.VisionConfig != nil {
		checkID(p, "boi_token_id", c.BOITokenID, vocab)
		checkID(p, "eoi_token_id", c.EOITokenID, vocab)
		checkID(p, "image_token_id", c.ImageTokenID, vocab)
	}
	if c.VideoTokenID != nil {
		checkID(p, "video_token_id", *c.VideoTokenID, vocab)
	}
	for _, id := range c.EOSTokenID {
		checkID(p, "eos_token_id", id, vocab)
	}
}

func (v *VisionConfig) validate(p *problems) {
	dims := []struct {
		name string
		v    int
	}{
		{"hidden_size", v.HiddenSize},
		{"intermediate_size", v.IntermediateSize},
		{"num_hidden_layers", v.NumHiddenLayers},
		{"num_attention_heads", v.NumAttentionHeads},
		{"num_key_value_heads", v.NumKeyValueHeads},
		{"head_dim", v.HeadDim},
		{"patch_size", v.PatchSize},
		{"pooling_kernel_size", v.PoolingKernelSize},
		{"position_embedding_size", v.PositionEmbeddingSize},
	}
	bad := false
	for _, d := range dims {
		switch {
		case d.v <= 0:
			p.addf("vision_config.%s must be positive, got %d", d.name, d.v)
			bad = true
		case d.v > maxDim:
			p.addf("vision_config.%s %d exceeds the sanity limit %d", d.name, d.v, maxDim)
			bad = true
		}
	}
	if bad {
		return
	}
	if v.HeadDim%4 != 0 {
		p.addf("vision_config.head_dim %d must be a multiple of 4 (2-D RoPE rotates two halves)", v.HeadDim)
	}
	if v.NumAttentionHeads%v.NumKeyValueHeads != 0 {
		p.addf("vision_config.num_attention_heads %d is not divisible by num_key_value_heads %d", v.NumAttentionHeads, v.NumKeyValueHeads)
	}
	if !(v.RMSNormEps > 0) {
		p.addf("vision_config.rms_norm_eps must be positive, got %g", v.RMSNormEps)
	}
	if rt := v.RopeParameters.RopeType; rt != RopeDefault && rt != RopeAxial {
		p.addf("vision_config.rope_parameters.rope_type %q is unknown (want %q or %q)", rt, RopeDefault, RopeAxial)
	}
	if !(v.RopeParameters.RopeTheta > 0) {
		p.addf("vision_config.rope_parameters.rope_theta must be positive, got %g", v.RopeParameters.RopeTheta)
	}
}

func (g *GenerationConfig) validate(p *problems, vocab int) {
	if g.MaxDenoisingSteps <= 0 {
		p.addf("generation_config.max_denoising_steps must be positive, got %d", g.MaxDenoisingSteps)
	}
	if g.MaxNewTokens <= 0 {
		p.addf("generation_config.max_new_tokens must be positive, got %d", g.MaxNewTokens)
	}
	// Logits are divided by the temperature, so both ends must be positive.
	if tMin, tMax := g.TemperatureRange(); !(tMin > 0) || !(tMax >= tMin) {
		p.addf("generation_config: need 0 < t_min <= t_max, got t_min %g, t_max %g", tMin, tMax)
	}
	if s := g.SamplerConfig; s != nil {
		if s.ClsName != EntropyBoundSamplerCls {
			p.addf("generation_config.sampler_config._cls_name %q is unknown (want %q)", s.ClsName, EntropyBoundSamplerCls)
		}
		if !(s.EntropyBound >= 0) {
			p.addf("generation_config.sampler_config.entropy_bound must be >= 0, got %g", s.EntropyBound)
		}
	}
	if r, on := g.Stop(); on {
		if r.StabilityThreshold < 0 {
			p.addf("generation_config.stability_threshold must be >= 0, got %d", r.StabilityThreshold)
		}
		if !(r.ConfidenceThreshold >= 0) {
			p.addf("generation_config.confidence_threshold must be >= 0, got %g", r.ConfidenceThreshold)
		}
	}
	if vocab <= 0 {
		return
	}
	checkID(p, "generation_config.pad_token_id", g.PadTokenID, vocab)
	for _, id := range g.EOSTokenID {
		checkID(p, "generation_config.eos_token_id", id, vocab)
	}
}

// validBits and validGroupSize are the quantization parameters the engines support
// (product.md §2).
func validBits(b int) bool {
	switch b {
	case 2, 3, 4, 5, 6, 8:
		return true
	}
	return false
}

func validGroupSize(g int) bool { return g == 32 || g == 64 || g == 128 }

func (c *Config) validateQuantization(p *problems, geometryOK bool) {
	q := c.Quantization
	checkParams := func(where string, bits, group int, mode string) bool {
		ok := true
		if !validBits(bits) {
			p.addf("%s bits %d not in {2,3,4,5,6,8}", where, bits)
			ok = false
		}
		if !validGroupSize(group) {
			p.addf("%s group_size %d not in {32,64,128}", where, group)
			ok = false
		}
		if mode != QuantModeAffine {
			p.addf("%s mode %q is not supported (want %q)", where, mode, QuantModeAffine)
			ok = false
		}
		return ok
	}
	ok := checkParams("quantization", q.Bits, q.GroupSize, q.Mode)
	names := make([]string, 0, len(q.Modules))
	for k := range q.Modules {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if bits, group, quantized := q.For(k); quantized {
			ok = checkParams("quantization."+k, bits, group, q.mode(k)) && ok
		}
	}
	if !ok || !geometryOK {
		return
	}
	// One problem per (input size, group size), not one per module: a bad hidden_size would
	// otherwise be reported for every projection of every layer.
	type key struct{ in, group, bits int }
	var order []key
	first := map[key]string{}
	count := map[key]int{}
	for _, ts := range ExpectedTensors(c) {
		if !ts.Quantizable {
			continue
		}
		bits, group, quantized := q.For(ts.Module)
		in := ts.Shape[len(ts.Shape)-1]
		if !quantized || (in%group == 0 && in*bits%32 == 0) {
			continue
		}
		k := key{in, group, bits}
		if _, seen := first[k]; !seen {
			first[k] = ts.Module
			order = append(order, k)
		}
		count[k]++
	}
	dimNames := inputDimNames(&c.TextConfig)
	for _, k := range order {
		where := first[k]
		if n := count[k] - 1; n > 0 {
			where = fmt.Sprintf("%s and %d more", where, n)
		}
		if k.in%k.group != 0 {
			p.addf("text_config.%s %d is not divisible by quantization group_size %d (%s)",
				dimNames[k.in], k.in, k.group, where)
		} else {
			p.addf("text_config.%s %d × %d bits is not a multiple of 32 (%s)", dimNames[k.in], k.in, k.bits, where)
		}
	}
}

// inputDimNames names the config field each linear input size comes from, for error messages.
// When two fields share a value the first listed wins; the message stays true either way.
func inputDimNames(t *TextConfig) map[int]string {
	names := map[int]string{}
	add := func(v int, name string) {
		if _, ok := names[v]; !ok {
			names[v] = name
		}
	}
	add(t.HiddenSize, "hidden_size")
	add(t.IntermediateSize, "intermediate_size")
	add(t.MoeIntermediateSize, "moe_intermediate_size")
	add(t.NumAttentionHeads*t.HeadDim, "num_attention_heads×head_dim")
	add(t.NumAttentionHeads*t.GlobalHeadDim, "num_attention_heads×global_head_dim")
	return names
}
