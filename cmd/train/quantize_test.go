package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/dgtune/dgtune/convert"
	dg "github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/model/diffusiongemma/dgtest"
	"github.com/dgtune/dgtune/mx/mxtest"
	"github.com/dgtune/dgtune/train"
)

// TestQuantizeOnLoadEqualsConvert: training over `convert --bits 4` of a bf16 checkpoint
// and over the bf16 checkpoint with quantize_on_load: 4 gives the same adapter, byte for
// byte; a bad quantize_on_load is refused before anything is written.
func TestQuantizeOnLoadEqualsConvert(t *testing.T) {
	f := newFixture(t)
	bf16 := filepath.Join(f.dir, "bf16")
	dgtest.Tiny(4, dg.BitsNone).Release(t, bf16)
	q4 := filepath.Join(f.dir, "q4")
	if _, err := convert.Run(context.Background(), convert.Options{Model: bf16, Out: q4, Recipe: dg.QuantRecipe{Bits: "4", GroupSize: 64}, Engine: mxtest.Go(t)}); err != nil {
		t.Fatal(err)
	}
	conf := f.config(t, "")
	adapters := func(name string, args ...string) []byte {
		t.Helper()
		out := filepath.Join(f.dir, name)
		code, _, stderr := runMain(append([]string{"--config", conf, "--iters", "3", "--adapter-path", out}, args...)...)
		if code != 0 {
			t.Fatalf("train %s: exit %d: %s", name, code, stderr)
		}
		return readBytes(t, filepath.Join(out, train.AdapterFile))
	}
	converted := adapters("a-converted", "--model", q4)
	onLoad := adapters("a-onload", "--model", bf16, "--quantize-on-load", "4")
	if !bytes.Equal(converted, onLoad) {
		t.Error("adapter trained with quantize_on_load: 4 differs from the one trained over convert --bits 4")
	}
	unquantized := adapters("a-bf16", "--model", bf16)
	if bytes.Equal(unquantized, onLoad) {
		t.Error("quantize_on_load: 4 trained the same adapter as the bf16 base: nothing was quantized")
	}

	bad := filepath.Join(f.dir, "a-bad")
	code, _, stderr := runMain("--config", conf, "--model", bf16, "--quantize-on-load", "6", "--adapter-path", bad)
	if code != 1 || stderr != "train: config: quantize_on_load 6: want 0 (off), 4 or 8\n" {
		t.Errorf("quantize_on_load 6: exit %d, stderr %q", code, stderr)
	}
	code, _, stderr = runMain("--config", conf, "--model", q4, "--quantize-on-load", "4", "--adapter-path", bad)
	if code != 1 || stderr != "train: load "+q4+": quantize_on_load: quantization recipe: the checkpoint is already quantized (config.json has a quantization map); drop quantize_on_load\n" {
		t.Errorf("quantize_on_load over a quantized base: exit %d, stderr %q", code, stderr)
	}
	if _, err := os.Stat(bad); !os.IsNotExist(err) {
		t.Errorf("refused runs wrote %s", bad)
	}
}

func readBytes(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
