package diffusiongemma_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/dgtune/dgtune/lora"
	dg "github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
)

// TestEncodeDecodeHiddenMatchesTwoPasses: the one-pass forward over prompt and canvas
// rows gives the two passes' hidden states — bit for bit on a float32 base on the go
// engine, to float32 rounding otherwise — for prompts shorter than, as long as and longer than the
// sliding window (the decoder keeps its last window−1 positions), with and without
// checkpointed layers, and the gradients of every LoRA array agree to float32 summation
// order (a shared weight's rows are summed in one product instead of two). With dropout
// on, or an encoder with its own factors, it runs the two passes. The same holds with the
// fused forward's attention joined into one masked call (join) and split into two.
func TestEncodeDecodeHiddenMatchesTwoPasses(t *testing.T) {
	long := []int32{2, 105, 7, 8, 9, 106, 107, 105, 10, 11, 12, 13, 14}
	canvas := []int32{5, 9, 300, 4, 1, 1, 77}
	mxtest.Engines(t, func(t *testing.T, e mx.Engine) {
		for _, c := range []struct {
			bits     string
			prompt   []int32
			ckpt     bool
			dropout  float64
			separate bool
		}{
			{"0", long[:3], false, 0, false},
			{"4", long[:8], false, 0, false},
			{"0", long, false, 0, false},
			{"4", long, false, 0, false},
			{"4", long, true, 0, false},
			{"0", long, false, 0.3, false},
			{"0", long, false, 0, true},
		} {
			for _, join := range []bool{false, true} {
				name := fmt.Sprintf("bits=%s/prompt=%d/ckpt=%v/dropout=%g/separate=%v/join=%v", c.bits, len(c.prompt), c.ckpt, c.dropout, c.separate, join)
				t.Run(name, func(t *testing.T) {
					cfg := lora.Config{Rank: 4, Scale: 2, Dropout: c.dropout}
					if c.separate {
						cfg.Encoder = lora.EncoderModeSeparate
					}
					m, a := adaptedModelWith(t, e, dg.PresetTiny, c.bits, cfg)
					m.GradCheckpoint = c.ckpt
					dg.SetJoinAttention(m, join)
					a.SetTraining(mx.Key(e, 9)) // dropout draws masks only while training
					if fuse := c.dropout == 0 && !c.separate; m.PassesFuse() != fuse {
						t.Fatalf("PassesFuse() = %v while training, want %v", !fuse, fuse)
					}
					a.SetTraining(nil)
					if !m.PassesFuse() && !c.separate {
						t.Fatal("PassesFuse() = false outside training, want true")
					}
					names := a.Names()
					args := paramArgs(a)
					loss := func(fused bool) func([]*mx.Array) []*mx.Array {
						return func(in []*mx.Array) []*mx.Array {
							p := make(map[string]*mx.Array, len(names))
							for i, n := range names {
								p[n] = in[i]
							}
							if err := a.SetParams(p); err != nil {
								panic(err)
							}
							if c.dropout > 0 {
								a.SetTraining(mx.Key(e, 9)) // the same masks for both
								defer a.SetTraining(nil)
							}
							pr, ca := mx.FromInt32(e, c.prompt, 1, len(c.prompt)), mx.FromInt32(e, canvas, 1, len(canvas))
							var h *mx.Array
							if fused {
								h = m.EncodeDecodeHidden(pr, ca)
							} else {
								cache := m.NewCache()
								m.Encode(pr, cache)
								h = m.DecodeHidden(ca, cache, nil)
							}
							return []*mx.Array{h, mxtest.Project(m.Logits(h), 21)}
						}
					}
					got, want := loss(true)(args), loss(false)(args)
					if !slices.Equal(got[0].Shape(), want[0].Shape()) {
						t.Fatalf("hidden states %v, two passes' %v", got[0].Shape(), want[0].Shape())
					}
					if c.bits == "0" && e.Name() == "go" && !slices.Equal(got[0].Float32s(), want[0].Float32s()) {
						t.Fatal("hidden states differ from the two passes'")
					}
					// A 4-bit expert that gets one or two rows in one layout and more in the
					// other takes the few-row kernels there, which round differently; MLX's
					// products may round a row differently with the number of rows.
					hw := want[0].Float32s()
					big := 0.0
					for _, v := range hw {
						big = max(big, float64(v), -float64(v))
					}
					if ok, k := mxtest.Close(got[0].Float32s(), hw, 1e-5, 1e-5*big); !ok {
						t.Fatalf("hidden state %d = %v, two passes' %v", k, got[0].Float32s()[k], want[0].Float32s()[k])
					}
					lossOnly := func(fused bool) func([]*mx.Array) []*mx.Array {
						f := loss(fused)
						return func(in []*mx.Array) []*mx.Array { return f(in)[1:] }
					}
					_, gg := mx.ValueAndGrad(lossOnly(true))(args)
					_, gw := mx.ValueAndGrad(lossOnly(false))(args)
					nonzero := false
					for i, n := range names {
						g, w := gg[i].Float32s(), gw[i].Float32s()
						// Summation order: relative to the tensor's largest entry (an element
						// that is a difference of larger terms keeps only their absolute error).
						big := 0.0
						for _, v := range w {
							big = max(big, float64(v), -float64(v))
						}
						if ok, k := mxtest.Close(g, w, 1e-5, 1e-5*big); !ok {
							t.Errorf("%s: gradient element %d = %v, want %v", n, k, g[k], w[k])
						}
						for _, v := range w {
							nonzero = nonzero || v != 0
						}
					}
					if !nonzero {
						t.Error("every gradient is zero: the comparison proves nothing")
					}
				})
			}
		}
	})
}

// TestEncodeDecodeHiddenBatch: two examples at once (same lengths) give each example's
// own two-pass hidden states, bit for bit on the go engine's float32 base.
func TestEncodeDecodeHiddenBatch(t *testing.T) {
	e := mxtest.Go(t)
	m, _ := adaptedModelWith(t, e, dg.PresetTiny, "0", lora.Config{Rank: 4, Scale: 2})
	if !m.PassesFuse() {
		t.Fatal("PassesFuse() = false for a shared adapter without dropout")
	}
	prompts := [][]int32{{2, 105, 7, 8, 9, 106, 107, 105, 10, 11, 12}, {2, 105, 30, 31, 32, 106, 107, 105, 40, 41, 42}}
	canvases := [][]int32{{5, 9, 300, 4, 1}, {6, 8, 200, 3, 1}}
	flat := func(rows [][]int32) []int32 { return append(append([]int32(nil), rows[0]...), rows[1]...) }
	got := m.EncodeDecodeHidden(mx.FromInt32(e, flat(prompts), 2, len(prompts[0])), mx.FromInt32(e, flat(canvases), 2, len(canvases[0]))).Float32s()
	per := len(got) / 2
	for b := range 2 {
		c := m.NewCache()
		m.Encode(mx.FromInt32(e, prompts[b], 1, len(prompts[b])), c)
		want := m.DecodeHidden(mx.FromInt32(e, canvases[b], 1, len(canvases[b])), c, nil).Float32s()
		if !slices.Equal(got[b*per:(b+1)*per], want) {
			t.Errorf("example %d of the batch differs from its own two passes", b)
		}
	}
}
