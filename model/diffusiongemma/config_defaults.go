// The real checkpoint's values (§1.2, §1.4, mlx-vlm's ModelConfig): what every key a
// config.json leaves out is back-filled from, and the layer_types rule.

package diffusiongemma

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
