package diffusiongemma

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

// The geometry product.md §3 lists for each synthetic preset.
func TestPresetGeometry(t *testing.T) {
	type geo struct {
		vocab, hidden, layers, heads, kv, globalKV, hd, globalHD, inter, experts, topK, moe, window, canvas int
		layerTypes                                                                                          string
	}
	tests := []struct {
		name string
		want geo
	}{
		{PresetTiny, geo{512, 64, 2, 4, 2, 1, 16, 32, 128, 4, 2, 32, 8, 16, "SF"}},
		{PresetSmall, geo{4096, 256, 6, 4, 2, 1, 64, 128, 512, 16, 4, 128, 64, 128, "SSSSSF"}},
		{PresetBench, geo{8192, 512, 6, 8, 4, 1, 64, 128, 1024, 32, 4, 256, 128, 256, "SSSSSF"}},
		{PresetReal, geo{262144, 2816, 30, 16, 8, 2, 256, 512, 2112, 128, 8, 704, 1024, 256, realPattern}},
	}
	for _, tt := range tests {
		c, err := Preset(tt.name)
		if err != nil {
			t.Fatal(err)
		}
		x := &c.TextConfig
		got := geo{x.VocabSize, x.HiddenSize, x.NumHiddenLayers, x.NumAttentionHeads, x.NumKeyValueHeads,
			x.NumGlobalKeyValueHeads, x.HeadDim, x.GlobalHeadDim, x.IntermediateSize, x.NumExperts, x.TopKExperts,
			x.MoeIntermediateSize, x.SlidingWindow, c.CanvasLength, pattern(x.LayerTypes)}
		if got != tt.want {
			t.Errorf("Preset(%q) geometry\n got %+v\nwant %+v", tt.name, got, tt.want)
		}
		if tt.name == PresetReal {
			continue
		}
		// Image markers at the top of the vocabulary: boi = V−3, image = V−2, eoi = V−1.
		v := tt.want.vocab
		if c.BOITokenID != v-3 || c.ImageTokenID != v-2 || c.EOITokenID != v-1 {
			t.Errorf("Preset(%q) boi/image/eoi = %d/%d/%d, want %d/%d/%d", tt.name,
				c.BOITokenID, c.ImageTokenID, c.EOITokenID, v-3, v-2, v-1)
		}
		if c.VisionConfig != nil {
			t.Errorf("Preset(%q) has a vision tower", tt.name)
		}
	}
}

// Every preset shares the §1.2 non-geometry fields and the full §1.5 generation config.
func TestPresetCommonFields(t *testing.T) {
	for _, name := range PresetNames() {
		c, err := Preset(name)
		if err != nil {
			t.Fatal(err)
		}
		x := &c.TextConfig
		if x.HiddenActivation != "gelu_pytorch_tanh" || x.RMSNormEps != 1e-6 || x.FinalLogitSoftcapping != 30 ||
			!x.TieWordEmbeddings || x.AttentionBias || x.UseBidirectionalAttention != "vision" ||
			x.PadTokenID != 0 || x.BOSTokenID != 2 || !slices.Equal(x.EOSTokenID, []int{1}) {
			t.Errorf("Preset(%q) text fields: %+v", name, x)
		}
		sl, fu := x.RopeParameters[SlidingAttention], x.RopeParameters[FullAttention]
		if sl.RopeType != "default" || sl.RopeTheta != 10000 || fu.RopeType != "proportional" || fu.RopeTheta != 1e6 || fu.Partial() != 0.25 {
			t.Errorf("Preset(%q) rope: sliding %+v full %+v", name, sl, fu)
		}
		g := c.GenerationConfig
		tMin, tMax := g.TemperatureRange()
		stop, on := g.Stop()
		if g.MaxDenoisingSteps != 48 || g.MaxNewTokens != 256 || tMin != 0.4 || tMax != 0.8 ||
			g.SamplerConfig == nil || g.SamplerConfig.ClsName != EntropyBoundSamplerCls || g.EntropyBound() != 0.1 ||
			!on || stop != (StopRule{0.005, 1}) || g.PadTokenID != 0 {
			t.Errorf("Preset(%q) generation config %+v (stop %+v %v)", name, g, stop, on)
		}
		if got := c.EOSSet(); !slices.Equal(got, []int{1, 50, 106}) {
			t.Errorf("Preset(%q) EOSSet() = %v, want [1 50 106]", name, got)
		}
		if c.Quantization != nil {
			t.Errorf("Preset(%q) quantization %+v, want unset", name, c.Quantization)
		}
	}
}

// real is the nested fixture, minus the quantization entry the fixture's MLX conversion added.
func TestPresetRealMatchesFixture(t *testing.T) {
	p, err := Preset(PresetReal)
	if err != nil {
		t.Fatal(err)
	}
	f := loadNested(t)
	if f.Quantization == nil || f.Quantization.Bits != 4 {
		t.Fatalf("fixture quantization %+v", f.Quantization)
	}
	f.Quantization = nil
	if !reflect.DeepEqual(p, f) {
		t.Errorf("Preset(real)\n%+v\nwant (fixture)\n%+v", p, f)
	}
}

func TestPresetUnknown(t *testing.T) {
	for _, name := range []string{"", "huge", "Tiny"} {
		c, err := Preset(name)
		if err == nil || !strings.Contains(err.Error(), "unknown preset") || !strings.Contains(err.Error(), "tiny, small, bench, real") {
			t.Errorf("Preset(%q) = %v, %v; want an unknown-preset error listing the names", name, c, err)
		}
	}
}

// Presets are built fresh on every call: editing one must not leak into the next.
func TestPresetFreshCopies(t *testing.T) {
	a, err := Preset(PresetTiny)
	if err != nil {
		t.Fatal(err)
	}
	a.TextConfig.LayerTypes[0] = FullAttention
	*a.TextConfig.RopeParameters[FullAttention].PartialRotaryFactor = 0.9
	a.TextConfig.RopeParameters[SlidingAttention] = RopeParameters{RopeType: "proportional", RopeTheta: 1}
	*a.GenerationConfig.ConfidenceThreshold = 0.9
	a.EOSTokenID[0] = 7
	b, err := Preset(PresetTiny)
	if err != nil {
		t.Fatal(err)
	}
	if pattern(b.TextConfig.LayerTypes) != "SF" || b.TextConfig.RopeParameters[FullAttention].Partial() != 0.25 ||
		b.TextConfig.RopeParameters[SlidingAttention].RopeType != "default" ||
		*b.GenerationConfig.ConfidenceThreshold != 0.005 || b.EOSTokenID[0] != 1 {
		t.Errorf("Preset(tiny) saw an earlier caller's edits: %+v", b)
	}
}
