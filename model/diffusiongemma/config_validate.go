// Config validation: every problem the model code would trip over, reported at once and
// before anything is sized from the config.

package diffusiongemma

import (
	"fmt"
	"math"
	"sort"
	"strings"
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
