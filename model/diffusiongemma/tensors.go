package diffusiongemma

import (
	"fmt"
	"slices"
	"strings"
)

// Tensor name roots (§2.1). The decoder owns every weight; the encoder reuses the decoder's
// layers and only has its own per-layer scalars.
const (
	DecoderPrefix       = "model.decoder"
	EncoderLayersPrefix = "model.encoder.language_model.layers"
)

// TensorSpec is one text-model tensor a checkpoint must hold.
type TensorSpec struct {
	// Name is the full tensor name, e.g. "model.decoder.layers.0.self_attn.q_proj.weight".
	Name string
	// Shape is the logical, unquantized shape: [out, in] for linears and the embedding,
	// [E, out, in] for experts, [n] for norms and scales.
	Shape []int
	// Quantizable is true for the tensors MLX checkpoints store quantized (linears, experts,
	// the embedding); norms and scalars are always stored as they are.
	Quantizable bool
	// Kind says which module holds the tensor: a linear, the embedding, the experts, or
	// none (a norm, scale or scalar).
	Kind TensorKind
	// Module is the owning module's path: Name without ".weight" for weights (the key of the
	// quantization map), Name without its last component for other parameters.
	Module string
}

// LayerPrefix returns the name prefix of decoder layer i, "model.decoder.layers.i".
func LayerPrefix(i int) string { return fmt.Sprintf("%s.layers.%d", DecoderPrefix, i) }

// ExpectedTensors returns every text-model tensor of §2.2 for cfg, in table order: globals,
// the encoder's layer scalars, then each decoder layer (see tensorTable). cfg must be valid
// (see Validate).
func ExpectedTensors(cfg *Config) []TensorSpec {
	t := &cfg.TextConfig
	var out []TensorSpec
	for r := range textTensors(t, t.NumHiddenLayers) {
		out = append(out, TensorSpec{Name: r.name, Shape: r.def.shape(t, r.layer), Quantizable: r.def.kind.Quantizable(),
			Kind: r.def.kind, Module: r.module})
	}
	return out
}

// QuantizedShapes returns the MLX affine storage shapes (§2.4) of a logical weight
// [..., out, in]: the uint32 codes [..., out, in·bits/32] and the scales (and biases)
// [..., out, in/group].
func QuantizedShapes(logical []int, bits, group int) (weight, scales []int, err error) {
	if len(logical) < 2 {
		return nil, nil, fmt.Errorf("diffusiongemma: quantized shape: need at least [out, in], got %v", logical)
	}
	for _, d := range logical {
		if d <= 0 {
			return nil, nil, fmt.Errorf("diffusiongemma: quantized shape: dimensions must be positive, got %v", logical)
		}
	}
	if !validBits(bits) {
		return nil, nil, fmt.Errorf("diffusiongemma: quantized shape: bits %d not in {2,3,4,5,6,8}", bits)
	}
	if !validGroupSize(group) {
		return nil, nil, fmt.Errorf("diffusiongemma: quantized shape: group_size %d not in {32,64,128}", group)
	}
	in := logical[len(logical)-1]
	if in%group != 0 {
		return nil, nil, fmt.Errorf("diffusiongemma: quantized shape %v: input size %d is not divisible by group_size %d", logical, in, group)
	}
	// in is a multiple of group ≥ 32, so in·bits/32 is exact.
	weight = append(slices.Clone(logical[:len(logical)-1]), in*bits/32)
	scales = append(slices.Clone(logical[:len(logical)-1]), in/group)
	return weight, scales, nil
}

// InferBits recovers a quantized weight's bits and input size from its stored column counts
// (§1.6): in = scalesCols·group, bits = 32·weightCols/in. It is the robust alternative to a
// quantization map whose per-module entries are unknown.
func InferBits(weightCols, scalesCols, group int) (bits, in int, err error) {
	if weightCols <= 0 || scalesCols <= 0 || group <= 0 {
		return 0, 0, fmt.Errorf("diffusiongemma: infer bits: weight cols %d, scales cols %d and group_size %d must be positive",
			weightCols, scalesCols, group)
	}
	in = scalesCols * group
	if 32*weightCols%in != 0 {
		return 0, 0, fmt.Errorf("diffusiongemma: infer bits: 32 × weight cols %d is not a multiple of input size %d (= %d scales cols × group_size %d)",
			weightCols, in, scalesCols, group)
	}
	bits = 32 * weightCols / in
	if !validBits(bits) {
		return 0, 0, fmt.Errorf("diffusiongemma: infer bits: weight cols %d and input size %d give %d bits, not in {2,3,4,5,6,8}",
			weightCols, in, bits)
	}
	return bits, in, nil
}

