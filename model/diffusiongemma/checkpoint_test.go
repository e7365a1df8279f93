package diffusiongemma_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/dgtune/dgtune/lora"
	dg "github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/model/diffusiongemma/dgtest"
	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
)

// adaptedModel builds a preset with random weights (bits "0" or "4") and a LoRA adapter
// whose B matrices are random too, so that every adapter array gets a gradient.
func adaptedModel(t *testing.T, e mx.Engine, preset, bits string, dropout float64) (*dg.Model, *lora.Adapter) {
	t.Helper()
	return adaptedModelWith(t, e, preset, bits, lora.Config{Rank: 4, Scale: 2, Dropout: dropout})
}

// adaptedModelWith is adaptedModel with the adapter's whole configuration.
func adaptedModelWith(t *testing.T, e mx.Engine, preset, bits string, lc lora.Config) (*dg.Model, *lora.Adapter) {
	t.Helper()
	m := dgtest.Spec{Preset: preset, Seed: 1, Bits: bits}.Model(t, e)
	a, err := lora.Attach(m, lc, 3)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 7))
	p := a.Params()
	for n, arr := range p {
		if strings.HasSuffix(n, ".lora_b") {
			p[n] = mx.MulScalar(mxtest.RandN(e, rng, arr.Shape()...), 0.05)
		}
	}
	if err := a.SetParams(p); err != nil {
		t.Fatal(err)
	}
	return m, a
}

func paramArgs(a *lora.Adapter) []*mx.Array {
	p := a.Params()
	args := make([]*mx.Array, 0, len(p))
	for _, n := range a.Names() {
		args = append(args, p[n])
	}
	return args
}

// adapterLoss returns a function of the adapter's arrays (in a.Names() order):
// Σ logits⊙R over the decoder's logits after encoding the prompt in the given chunks,
// so a chunk after the first reads the cache written by the one before. measure, if
// not nil, runs once the loss is built, while the gradient pass holds its graph.
func adapterLoss(m *dg.Model, a *lora.Adapter, chunks [][]int32, canvas []int32, measure func()) func([]*mx.Array) []*mx.Array {
	e := m.Engine
	names := a.Names()
	return func(args []*mx.Array) []*mx.Array {
		p := make(map[string]*mx.Array, len(names))
		for i, n := range names {
			p[n] = args[i]
		}
		if err := a.SetParams(p); err != nil {
			panic(err)
		}
		c := m.NewCache()
		for _, ch := range chunks {
			m.Encode(mx.FromInt32(e, ch, 1, len(ch)), c)
		}
		loss := mxtest.Project(m.Decode(mx.FromInt32(e, canvas, 1, len(canvas)), c, nil), 21)
		if measure != nil {
			measure()
		}
		return []*mx.Array{loss}
	}
}

