package dgtest_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	dg "github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/model/diffusiongemma/dgtest"
	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
)

// sameTensors fails unless a and b hold the same names with the same dtypes, shapes and bytes.
func sameTensors(t *testing.T, what string, a, b map[string]*mx.Array) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%s: %d tensors, want %d", what, len(a), len(b))
	}
	for n, x := range a {
		y, ok := b[n]
		if !ok || x.DType() != y.DType() || !slices.Equal(x.Shape(), y.Shape()) || !bytes.Equal(mx.Bytes(x), mx.Bytes(y)) {
			t.Fatalf("%s: tensor %s differs", what, n)
		}
	}
}

// A Spec draws exactly what Synthesize draws from the same preset, seed and bits (the
// expected numbers of the tests that moved onto dgtest depend on it), and the seed matters.
func TestSpecIsSynthesize(t *testing.T) {
	e := mxtest.Go(t)
	for _, bits := range []string{dg.BitsNone, dg.Bits4} {
		cfg, err := dg.Preset(dg.PresetTiny)
		if err != nil {
			t.Fatal(err)
		}
		want, err := dg.Synthesize(e, cfg, 7, bits)
		if err != nil {
			t.Fatal(err)
		}
		gotCfg, got := dgtest.Tiny(7, bits).Weights(t, e)
		sameTensors(t, "bits "+bits, got, want)
		if (gotCfg.Quantization == nil) != (bits == dg.BitsNone) {
			t.Errorf("bits %s: quantization %+v", bits, gotCfg.Quantization)
		}
		_, other := dgtest.Spec{Seed: 8, Bits: bits}.Weights(t, e)
		name := dg.DecoderPrefix + ".embed_tokens.weight"
		if bytes.Equal(mx.Bytes(other[name]), mx.Bytes(want[name])) {
			t.Errorf("bits %s: seeds 7 and 8 draw the same %s", bits, name)
		}
	}
}

// Edit changes the config before the weights are drawn; Vision adds the tower's tensors.
func TestSpecEdit(t *testing.T) {
	e := mxtest.Go(t)
	deep := func(c *dg.Config) {
		c.TextConfig.NumHiddenLayers = 3
		c.TextConfig.LayerTypes = dg.DefaultLayerTypes(3)
	}
	cfg, w := dgtest.Spec{Seed: 1, Edit: deep}.Weights(t, e)
	if cfg.TextConfig.NumHiddenLayers != 3 || w[dg.DecoderPrefix+".layers.2.input_layernorm.weight"] == nil {
		t.Errorf("edited to 3 layers: config has %d, layer 2 drawn: %v", cfg.TextConfig.NumHiddenLayers, w[dg.DecoderPrefix+".layers.2.input_layernorm.weight"] != nil)
	}
	m := dgtest.Spec{Seed: 1, Edit: dgtest.Vision}.Model(t, e)
	if m.Vision == nil || m.Config.TextConfig.SlidingWindow != 64 {
		t.Errorf("Vision: tower %v, sliding window %d, want a tower and 64", m.Vision != nil, m.Config.TextConfig.SlidingWindow)
	}
}

// Checkpoint writes what Weights draws, with its quantization and a tokenizer of the
// config's vocabulary, and the model loads from it.
func TestCheckpoint(t *testing.T) {
	e := mxtest.Go(t)
	dir := t.TempDir()
	spec := dgtest.Tiny(3, dg.BitsMixed)
	cfg := spec.Checkpoint(t, e, dir)
	_, want := spec.Weights(t, e)
	got, _, err := mx.LoadSafetensors(e, filepath.Join(dir, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	sameTensors(t, "model.safetensors", got, want)
	loaded, err := dg.LoadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	if loaded.Quantization == nil || len(loaded.Quantization.Modules) != len(cfg.Quantization.Modules) {
		t.Errorf("quantization read back %+v, want %+v", loaded.Quantization, cfg.Quantization)
	}
	tj, err := os.ReadFile(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(tj, dgtest.TokenizerJSON(t, cfg)) {
		t.Error("tokenizer.json is not the synthetic tokenizer of the config's vocabulary")
	}
	if n := dgtest.Tokenizer(t, cfg).VocabSize(); n != cfg.TextConfig.VocabSize {
		t.Errorf("tokenizer vocabulary %d, want %d", n, cfg.TextConfig.VocabSize)
	}
	if _, err := dg.Load(e, dir, dg.LoadOptions{}); err != nil {
		t.Fatal(err)
	}
}

// Release writes a bfloat16 checkpoint in the release layout that LoadConfig reads back
// with the spec's geometry.
func TestRelease(t *testing.T) {
	dir := t.TempDir()
	cfg := dgtest.Spec{Preset: dg.PresetTiny, Seed: 2}.Release(t, dir)
	loaded, err := dg.LoadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	if loaded.TextConfig.HiddenSize != cfg.TextConfig.HiddenSize || loaded.Quantization != nil {
		t.Errorf("read back hidden %d, quantization %+v; want %d, none", loaded.TextConfig.HiddenSize, loaded.Quantization, cfg.TextConfig.HiddenSize)
	}
	if _, err := os.Stat(filepath.Join(dir, "tokenizer.json")); err != nil {
		t.Error(err)
	}
}
