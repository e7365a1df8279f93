package diffusiongemma

import (
	"slices"
	"testing"

	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
)

// EncodeHidden fills the cache as Encode does and returns decoder.norm of the last
// layer's output; chunks with continuing positions give the same hidden states as one
// pass (causal encoder), and a clone of the cache can be extended without touching it.
func TestEncodeHidden(t *testing.T) {
	m := genModel(t, "tiny", "0")
	e := m.Engine
	seq := []int32{2, 105, 7, 8, 9, 106, 107, 105, 10, 11, 12, 300, 301, 302}
	whole := m.NewCache()
	h, err := m.EncodeHidden(mx.FromInt32(e, seq, 1, len(seq)), nil, whole)
	if err != nil {
		t.Fatal(err)
	}
	if s := h.Shape(); !slices.Equal(s, []int{1, len(seq), m.Config.TextConfig.HiddenSize}) {
		t.Fatalf("hidden shape %v", s)
	}
	ref := m.NewCache()
	m.Encode(mx.FromInt32(e, seq, 1, len(seq)), ref)
	for i := range whole.Layers {
		if !slices.Equal(whole.Layers[i].K.Float32s(), ref.Layers[i].K.Float32s()) || whole.Offset != ref.Offset {
			t.Fatalf("layer %d: EncodeHidden's cache differs from Encode's", i)
		}
	}
	// Final-normed: every row has unit RMS before the norm weight; undo the weight and check.
	w := m.Norm.Float32s()
	hv := h.Float32s()
	for r := range len(seq) {
		ss := 0.0
		for j, x := range hv[r*len(w) : (r+1)*len(w)] {
			u := float64(x) / float64(w[j])
			ss += u * u
		}
		if rms := ss / float64(len(w)); rms < 0.999 || rms > 1.001 {
			t.Fatalf("row %d: mean square %v after removing the norm weight, want 1", r, rms)
		}
	}

	// Chunked: 11 prompt tokens, then 3 more into a clone.
	c := m.NewCache()
	h1, err := m.EncodeHidden(mx.FromInt32(e, seq[:11], 1, 11), nil, c)
	if err != nil {
		t.Fatal(err)
	}
	full := len(c.Layers) - 1 // a full-attention layer keeps every position
	k0 := c.Layers[full].K
	cl := c.Clone()
	h2, err := m.EncodeHidden(mx.FromInt32(e, seq[11:], 1, 3), nil, cl)
	if err != nil {
		t.Fatal(err)
	}
	if c.Offset != 11 || cl.Offset != 14 || c.Layers[full].K != k0 || k0.Dim(2) != 11 || cl.Layers[full].K.Dim(2) != 14 {
		t.Fatalf("clone: original offset %d (keys %v), clone offset %d (keys %v)", c.Offset, c.Layers[full].K.Shape(), cl.Offset, cl.Layers[full].K.Shape())
	}
	if ok, i := mxtest.Close(mx.Concatenate([]*mx.Array{h1, h2}, 1).Float32s(), hv, 1e-4, 1e-5); !ok {
		t.Fatalf("chunked hidden differs from one pass at %d", i)
	}
	// Logits is the decoder's head: the same rows through Decode's head agree.
	if s := m.Logits(h).Shape(); !slices.Equal(s, []int{1, len(seq), m.Config.TextConfig.VocabSize}) {
		t.Fatalf("logits shape %v", s)
	}
	if h, err := m.EncodeHidden(mx.FromInt32(e, nil, 1, 0), nil, m.NewCache()); h != nil || err != nil {
		t.Fatalf("empty chunk: %v, %v", h, err)
	}
}

// With NoSelfConditioning every pass is a first pass: its argmax is that of
// Decode(input, cache, nil)/T. The default conditions passes 2.. and so (on this model)
// differs from that recomputation somewhere.
func TestGenerateNoSelfConditioning(t *testing.T) {
	m := genModel(t, "tiny", "0")
	e := m.Engine
	cache := m.NewCache()
	m.Encode(mx.FromInt32(e, genPrompt, 1, len(genPrompt)), cache)
	recompute := func(s StepInfo) []int32 {
		logits := m.Decode(mx.FromInt32(e, s.Input, 1, len(s.Input)), cache, nil)
		return mx.Argmax(ProcessLogits(logits, s.Temperature), -1, false).Int32s()
	}
	for _, off := range []bool{true, false} {
		o := genTinyOptions(m)
		o.MaxTokens = 16
		o.NoSelfConditioning = off
		o.Sampler = SamplerEntropy // runs every step: more passes to compare
		steps := recordSteps(&o)
		if _, err := m.Generate(genPrompt, o); err != nil {
			t.Fatal(err)
		}
		same := 0
		for _, s := range *steps {
			if slices.Equal(recompute(s), s.Argmax) {
				same++
			}
		}
		if off && same != len(*steps) {
			t.Errorf("NoSelfConditioning: %d of %d passes match an unconditioned pass", same, len(*steps))
		}
		if !off && same == len(*steps) {
			t.Errorf("default: all %d passes match unconditioned ones; self-conditioning had no effect", len(*steps))
		}
		if (*steps)[0].Block != 0 || !slices.Equal(recompute((*steps)[0]), (*steps)[0].Argmax) {
			t.Errorf("first pass is not unconditioned (NoSelfConditioning %v)", off)
		}
	}
}