// TestGradCheckpointMatchesPlain differentiates the tiny model's loss with respect to
// every LoRA array with checkpointed layers and without: the checkpointed backward
// re-runs each layer on the same inputs, so the gradients agree up to float32
// summation order (1e-5). The prompt is longer than the sliding window (the encoder
// trims its cache), one case encodes it in two chunks (the second chunk's layers read
// the cache as inputs), and one case has dropout on, whose masks a re-run must replay.
func TestGradCheckpointMatchesPlain(t *testing.T) {
	prompt := []int32{2, 105, 7, 8, 9, 106, 107, 105, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21}
	canvas := []int32{5, 9, 300, 4, 1, 1}
	cases := []struct {
		bits    string
		chunks  [][]int32
		dropout float64
	}{
		{"0", [][]int32{prompt}, 0},
		{"4", [][]int32{prompt}, 0},
		{"0", [][]int32{prompt[:9], prompt[9:]}, 0},
		{"4", [][]int32{prompt}, 0.3},
	}
	mxtest.Engines(t, func(t *testing.T, e mx.Engine) {
		for _, c := range cases {
			t.Run(fmt.Sprintf("bits=%s/chunks=%d/dropout=%g", c.bits, len(c.chunks), c.dropout), func(t *testing.T) {
				m, a := adaptedModel(t, e, dg.PresetTiny, c.bits, c.dropout)
				if w := m.Config.TextConfig.SlidingWindow; w >= len(prompt) {
					t.Fatalf("sliding window %d does not trim a %d-token prompt", w, len(prompt))
				}
				args := paramArgs(a)
				grads := func(on bool) ([]*mx.Array, []float32) {
					m.GradCheckpoint = on
					if c.dropout > 0 {
						a.SetTraining(mx.Key(e, 9))
						defer a.SetTraining(nil)
					}
					vals, g := mx.ValueAndGrad(adapterLoss(m, a, c.chunks, canvas, nil))(args)
					// A second forward after the gradient pass: equal only if both modes left
					// every dropout chain at the same place.
					after := adapterLoss(m, a, c.chunks, canvas, nil)(args)[0]
					return g, []float32{float32(vals[0].Item()), float32(after.Item())}
				}
				want, wantV := grads(false)
				got, gotV := grads(true)
				if ok, _ := mxtest.Close(gotV, wantV, 1e-5, 1e-5); !ok {
					t.Errorf("loss and loss after the pass %v, want %v", gotV, wantV)
				}
				for i, n := range a.Names() {
					g, w := got[i].Float32s(), want[i].Float32s()
					if ok, k := mxtest.Close(g, w, 1e-5, 1e-5); !ok {
						t.Errorf("%s: gradient element %d = %v, want %v", n, k, g[k], w[k])
					}
					if i == 0 {
						if ok, _ := mxtest.Close(w, make([]float32, len(w)), 0, 0); ok {
							t.Errorf("%s: gradient is zero, so the comparison proves nothing", n)
						}
					}
				}
			})
		}
	})
}

// TestGradCheckpointSavesMemory measures the go engine's peak live heap over a whole
// gradient pass of the small preset (forward and backward): with checkpointing only each
// layer's inputs stay alive through the forward, and the backward recomputes one layer at
// a time; without it every layer's activations are alive when the backward starts. The
// peak is sampled at every collection, with the collector running after each 2% of heap
// growth, so it is the live heap at the step's high-water mark to within a few percent.
func TestGradCheckpointSavesMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("forward and backward of the small preset")
	}
	e := mxtest.Go(t)
	m, a := adaptedModel(t, e, dg.PresetSmall, "4", 0)
	prompt := make([]int32, 128)
	for i := range prompt {
		prompt[i] = int32(7 + i*31%4000)
	}
	canvas := make([]int32, 64)
	for i := range canvas {
		canvas[i] = int32(11 + i*17%4000)
	}
	args := paramArgs(a)
	measure := func(on bool) (afterForward, peak uint64, samples int) {
		m.GradCheckpoint = on
		base := heapInUse()
		baseLive := liveHeapMetric() // what heapInUse's collections found live
		peak, samples = peakLiveHeap(func() {
			mx.ValueAndGrad(adapterLoss(m, a, [][]int32{prompt}, canvas, func() { afterForward = heapInUse() - base }))(args)
		})
		if samples < 10 {
			t.Fatalf("only %d collections sampled the heap", samples)
		}
		return afterForward, peak - baseLive, samples
	}
	offFwd, off, n1 := measure(false)
	onFwd, on, n2 := measure(true)
	mib := func(n uint64) float64 { return float64(n) / (1 << 20) }
	t.Logf("small (prompt %d, canvas %d, rank 4): live heap after the forward %.1f MiB → %.1f MiB with checkpointing; peak of the step %.1f MiB → %.1f MiB (%.0f%%; %d and %d collections sampled)",
		len(prompt), len(canvas), mib(offFwd), mib(onFwd), mib(off), mib(on), 100*float64(on)/float64(off), n1, n2)
	if onFwd >= offFwd {
		t.Errorf("checkpointing holds %d bytes after the forward, not less than %d without", onFwd, offFwd)
	}
	if 2*on >= off {
		t.Errorf("checkpointing peaks at %d bytes over the step, not under half of %d without", on, off)
	}
}
