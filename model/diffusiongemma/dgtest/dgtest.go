package dgtest

import (
	"testing"

	dg "github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/tokenizer"
)

// Spec names a synthetic model: the Preset's config, changed by Edit, with weights drawn
// from Seed and quantized by Bits.
type Spec struct {
	// Preset is a diffusiongemma preset name; "" is the tiny preset.
	Preset string
	Seed   uint64
	// Bits is a policy of diffusiongemma.Synthesize (BitsNone, Bits4, Bits8, BitsMixed);
	// "" is unquantized.
	Bits string
	// Edit, if not nil, changes the preset's config before the weights are drawn.
	Edit func(*dg.Config)
}

// Tiny is the tiny preset with weights from seed, quantized by bits.
func Tiny(seed uint64, bits string) Spec {
	return Spec{Preset: dg.PresetTiny, Seed: seed, Bits: bits}
}

// Config returns a fresh copy of the spec's config, edited. Its quantization is unset until
// weights are drawn for it.
func (s Spec) Config(tb testing.TB) *dg.Config {
	tb.Helper()
	name := s.Preset
	if name == "" {
		name = dg.PresetTiny
	}
	cfg, err := dg.Preset(name)
	if err != nil {
		tb.Fatal(err)
	}
	if s.Edit != nil {
		s.Edit(cfg)
	}
	return cfg
}

// Weights draws the spec's weights on e: the checkpoint's tensor map in the MLX layout,
// and the config, which carries the quantization the bits policy chose.
func (s Spec) Weights(tb testing.TB, e mx.Engine) (*dg.Config, map[string]*mx.Array) {
	tb.Helper()
	cfg := s.Config(tb)
	w, err := dg.Synthesize(e, cfg, s.Seed, s.Bits)
	if err != nil {
		tb.Fatal(err)
	}
	return cfg, w
}

// Model builds the spec's model on e.
func (s Spec) Model(tb testing.TB, e mx.Engine) *dg.Model {
	tb.Helper()
	m, _ := s.ModelWeights(tb, e)
	return m
}

// ModelWeights is Model and the tensor map it was built from.
func (s Spec) ModelWeights(tb testing.TB, e mx.Engine) (*dg.Model, map[string]*mx.Array) {
	tb.Helper()
	cfg, w := s.Weights(tb, e)
	return Build(tb, e, cfg, w), w
}

// Checkpoint writes the spec's checkpoint, drawn on e, to dir with the synthetic tokenizer
// (see WriteCheckpoint) and returns its config.
func (s Spec) Checkpoint(tb testing.TB, e mx.Engine, dir string) *dg.Config {
	tb.Helper()
	cfg, w := s.Weights(tb, e)
	WriteCheckpoint(tb, dir, cfg, w)
	return cfg
}

// Release writes the spec's config as an unquantized bfloat16 checkpoint with weights from
// its seed, in the original release's layout and with the synthetic tokenizer: what
// `convert` reads (diffusiongemma.WriteSyntheticBF16Shards, which draws the weights itself,
// layer by layer). Bits must be unquantized. It returns the config.
func (s Spec) Release(tb testing.TB, dir string) *dg.Config {
	tb.Helper()
	if s.Bits != "" && s.Bits != dg.BitsNone {
		tb.Fatalf("dgtest: a release checkpoint is bfloat16, not quantized (Bits %q)", s.Bits)
	}
	cfg := s.Config(tb)
	if _, err := dg.WriteSyntheticBF16Shards(dir, cfg, s.Seed, true, TokenizerJSON(tb, cfg)); err != nil {
		tb.Fatal(err)
	}
	return cfg
}

// Build builds a model from cfg and a tensor map.
func Build(tb testing.TB, e mx.Engine, cfg *dg.Config, w map[string]*mx.Array) *dg.Model {
	tb.Helper()
	m, err := dg.Build(e, cfg, w, dg.LoadOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

// WriteCheckpoint writes cfg, its generation config, the weights and the synthetic
// tokenizer of cfg's vocabulary (TokenizerJSON) to dir.
func WriteCheckpoint(tb testing.TB, dir string, cfg *dg.Config, w map[string]*mx.Array) {
	tb.Helper()
	if err := dg.WriteCheckpoint(dir, cfg, w, TokenizerJSON(tb, cfg)); err != nil {
		tb.Fatal(err)
	}
}

// TokenizerJSON is the byte-level synthetic tokenizer of cfg's vocabulary: trained on no
// corpus, it has no merges, so ordinary text encodes byte by byte; its three top ids are
// the image tokens the presets expect.
func TokenizerJSON(tb testing.TB, cfg *dg.Config) []byte {
	tb.Helper()
	tj, err := tokenizer.NewSynthetic(cfg.TextConfig.VocabSize, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return tj
}

// Tokenizer is TokenizerJSON parsed.
func Tokenizer(tb testing.TB, cfg *dg.Config) *tokenizer.Tokenizer {
	tb.Helper()
	tok, err := tokenizer.Parse(TokenizerJSON(tb, cfg))
	if err != nil {
		tb.Fatal(err)
	}
	return tok
}

// Vision gives cfg the synthetic vision tower (diffusiongemma.WithSyntheticVision) and a
// sliding window of 64, so that both layers of the tiny preset see a whole image (with the
// preset's 8, the canvas's sliding layer sees only the end of the prompt). Use it as a
// Spec's Edit.
func Vision(cfg *dg.Config) {
	dg.WithSyntheticVision(cfg)
	cfg.TextConfig.SlidingWindow = 64
}
