package diffusiongemma

import (
	"fmt"
	"strings"
)

// Preset names (product.md §3, `probe mkmodel --preset`).
const (
	PresetTiny  = "tiny"
	PresetSmall = "small"
	PresetBench = "bench"
	PresetReal  = "real"
)

// PresetNames lists the presets Preset knows, smallest first.
func PresetNames() []string { return []string{PresetTiny, PresetSmall, PresetBench, PresetReal} }

// presetGeometry is the part of a preset product.md §3 spells out; everything else is §1.2.
type presetGeometry struct {
	vocab, hidden, layers          int
	heads, kvHeads, globalKVHeads  int
	headDim, globalHeadDim         int
	intermediate                   int
	experts, topK, moeIntermediate int
	slidingWindow, canvasLength    int
}

func presetGeometries(name string) (presetGeometry, bool) {
	switch name {
	case PresetTiny:
		return presetGeometry{
			vocab: 512, hidden: 64, layers: 2,
			heads: 4, kvHeads: 2, globalKVHeads: 1,
			headDim: 16, globalHeadDim: 32,
			intermediate: 128,
			experts:      4, topK: 2, moeIntermediate: 32,
			slidingWindow: 8, canvasLength: 16,
		}, true
	case PresetSmall:
		return presetGeometry{
			vocab: 4096, hidden: 256, layers: 6,
			heads: 4, kvHeads: 2, globalKVHeads: 1,
			headDim: 64, globalHeadDim: 128,
			intermediate: 512,
			experts:      16, topK: 4, moeIntermediate: 128,
			slidingWindow: 64, canvasLength: 128,
		}, true
	case PresetBench:
		return presetGeometry{
			vocab: 8192, hidden: 512, layers: 6,
			heads: 8, kvHeads: 4, globalKVHeads: 1,
			headDim: 64, globalHeadDim: 128,
			intermediate: 1024,
			experts:      32, topK: 4, moeIntermediate: 256,
			slidingWindow: 128, canvasLength: 256,
		}, true
	}
	return presetGeometry{}, false
}

// presetGenerationConfig is the full §1.5 table, stop rule included.
func presetGenerationConfig() *GenerationConfig {
	g := DefaultGenerationConfig()
	g.SamplerConfig = &SamplerConfig{ClsName: EntropyBoundSamplerCls, EntropyBound: defaultEntropyBound}
	conf, stab := defaultConfidenceThreshold, defaultStabilityThreshold
	g.ConfidenceThreshold = &conf
	g.StabilityThreshold = &stab
	g.EOSTokenID = TokenIDs{1, 106, 50}
	g.PadTokenID = 0
	return &g
}

// Preset returns a fresh copy of a named configuration. tiny, small and bench are synthetic
// geometries for tests and benchmarks (no vision tower, f32 weights, the three image-marker
// tokens at the top of their small vocabularies); real is the 26B-A4B checkpoint's config
// (the nested fixture), for shape, memory and parameter-count checks only. Quantization is left
// unset: whoever writes a checkpoint chooses it.
func Preset(name string) (*Config, error) {
	c := defaultConfig()
	c.EOSTokenID = TokenIDs{1, 106, 50}
	c.GenerationConfig = presetGenerationConfig()
	c.GenerationSource = GenerationFromConfig
	c.Layout = LayoutNested
	if name == PresetReal {
		v := DefaultVisionConfig()
		c.VisionConfig = &v
		c.VisionSoftTokensPerImage = 280
	} else {
		g, ok := presetGeometries(name)
		if !ok {
			return nil, fmt.Errorf("diffusiongemma: unknown preset %q (want one of %s)", name, strings.Join(PresetNames(), ", "))
		}
		t := &c.TextConfig
		t.VocabSize = g.vocab
		t.HiddenSize = g.hidden
		t.NumHiddenLayers = g.layers
		t.NumAttentionHeads = g.heads
		t.NumKeyValueHeads = g.kvHeads
		t.NumGlobalKeyValueHeads = g.globalKVHeads
		t.HeadDim = g.headDim
		t.GlobalHeadDim = g.globalHeadDim
		t.IntermediateSize = g.intermediate
		t.NumExperts = g.experts
		t.TopKExperts = g.topK
		t.MoeIntermediateSize = g.moeIntermediate
		t.SlidingWindow = g.slidingWindow
		// Synthetic checkpoints are written in f32 (`probe mkmodel --bits 0`).
		t.Dtype = "float32"
		c.CanvasLength = g.canvasLength
		c.BOITokenID = g.vocab - 3
		c.ImageTokenID = g.vocab - 2
		c.EOITokenID = g.vocab - 1
	}
	c.normalize()
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("diffusiongemma: preset %q: %w", name, err)
	}
	return &c, nil
}
