//go:build mlx

package diffusiongemma_test

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/dgtune/dgtune/lora"
	dg "github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/model/diffusiongemma/dgtest"
	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/objective"
	"github.com/dgtune/dgtune/optim"
)

// TestMLXReadsCheckpoints: on the mlx engine, a checkpoint read by MLX itself
// (mlx_load_safetensors) and one copied in through Go (MLXENG_LOAD=go, the path before)
// give the same model: bit-identical logits, and bit-identical adapters after three
// AdamW steps — for a float32 and a 4-bit checkpoint, a sharded bfloat16 release in
// Hugging Face's layout (sanitized) at both compute dtypes, and that release quantized
// on load.
func TestMLXReadsCheckpoints(t *testing.T) {
	e, err := mx.Open("mlx")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := e.(mx.FileLoader); !ok {
		t.Fatal("the mlx engine does not implement mx.FileLoader")
	}
	g, err := mx.Open("go")
	if err != nil {
		t.Fatal(err)
	}
	float32Dir, quantDir, releaseDir := t.TempDir(), t.TempDir(), filepath.Join(t.TempDir(), "release")
	dgtest.Tiny(1, dg.BitsNone).Checkpoint(t, g, float32Dir)
	dgtest.Tiny(2, dg.Bits4).Checkpoint(t, g, quantDir)
	dgtest.Tiny(3, dg.BitsNone).Release(t, releaseDir)
	q4 := &dg.QuantRecipe{Bits: dg.Recipe4, GroupSize: 64}
	for _, tc := range []struct {
		name string
		dir  string
		opt  dg.LoadOptions
	}{
		{"float32", float32Dir, dg.LoadOptions{}},
		{"4-bit", quantDir, dg.LoadOptions{}},
		{"bf16 release, float32 compute", releaseDir, dg.LoadOptions{}},
		{"bf16 release, bfloat16 compute", releaseDir, dg.LoadOptions{DType: mx.BFloat16}},
		{"bf16 release, quantize_on_load 4", releaseDir, dg.LoadOptions{Quantize: q4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if d, _ := mx.Device(e); tc.opt.DType == mx.BFloat16 && d.Kind == "cpu" {
				t.Skip("MLX's CPU backend multiplies gathered experts (GatherMM) in float32 only")
			}
			// A second run through MLX's reader tells whether the device computes the same
			// bits twice; only then can the readers be compared bit for bit.
			var runs [3]loadRun
			for i, via := range []string{"mlx", "go", "mlx"} {
				t.Setenv("MLXENG_LOAD", via)
				m, err := dg.Load(e, tc.dir, tc.opt)
				if err != nil {
					t.Fatalf("MLXENG_LOAD=%s: %v", via, err)
				}
				runs[i] = trainBriefly(t, m)
			}
			if !bytes.Equal(runs[0].logits, runs[2].logits) || !sameAdapters(runs[0], runs[2]) {
				t.Skip("two runs from MLX's reader differ: this device does not repeat its results bit for bit")
			}
			if !bytes.Equal(runs[0].logits, runs[1].logits) {
				t.Errorf("logits differ between MLX's reader and Go's")
			}
			if len(runs[0].adapters) == 0 {
				t.Fatal("no adapter tensors: the test checks nothing")
			}
			for n, b := range runs[1].adapters {
				if !bytes.Equal(runs[0].adapters[n], b) {
					t.Errorf("adapter tensor %s differs after training between MLX's reader and Go's", n)
				}
			}
		})
	}
}

// loadRun is what TestMLXReadsCheckpoints compares: raw bytes of the logits and of each
// adapter tensor after training.
type loadRun struct {
	logits   []byte
	adapters map[string][]byte
}

// trainBriefly returns m's logits on the parity test's prompt and canvas, then the
// adapter after three AdamW steps on one example (a fresh LoRA with fixed seeds).
func trainBriefly(t *testing.T, m *dg.Model) loadRun {
	t.Helper()
	e := m.Engine
	var run loadRun
	mx.Tidy(e, func() []*mx.Array {
		l := m.Forward(mx.FromInt32(e, prompt, 1, len(prompt)), mx.FromInt32(e, canvas, 1, len(canvas)))
		run.logits = mx.Bytes(mx.AsType(l, mx.Float32))
		return nil
	})
	a, err := lora.Attach(m, lora.DefaultConfig(), 5)
	if err != nil {
		t.Fatal(err)
	}
	opt, err := optim.NewAdamW(optim.Params(a.Params()), optim.AdamWDefaults(1e-2))
	if err != nil {
		t.Fatal(err)
	}
	obj := objective.Reference(0.2, 0.8)
	ex := objective.Example{Prompt: prompt, Target: canvas}
	for step := range 3 {
		params := optim.Params(a.Params())
		c := obj.Draw(mx.Key(e, uint64(step)), ex.Target, m.Config.TextConfig.VocabSize)
		_, grads, err := optim.ValueAndGrad(a, params, func() *mx.Array {
			loss, _ := objective.BatchLoss([]objective.Terms{obj.ExampleTerms(m, ex, c)})
			return loss
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := a.SetParams(opt.Update(params, grads)); err != nil {
			t.Fatal(err)
		}
	}
	run.adapters = map[string][]byte{}
	for n, p := range a.Params() {
		run.adapters[n] = mx.Bytes(p)
	}
	return run
}

// TestLoadFreesCastOriginals: loading a float32 checkpoint at bfloat16 compute leaves
// MLX holding the bfloat16 weights only — the float32 tensors read from the file are
// freed once their copies exist, not when Go's collector gets to their handles.
func TestLoadFreesCastOriginals(t *testing.T) {
	e, err := mx.Open("mlx")
	if err != nil {
		t.Fatal(err)
	}
	g, err := mx.Open("go")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	dgtest.Spec{Preset: dg.PresetSmall, Seed: 4}.Checkpoint(t, g, dir)
	before, ok := mx.Memory(e)
	if !ok {
		t.Fatal("the mlx engine reports no memory counters")
	}
	m, err := dg.Load(e, dir, dg.LoadOptions{DType: mx.BFloat16})
	if err != nil {
		t.Fatal(err)
	}
	after, _ := mx.Memory(e)
	var weights int64
	for _, a := range m.WeightArrays() {
		if a.DType() != mx.BFloat16 {
			t.Fatalf("weight of dtype %s at bfloat16 compute", a.DType())
		}
		weights += int64(a.Size() * 2)
	}
	// The float32 originals are twice the weights: kept, the growth would be at least 2×
	// weights. Allow the rope tables and allocator rounding on top of the weights.
	if grew := after.Active - before.Active; grew > weights*11/10 {
		t.Errorf("MLX's active memory grew by %d bytes loading %d bytes of bfloat16 weights", grew, weights)
	}
}

func sameAdapters(a, b loadRun) bool {
	if len(a.adapters) != len(b.adapters) {
		return false
	}
	for n, v := range a.adapters {
		if !bytes.Equal(v, b.adapters[n]) {
			return false
		}
	}
	return true
}
