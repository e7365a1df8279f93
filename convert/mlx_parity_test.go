//go:build mlx

package convert_test

import (
	"bytes"
	"context"
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
)

func mlxEngine(t *testing.T) mx.Engine {
	t.Helper()
	e, err := mx.Open("mlx")
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestQuantizeMatchesMLX: on every quantizable tensor of the small preset, stored as
// float32 and as bfloat16, for bits 4 and 8 and group sizes 32, 64 and 128, the go
// engine's codes, scales and biases are byte-identical to MLX's own quantize (mlx-c's
// mlx_quantize, affine mode, on MLX's CPU stream, where the mlx engine quantizes on
// every device).
func TestQuantizeMatchesMLX(t *testing.T) {
	g, m := mxtest.Go(t), mlxEngine(t)
	cfg, weights := dgtest.Spec{Preset: dg.PresetSmall, Seed: 21, Bits: dg.BitsNone}.Weights(t, g)
	compared := 0
	for _, ts := range dg.ExpectedTensors(cfg) {
		if !ts.Quantizable {
			continue
		}
		for _, dt := range []mx.DType{mx.Float32, mx.BFloat16} {
			raw := mx.Bytes(mx.AsType(weights[ts.Name], dt))
			for _, bits := range []int{4, 8} {
				for _, group := range []int{32, 64, 128} {
					if ts.Shape[len(ts.Shape)-1]%group != 0 {
						continue
					}
					gw, gs, gb := mx.Quantize(mx.FromBytes(g, raw, ts.Shape, dt), group, bits)
					mw, ms, mb := mx.Quantize(mx.FromBytes(m, raw, ts.Shape, dt), group, bits)
					for i, pair := range [][2]*mx.Array{{gw, mw}, {gs, ms}, {gb, mb}} {
						if !slices.Equal(pair[0].Shape(), pair[1].Shape()) || pair[0].DType() != pair[1].DType() || !bytes.Equal(mx.Bytes(pair[0]), mx.Bytes(pair[1])) {
							t.Errorf("%s (%s) bits %d group %d: piece %d differs from MLX's", ts.Module, dt, bits, group, i)
						}
					}
					compared++
				}
			}
		}
	}
	// 63 quantizable tensors of the small preset; every input size is a multiple of 128.
	if compared != 63*2*2*3 {
		t.Errorf("compared %d (tensor, dtype, bits, group) cases, want %d", compared, 63*2*2*3)
	}
}

// TestConvertMatchesMLX: a bf16 checkpoint in the release layout converted at 4 bits
// on the go engine and on the mlx engine gives byte-identical files, and its logits (the
// tensor probe forward writes) equal, bit for bit, those of the same model quantized
// tensor by tensor by MLX.
func TestConvertMatchesMLX(t *testing.T) {
	g, m := mxtest.Go(t), mlxEngine(t)
	dir := t.TempDir()
	in := filepath.Join(dir, "bf16")
	cfg := writeBF16(t, in, dg.PresetSmall, 22)
	r := dg.QuantRecipe{Bits: "4", GroupSize: 64}
	outs := map[string]string{"go": filepath.Join(dir, "go"), "mlx": filepath.Join(dir, "mlx")}
	for name, e := range map[string]mx.Engine{"go": g, "mlx": m} {
		if _, err := convert.Run(context.Background(), convert.Options{Model: in, Out: outs[name], Recipe: r, Engine: e}); err != nil {
			t.Fatal(err)
		}
	}
	entries, err := os.ReadDir(outs["go"])
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		a, _ := os.ReadFile(filepath.Join(outs["go"], e.Name()))
		b, err := os.ReadFile(filepath.Join(outs["mlx"], e.Name()))
		if err != nil || !bytes.Equal(a, b) {
			t.Errorf("%s differs between the go and mlx engines (err %v)", e.Name(), err)
		}
	}

	// The same model quantized by MLX, whole tensor by whole tensor.
	src, err := mx.OpenCheckpoint(m, in)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	byMLX := map[string]*mx.Array{}
	for _, ts := range dg.ExpectedTensors(cfg) {
		stored := ts.Name
		if strings.Contains(stored, ".experts.") {
			stored = strings.TrimSuffix(stored, ".weight")
		}
		a, err := src.Load(stored)
		if err != nil {
			t.Fatal(err)
		}
		if !ts.Quantizable {
			byMLX[ts.Name] = mx.FromBytes(g, mx.Bytes(a), ts.Shape, a.DType())
			continue
		}
		w, s, b := mx.Quantize(a, 64, 4)
		for suffix, q := range map[string]*mx.Array{".weight": w, ".scales": s, ".biases": b} {
			byMLX[ts.Module+suffix] = mx.FromBytes(g, mx.Bytes(q), q.Shape(), q.DType())
		}
	}
	qcfg, err := dg.LoadConfig(outs["go"])
	if err != nil {
		t.Fatal(err)
	}
	ref, err := dg.Build(g, qcfg, byMLX, dg.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	converted, err := dg.Load(g, outs["go"], dg.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	prompt, canvas := mx.FromInt32(g, []int32{2, 105, 40, 41, 42}, 1, 5), mx.FromInt32(g, []int32{5, 9, 11, 12}, 1, 4)
	a, b := converted.Forward(prompt, canvas).Float32s(), ref.Forward(prompt, canvas).Float32s()
	if !slices.Equal(a, b) {
		t.Error("logits of the converted checkpoint differ from those of the model quantized by MLX")
	}
}

// TestConvertSavePretrainedMatchesMLX: checkpoints transformers' save_pretrained wrote,
// converted by dgtune at 4 and 8 bits (group 32), hold exactly MLX's quantization of their
// tensors (mlx_quantize after the cast to the storage dtype), and the converted model's
// logits equal, bit for bit, those of the same model quantized tensor by tensor by MLX.
func TestConvertSavePretrainedMatchesMLX(t *testing.T) {
	convertSavePretrained(t, mxtest.Go(t), mlxEngine(t))
}
