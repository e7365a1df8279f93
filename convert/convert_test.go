package convert_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dgtune/dgtune/convert"
	dg "github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/model/diffusiongemma/dgtest"
	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
	"github.com/dgtune/dgtune/mx/safetensors"
)

// writeBF16 writes a bf16 checkpoint of preset in the release layout (experts without
// .weight), with a tokenizer and a side file convert must copy.
func writeBF16(t *testing.T, dir, preset string, seed uint64) *dg.Config {
	t.Helper()
	cfg := dgtest.Spec{Preset: preset, Seed: seed}.Release(t, dir)
	if err := os.WriteFile(filepath.Join(dir, "chat_template.jinja"), []byte("{{ messages }}"), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfg
}

func run(t *testing.T, o convert.Options) convert.Result {
	t.Helper()
	if o.Engine == nil {
		o.Engine = mxtest.Go(t)
	}
	res, err := convert.Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestConvertTiny converts the tiny preset at 4 bits, group 64, in 1 MiB shards, and
// checks the layout (shards, index, config, copied files), that every quantized module's
// codes, scales and biases are mx.Quantize's of the input tensor, that the rest is the
// input's bytes, and that the result loads and runs exactly as the input loaded with
// quantize_on_load.
func TestConvertTiny(t *testing.T) {
	e := mxtest.Go(t)
	dir := t.TempDir()
	in, out := filepath.Join(dir, "bf16"), filepath.Join(dir, "q4")
	cfg := writeBF16(t, in, dg.PresetTiny, 11)
	r := dg.QuantRecipe{Bits: "4", GroupSize: 64}
	res := run(t, convert.Options{Model: in, Out: out, Recipe: r, MaxShardBytes: 40000})
	if res.Shards < 2 || res.DType != "bfloat16" || res.Quantized == 0 || len(res.Kept) != cfg.TextConfig.NumHiddenLayers {
		t.Fatalf("result %+v: want several shards, bfloat16, quantized modules, one kept experts.down_proj per layer", res)
	}
	for _, k := range res.Kept {
		if !strings.HasSuffix(k.Module, ".experts.down_proj") || k.Why != "input size 32 is not a multiple of group size 64" {
			t.Errorf("kept %+v", k)
		}
	}
	for _, f := range []string{"tokenizer.json", "generation_config.json", "chat_template.jinja", safetensors.IndexFile, safetensors.ShardName(1, res.Shards)} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("output lacks %s: %v", f, err)
		}
	}
	var conf map[string]json.RawMessage
	if err := json.Unmarshal(mustRead(t, filepath.Join(out, "config.json")), &conf); err != nil {
		t.Fatal(err)
	}
	var qc bytes.Buffer
	if err := json.Compact(&qc, conf["quantization"]); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(conf["quantization"], conf["quantization_config"]) || qc.String() != `{"group_size":64,"bits":4,"mode":"affine","model.decoder.layers.0.experts.down_proj":false,"model.decoder.layers.1.experts.down_proj":false}` {
		t.Errorf("config quantization %s, quantization_config %s", conf["quantization"], conf["quantization_config"])
	}

	src, err := mx.OpenCheckpoint(e, in)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := mx.OpenCheckpoint(e, out)
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	for _, ts := range dg.ExpectedTensors(cfg) {
		stored := ts.Name
		if strings.Contains(stored, ".experts.") {
			stored = strings.TrimSuffix(stored, ".weight")
		}
		a, err := src.Load(stored)
		if err != nil {
			t.Fatal(err)
		}
		if !ts.Quantizable || ts.Shape[len(ts.Shape)-1]%64 != 0 {
			if got := data(t, dst, ts.Name); !bytes.Equal(got, mx.Bytes(a)) {
				t.Errorf("%s: output bytes differ from the input's", ts.Name)
			}
			continue
		}
		w, s, b := mx.Quantize(a, 64, 4)
		for name, want := range map[string]*mx.Array{ts.Module + ".weight": w, ts.Module + ".scales": s, ts.Module + ".biases": b} {
			if got := data(t, dst, name); !bytes.Equal(got, mx.Bytes(want)) {
				t.Errorf("%s differs from mx.Quantize's", name)
			}
		}
	}

	converted, err := dg.Load(e, out, dg.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	onLoad, err := dg.Load(e, in, dg.LoadOptions{Quantize: &r})
	if err != nil {
		t.Fatal(err)
	}
	prompt, canvas := mx.FromInt32(e, []int32{2, 105, 7, 9}, 1, 4), mx.FromInt32(e, []int32{5, 6, 7}, 1, 3)
	a, b := converted.Forward(prompt, canvas).Float32s(), onLoad.Forward(prompt, canvas).Float32s()
	if !slices.Equal(a, b) {
		t.Error("logits of the converted checkpoint differ from quantize_on_load's")
	}
}

func ptr[T any](v T) *T { return &v }

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func data(t *testing.T, ck *mx.Checkpoint, name string) []byte {
	t.Helper()
	b, err := ck.Data(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestConvertDTypeAndOverwrite: --dtype float32 stores the unquantized tensors and the
// scales in float32 (the weights cast before quantizing, as mlx-lm) and says so in the
// config; --overwrite replaces an existing output and leaves no staging directory.
func TestConvertDTypeAndOverwrite(t *testing.T) {
	e := mxtest.Go(t)
	dir := t.TempDir()
	in, out := filepath.Join(dir, "bf16"), filepath.Join(dir, "q8")
	writeBF16(t, in, dg.PresetTiny, 12)
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, "stale.txt"), []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	res := run(t, convert.Options{Model: in, Out: out, Recipe: dg.QuantRecipe{Bits: "8", GroupSize: 32}, DType: ptr(mx.Float32), Overwrite: true})
	if res.DType != "float32" || res.Shards != 1 || len(res.Kept) != 0 {
		t.Fatalf("result %+v", res)
	}
	if _, err := os.Stat(filepath.Join(out, "stale.txt")); !os.IsNotExist(err) {
		t.Error("--overwrite kept a file of the old output")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("directory holds %d entries after convert, want bf16 and q8 only", len(entries))
	}
	ck, err := mx.OpenCheckpoint(e, out)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	for name, want := range map[string]mx.DType{dg.DecoderPrefix + ".norm.weight": mx.Float32, dg.DecoderPrefix + ".embed_tokens.scales": mx.Float32, dg.DecoderPrefix + ".embed_tokens.weight": mx.Uint32} {
		if dt, _, err := ck.Info(name); err != nil || dt != want {
			t.Errorf("%s: dtype %v (err %v), want %v", name, dt, err, want)
		}
	}
	cfg, err := dg.LoadConfig(out)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.TextConfig.Dtype != "float32" || cfg.Quantization.Bits != 8 || cfg.Quantization.GroupSize != 32 {
		t.Errorf("config dtype %q, quantization %+v", cfg.TextConfig.Dtype, cfg.Quantization)
	}
}

// TestConvertCancelled: a cancelled context (SIGINT in the command) stops the conversion
// at the next chunk and leaves neither the output nor the staging directory.
func TestConvertCancelled(t *testing.T) {
	dir := t.TempDir()
	in, out := filepath.Join(dir, "bf16"), filepath.Join(dir, "q4")
	writeBF16(t, in, dg.PresetTiny, 13)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := convert.Run(ctx, convert.Options{Model: in, Out: out, Recipe: dg.QuantRecipe{Bits: "4", GroupSize: 64}, Engine: mxtest.Go(t)})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("cancelled conversion left %d entries beside the input", len(entries)-1)
	}
}
