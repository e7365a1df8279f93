package diffusiongemma_test

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	dg "github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
)

// TestWriteSyntheticShards: the streamed checkpoint has one shard per layer plus one,
// loads through the sharded index as the geometry it was drawn for (with the mixed
// policy's per-module bits recorded in config.json), runs a finite forward pass, its
// dequantized weights lie within ±1.1·√(3/in), and its bytes depend on the seed only
// (not on GOMAXPROCS). An unquantized policy is refused.
func TestWriteSyntheticShards(t *testing.T) {
	write := func(dir string, procs int) dg.ShardStats {
		t.Helper()
		prev := runtime.GOMAXPROCS(procs)
		defer runtime.GOMAXPROCS(prev)
		cfg := preset(t, dg.PresetTiny)
		st, err := dg.WriteSyntheticShards(dir, cfg, 7, dg.BitsMixed, nil)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	dir, again := t.TempDir(), t.TempDir()
	st := write(dir, 1)
	write(again, 3)
	cfg := preset(t, dg.PresetTiny)
	if st.Shards != cfg.TextConfig.NumHiddenLayers+1 {
		t.Errorf("%d shards, want %d", st.Shards, cfg.TextConfig.NumHiddenLayers+1)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	if len(files) != st.Shards {
		t.Fatalf("%d shard files, stats say %d", len(files), st.Shards)
	}
	for _, f := range files {
		a, _ := os.ReadFile(f)
		b, _ := os.ReadFile(filepath.Join(again, filepath.Base(f)))
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs between GOMAXPROCS 1 and 3", filepath.Base(f))
		}
	}
	e := mxtest.Go(t)
	m, err := dg.Load(e, dir, dg.LoadOptions{})
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	if q := m.Config.Quantization; q == nil || q.Bits != 4 || len(q.Modules) == 0 {
		t.Fatalf("quantization %+v, want 4-bit default with 8-bit modules", q)
	}
	l := m.Layers[0]
	q, ok := l.Q.(*dg.Quantized)
	if !ok || q.Bits != 8 {
		t.Fatalf("layer 0 q_proj %T, want 8-bit (mixed policy)", l.Q)
	}
	in, _ := q.Dims()
	bound := 1.1*math.Sqrt(3/float64(in)) + 1e-2
	for _, v := range q.Dequantized().Float32s() {
		if math.Abs(float64(v)) > bound {
			t.Fatalf("q_proj weight %v outside ±%.3f", v, bound)
		}
	}
	logits := m.Forward(mx.FromInt32(e, []int32{1, 2, 3}, 1, 3), mx.FromInt32(e, []int32{4, 5}, 1, 2))
	for _, v := range logits.Float32s() {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			t.Fatal("non-finite logits")
		}
	}
	if _, err := dg.WriteSyntheticShards(t.TempDir(), preset(t, dg.PresetTiny), 1, dg.BitsNone, nil); err == nil || !strings.Contains(err.Error(), "quantized") {
		t.Errorf("bits 0: error %v, want one saying the checkpoint is quantized", err)
	}
}