// CountParams returns the number of text-model parameters (logical, unquantized) and the
// number a single token uses: everything except the experts, plus top_k/num_experts of them.
// cfg must be valid.
func CountParams(cfg *Config) (total, activePerToken int64) {
	t := &cfg.TextConfig
	for _, ts := range ExpectedTensors(cfg) {
		n := int64(1)
		for _, d := range ts.Shape {
			n *= int64(d)
		}
		total += n
		if len(ts.Shape) == 3 { // [E, out, in]: only the experts are 3-D
			activePerToken += n / int64(ts.Shape[0]) * int64(t.TopKExperts)
		} else {
			activePerToken += n
		}
	}
	return total, activePerToken
}

// LoRATarget is one linear that gets a LoRA adapter: A is [In, r], B is [r, Out].
type LoRATarget struct {
	// Module is the full module path, e.g. "model.decoder.layers.0.self_attn.q_proj"; the
	// adapter tensors are Module+".lora_a" and Module+".lora_b".
	Module string
	In     int
	Out    int
	// Layer and Key locate the linear: Module == LayerPrefix(Layer)+"."+Key.
	Layer int
	Key   string
}

// DefaultLoRAKeys are optiq's LoRA keys (§5.3): the attention projections and the dense MLP.
func DefaultLoRAKeys() []string { return loraKeys(loraDefault) }

// LoRAKeys lists every key LoRATargets accepts: the 2-D linears of a layer. The experts are
// 3-D switch linears and are not adaptable here.
func LoRAKeys() []string { return loraKeys(loraOptional) }

// loraKeys lists the table's layer linears adaptable at use or below, in table order.
func loraKeys(use loraUse) []string {
	var keys []string
	for _, d := range tensorTable() {
		if d.scope == scopeLayer && d.lora != loraNone && d.lora <= use {
			keys = append(keys, d.module)
		}
	}
	return keys
}

// LoRATargets lists the linears adapted by LoRA with the given keys (relative to a decoder
// layer; empty means DefaultLoRAKeys) on the last numLayers layers (−1 means all, as mlx-lm).
// Keys absent from a layer are skipped: full-attention layers have no v_proj. Targets come in
// layer order, then in the canonical order of LoRAKeys whatever the order of keys.
func LoRATargets(cfg *Config, keys []string, numLayers int) ([]LoRATarget, error) {
	t := &cfg.TextConfig
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("diffusiongemma: lora targets: %w", err)
	}
	if len(keys) == 0 {
		keys = DefaultLoRAKeys()
	}
	known := LoRAKeys()
	for _, k := range keys {
		if !slices.Contains(known, k) {
			return nil, fmt.Errorf("diffusiongemma: lora key %q is not a linear of a decoder layer (want one of %s)",
				k, strings.Join(known, ", "))
		}
	}
	first := 0
	switch {
	case numLayers == -1:
	case numLayers >= 1 && numLayers <= t.NumHiddenLayers:
		first = t.NumHiddenLayers - numLayers
	default:
		return nil, fmt.Errorf("diffusiongemma: lora num_layers %d must be -1 (all) or in [1, %d] (num_hidden_layers)",
			numLayers, t.NumHiddenLayers)
	}
	var out []LoRATarget
	for r := range textTensors(t, t.NumHiddenLayers) {
		d := r.def
		if d.scope != scopeLayer || d.lora == loraNone || r.layer < first || !slices.Contains(keys, d.module) {
			continue
		}
		shape := d.shape(t, r.layer)
		out = append(out, LoRATarget{Module: r.module, In: shape[1], Out: shape[0], Layer: r.layer, Key: d.module})
	}
	return out, nil
}

// LoRAParamCount is the number of trainable parameters of rank-r adapters on targets:
// Σ r·(in + out).
func LoRAParamCount(targets []LoRATarget, rank int) int64 {
	var n int64
	for _, tg := range targets {
		n += int64(rank) * int64(tg.In+tg.Out)
	}
	return n
}

// EncoderModule returns the name transformers (and so PEFT) gives the encoder pass's copy of
// a decoder-layer module: "model.decoder.layers.N.<key>" →
// "model.encoder.language_model.layers.N.<key>". Here both passes run the same layers; the
// name addresses the encoder pass's own LoRA weights. ok is false for any other path.
func EncoderModule(decoderModule string) (string, bool) {
	rest, ok := strings.CutPrefix(decoderModule, DecoderPrefix+".layers.")
	if !ok {
		return "", false
	}
	return EncoderLayersPrefix + "." + rest, true
}

// DecoderModule is EncoderModule's inverse.
func DecoderModule(encoderModule string) (string, bool) {
	rest, ok := strings.CutPrefix(encoderModule, EncoderLayersPrefix+".")
	if !ok {
		return "", false
	}
	return DecoderPrefix + ".layers." + rest, true
}
