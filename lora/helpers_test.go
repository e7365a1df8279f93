package lora

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/model/diffusiongemma/dgtest"
	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
)

// tinyModel builds the tiny preset with random weights (bits: "0", "4", "8", "mixed").
func tinyModel(t *testing.T, e mx.Engine, bits string) *diffusiongemma.Model {
	t.Helper()
	return dgtest.Tiny(1, bits).Model(t, e)
}

// tinyCheckpoint is tinyModel and the checkpoint tensor map (MLX layout) it was built from.
func tinyCheckpoint(t *testing.T, e mx.Engine, bits string) (*diffusiongemma.Model, map[string]*mx.Array) {
	t.Helper()
	return dgtest.Tiny(1, bits).ModelWeights(t, e)
}

// logits runs the training forward on a fixed prompt and canvas.
func logits(m *diffusiongemma.Model) []float32 {
	e := m.Engine
	prompt := mx.FromInt32(e, []int32{2, 105, 7, 8, 9, 106, 107, 105, 10, 11, 12}, 1, 11)
	canvas := mx.FromInt32(e, []int32{5, 9, 300, 4, 1, 1}, 1, 6)
	return m.Forward(prompt, canvas).Float32s()
}

// randomizeB gives every B uniform entries in ±amp so the adapter changes the output.
func randomizeB(t *testing.T, a *Adapter, seed uint64, amp float64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 7))
	p := a.Params()
	for _, n := range a.Names() {
		if len(n) > len(suffixB) && n[len(n)-len(suffixB):] == suffixB {
			p[n] = mx.MulScalar(mxtest.RandN(p[n].Engine(), rng, p[n].Shape()...), amp)
		}
	}
	if err := a.SetParams(p); err != nil {
		t.Fatal(err)
	}
}

func maxAbsDiff(a, b []float32) float64 {
	d := 0.0
	for i := range a {
		d = math.Max(d, math.Abs(float64(a[i])-float64(b[i])))
	}
	return d
}

func maxAbs(a []float32) float64 {
	m := 0.0
	for _, v := range a {
		m = math.Max(m, math.Abs(float64(v)))
	}
	return m
}

func assertBitwise(t *testing.T, what string, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s: value %d = %v, want %v bit for bit (max diff %g)", what, i, got[i], want[i], maxAbsDiff(got, want))
		}
	}
}

// baseTypes records the dynamic type of every adaptable slot, to prove an operation left
// the model untouched.
func baseTypes(t *testing.T, m *diffusiongemma.Model) map[string]diffusiongemma.Linear {
	t.Helper()
	targets, err := diffusiongemma.LoRATargets(m.Config, diffusiongemma.LoRAKeys(), -1)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]diffusiongemma.Linear{}
	for _, tg := range targets {
		s, err := m.LinearSlot(tg.Module)
		if err != nil {
			t.Fatal(err)
		}
		out[tg.Module] = *s
	}
	return out
}

func assertSlotsUnchanged(t *testing.T, m *diffusiongemma.Model, before map[string]diffusiongemma.Linear) {
	t.Helper()
	for mod, l := range baseTypes(t, m) {
		if l != before[mod] {
			t.Fatalf("slot %s changed: %T, was %T", mod, l, before[mod])
		}
	}
}
