package objective

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	dg "github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
)

func TestNeMoObjective(t *testing.T) {
	o := NeMo(256)
	want := Objective{TMin: 0.001, TMax: 1, Positions: All, Weighting: NoWeighting, SelfCond: 0.5, EncoderWeight: 1, BlockLen: 256}
	if o != want {
		t.Fatalf("NeMo(256) = %+v, want %+v", o, want)
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	if s := o.SinglePass(); s.SelfCond != 0 || s.EncoderWeight != 0 || s.BlockLen != 256 || s.Positions != All || s.TMin != 0.001 {
		t.Fatalf("SinglePass = %+v", s)
	}
}

func TestValidateNeMoOptions(t *testing.T) {
	cases := []struct {
		name string
		o    Objective
		want string
	}{
		{"self-cond above 1", Objective{TMin: 0, TMax: 1, Positions: All, Weighting: NoWeighting, SelfCond: 1.5}, "self_conditioning 1.5"},
		{"self-cond NaN", Objective{TMin: 0, TMax: 1, Positions: All, Weighting: NoWeighting, SelfCond: math.NaN()}, "self_conditioning"},
		{"negative encoder weight", Objective{TMin: 0, TMax: 1, Positions: All, Weighting: NoWeighting, EncoderWeight: -1}, "encoder_loss_weight -1"},
		{"infinite encoder weight", Objective{TMin: 0, TMax: 1, Positions: All, Weighting: NoWeighting, EncoderWeight: math.Inf(1)}, "encoder_loss_weight"},
		{"negative block", Objective{TMin: 0, TMax: 1, Positions: All, Weighting: NoWeighting, BlockLen: -2}, "block length -2"},
	}
	for _, tc := range cases {
		err := tc.o.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Validate() = %v, want an error mentioning %q", tc.name, err, tc.want)
		}
	}
}

// random_block cuts a target into canvas-sized blocks: ⌈n/B⌉ of them, the last one short.
func TestBlocksAndSpans(t *testing.T) {
	cases := []struct {
		n, blockLen int
		spans       [][2]int
	}{
		{n: 5, blockLen: 0, spans: [][2]int{{0, 5}}}, // no BlockLen: the whole target
		{n: 5, blockLen: 8, spans: [][2]int{{0, 5}}}, // shorter than a block
		{n: 8, blockLen: 8, spans: [][2]int{{0, 8}}}, // exactly one block
		{n: 9, blockLen: 8, spans: [][2]int{{0, 8}, {8, 9}}},
		{n: 16, blockLen: 8, spans: [][2]int{{0, 8}, {8, 16}}},
		{n: 10, blockLen: 3, spans: [][2]int{{0, 3}, {3, 6}, {6, 9}, {9, 10}}},
		{n: 1, blockLen: 1, spans: [][2]int{{0, 1}}},
		{n: 3, blockLen: 1, spans: [][2]int{{0, 1}, {1, 2}, {2, 3}}},
	}
	for _, tc := range cases {
		o := Objective{BlockLen: tc.blockLen}
		if got := o.Blocks(tc.n); got != len(tc.spans) {
			t.Errorf("Blocks(%d) with block %d = %d, want %d", tc.n, tc.blockLen, got, len(tc.spans))
			continue
		}
		for b, want := range tc.spans {
			if s, e := o.BlockSpan(b, tc.n); s != want[0] || e != want[1] {
				t.Errorf("BlockSpan(%d, %d) with block %d = [%d, %d), want [%d, %d)", b, tc.n, tc.blockLen, s, e, want[0], want[1])
			}
		}
	}
}

// Choose draws the block uniformly and the coin with probability SelfCond, from the key
// alone; an objective without the options draws nothing.
func TestChoose(t *testing.T) {
	e := mxtest.Go(t)
	if ch := Reference(0.4, 0.8).Choose(nil, 1000); ch != (Choice{}) {
		t.Fatalf("reference objective chose %+v", ch)
	}
	const draws = 1200
	o := Objective{BlockLen: 4, SelfCond: 0.5}
	counts := make([]int, 3) // n = 10 → 3 blocks
	coins := 0
	for s := range uint64(draws) {
		ch := o.Choose(mx.Key(e, s), 10)
		if ch.Block < 0 || ch.Block >= 3 {
			t.Fatalf("seed %d: block %d of 3", s, ch.Block)
		}
		counts[ch.Block]++
		if ch.SelfCond {
			coins++
		}
		if again := o.Choose(mx.Key(e, s), 10); again != ch {
			t.Fatalf("seed %d: %+v then %+v from the same key", s, ch, again)
		}
	}
	// Binomial(1200, 1/3): sd ≈ 16.3, so ±80 is ~5 sd; Binomial(1200, 1/2): sd ≈ 17.3.
	for b, c := range counts {
		if math.Abs(float64(c)-draws/3.0) > 80 {
			t.Errorf("block %d chosen %d times of %d, want ≈ %d", b, c, draws, draws/3)
		}
	}
	if math.Abs(float64(coins)-draws/2.0) > 85 {
		t.Errorf("self-conditioning on in %d of %d draws at p = 0.5", coins, draws)
	}
	// p = 0 and 1 never and always; a target of one block always trains block 0.
	for s := range uint64(50) {
		if (Objective{BlockLen: 4}).Choose(mx.Key(e, s), 10).SelfCond {
			t.Fatal("p = 0 chose self-conditioning")
		}
		if ch := (Objective{BlockLen: 4, SelfCond: 1}).Choose(mx.Key(e, s), 4); !ch.SelfCond || ch.Block != 0 {
			t.Fatalf("p = 1 on one block: %+v", ch)
		}
	}
}

// The reference objective's noise is the same whether or not a choice key is passed,
// and a block's corruption is Draw's over that block alone.
func TestDrawExample(t *testing.T) {
	e := mxtest.Go(t)
	target := []int32{300, 301, 302, 303, 304, 305, 306, 307, 308, 309}
	ref := Reference(0.4, 0.8)
	for s := range uint64(20) {
		a := ref.DrawExample(mx.Key(e, s), mx.Key(e, 1000+s), target, 512)
		b := ref.Draw(mx.Key(e, s), target, 512)
		if a.T != b.T || !slices.Equal(a.Corrupt, b.Corrupt) || !slices.Equal(a.Canvas, b.Canvas) || a.Block != 0 || a.SelfCond {
			t.Fatalf("seed %d: DrawExample %+v, Draw %+v", s, a, b)
		}
	}
	o := Objective{TMin: 0.3, TMax: 0.9, Positions: All, Weighting: NoWeighting, BlockLen: 4, SelfCond: 0.5}
	seen := map[int]bool{}
	for s := range uint64(40) {
		c := o.DrawExample(mx.Key(e, s), mx.Key(e, 1000+s), target, 512)
		ch := o.Choose(mx.Key(e, 1000+s), len(target))
		start, end := o.BlockSpan(ch.Block, len(target))
		want := o.Draw(mx.Key(e, s), target[start:end], 512)
		if c.Block != ch.Block || c.SelfCond != ch.SelfCond || c.T != want.T || !slices.Equal(c.Canvas, want.Canvas) || !slices.Equal(c.Corrupt, want.Corrupt) {
			t.Fatalf("seed %d: %+v, want block %d of %+v", s, c, ch.Block, want)
		}
		for i, bad := range c.Corrupt {
			if !bad && c.Canvas[i] != target[start+i] {
				t.Fatalf("seed %d: clean position %d holds %d, target %d", s, i, c.Canvas[i], target[start+i])
			}
		}
		seen[c.Block] = true
	}
	if len(seen) != 3 {
		t.Errorf("40 draws over 3 blocks chose only %v", seen)
	}
}

// Block b of a long target is scored exactly as generation would see it: the encoder has
// read prompt + blocks 0..b−1 (positions continuing), the decoder denoises block b at
// positions offset.. — here encoded in one pass, where ExampleTerms encodes in two chunks.
func TestRandomBlockMatchesContinuation(t *testing.T) {
	e := mxtest.Go(t)
	m := tinyModel(t, e)
	ex := Example{Prompt: []int32{2, 105, 40, 41, 106, 107, 105}, Target: []int32{300, 301, 302, 303, 304, 305, 306, 307, 308, 309}}
	o := Objective{TMin: 0.5, TMax: 0.5, Positions: All, Weighting: NoWeighting, BlockLen: 4}
	for _, block := range []int{0, 1, 2} {
		start, end := o.BlockSpan(block, len(ex.Target))
		n := end - start
		mask := make([]bool, n)
		mask[0], mask[n-1] = true, true
		c := handCorruption(0.5, ex.Target[start:end], mask, slices.Repeat([]int32{17}, n))
		c.Block = block
		got := o.ExampleTerms(m, ex, c)

		ctx := append(slices.Clone(ex.Prompt), ex.Target[:start]...)
		cache := m.NewCache()
		m.Encode(mx.FromInt32(e, ctx, 1, len(ctx)), cache)
		if cache.Offset != len(ex.Prompt)+start {
			t.Fatalf("block %d: offset %d", block, cache.Offset)
		}
		logits := m.Decode(mx.FromInt32(e, c.Canvas, 1, n), cache, nil).Float32s()
		v := m.Config.TextConfig.VocabSize
		want := 0.0
		for i := range n {
			want += ce64(logits[i*v:(i+1)*v], ex.Target[start+i])
		}
		if got.Count != float64(n) || !near(got.Sum.Item(), want, 2e-5) {
			t.Errorf("block %d: sum %v over %v, want %v over %d", block, got.Sum.Item(), got.Count, want, n)
		}
	}
	// A block that does not fit the target is a bug in the caller.
	defer func() {
		if recover() == nil {
			t.Error("block 3 of a 3-block target did not panic")
		}
	}()
	o.ExampleTerms(m, ex, Corruption{Block: 3, Canvas: []int32{1}, Corrupt: []bool{true}})
}

// softEmbedding64 is softmax(ℓ)·E·√H for every row of logits, in float64.
func softEmbedding64(m *dg.Model, logits []float32) []float32 {
	v, h := m.Config.TextConfig.VocabSize, m.Config.TextConfig.HiddenSize
	emb := m.Embed.Dense.Float32s()
	scale := math.Sqrt(float64(h))
	rows := len(logits) / v
	out := make([]float32, rows*h)
	for r := range rows {
		row := logits[r*v : (r+1)*v]
		mx64 := math.Inf(-1)
		for _, x := range row {
			mx64 = math.Max(mx64, float64(x))
		}
		z := 0.0
		p := make([]float64, v)
		for i, x := range row {
			p[i] = math.Exp(float64(x) - mx64)
			z += p[i]
		}
		for j := range h {
			s := 0.0
			for i := range v {
				s += p[i] / z * float64(emb[i*h+j])
			}
			out[r*h+j] = float32(s * scale)
		}
	}
	return out
}

// The two-pass step equals a hand-written second pass: the first pass's logits, their
// soft embedding computed here in float64, and the decoder run again with it.
func TestSelfConditionedHandSecondPass(t *testing.T) {
	e := mxtest.Go(t)
	m := tinyModel(t, e)
	ex := Example{Prompt: []int32{2, 105, 40, 41, 42, 106, 107, 105}, Target: []int32{300, 301, 302, 303, 304, 305}}
	c := handCorruption(0.5, ex.Target, []bool{true, false, true, false, true, true}, []int32{7, 0, 450, 0, 9, 12})
	c.SelfCond = true
	o := Objective{TMin: 0.5, TMax: 0.5, Positions: All, Weighting: NoWeighting}
	got := o.ExampleTerms(m, ex, c)

	prompt, canvas := mx.FromInt32(e, ex.Prompt, 1, len(ex.Prompt)), mx.FromInt32(e, c.Canvas, 1, len(c.Canvas))
	first := m.Forward(prompt, canvas).Float32s()
	sc := mx.FromFloat32(e, softEmbedding64(m, first), 1, len(c.Canvas), m.Config.TextConfig.HiddenSize)
	cache := m.NewCache()
	m.Encode(prompt, cache)
	second := m.Decode(canvas, cache, sc).Float32s()
	v := m.Config.TextConfig.VocabSize
	want, diff := 0.0, 0.0
	for i := range ex.Target {
		want += ce64(second[i*v:(i+1)*v], ex.Target[i])
		for j := i * v; j < (i+1)*v; j++ {
			diff = math.Max(diff, math.Abs(float64(second[j]-first[j])))
		}
	}
	if !near(got.Sum.Item(), want, 2e-5) || got.Count != 6 {
		t.Errorf("two-pass sum %v over %v, hand second pass %v over 6", got.Sum.Item(), got.Count, want)
	}
	// Conditioning must change the logits, or the comparison above proves nothing.
	if diff < 1e-2 {
		t.Errorf("second-pass logits within %g of the first pass: self-conditioning had no effect", diff)
	}
	// SelfConditioned is the same second pass.
	cache2 := m.NewCache()
	m.Encode(prompt, cache2)
	if ok, i := mxtest.Close(SelfConditioned(m, canvas, cache2).Float32s(), second, 1e-5, 5e-5); !ok {
		t.Errorf("SelfConditioned differs from the hand second pass at %d", i)
	}
}

// The encoder's causal-LM terms are next-token cross-entropy of the clean sequence
// prompt + target through the final norm and the tied head, whichever block is trained.
func TestEncoderTermsHand(t *testing.T) {
	e := mxtest.Go(t)
	m := tinyModel(t, e)
	ex := Example{Prompt: []int32{2, 105, 40, 41, 106, 107, 105}, Target: []int32{300, 301, 302, 303, 304, 305, 306, 307, 308}}
	seq := append(slices.Clone(ex.Prompt), ex.Target...)
	cache := m.NewCache()
	hidden, err := m.EncodeHidden(mx.FromInt32(e, seq, 1, len(seq)), nil, cache)
	if err != nil {
		t.Fatal(err)
	}
	logits := m.Logits(hidden).Float32s()
	v := m.Config.TextConfig.VocabSize
	want := 0.0
	for i := 0; i+1 < len(seq); i++ {
		want += ce64(logits[i*v:(i+1)*v], seq[i+1])
	}
	o := Objective{TMin: 0.5, TMax: 0.5, Positions: Corrupted, Weighting: NoWeighting, EncoderWeight: 0.7, BlockLen: 4}
	for _, block := range []int{0, 1, 2} {
		start, end := o.BlockSpan(block, len(ex.Target))
		c := handCorruption(0.5, ex.Target[start:end], make([]bool, end-start), nil)
		c.Block = block
		got := o.ExampleTerms(m, ex, c)
		if got.EncCount != float64(len(seq)-1) || got.EncWeight != 0.7 || !near(got.EncSum.Item(), want, 2e-5) {
			t.Errorf("block %d: encoder sum %v over %v (weight %v), want %v over %d", block, got.EncSum.Item(), got.EncCount, got.EncWeight, want, len(seq)-1)
		}
		// Nothing corrupted: the denoising part is 0, so the loss is W·(Σ ce)/(S−1).
		loss, _ := BatchLoss([]Terms{got})
		if !near(loss.Item(), 0.7*want/float64(len(seq)-1), 2e-5) {
			t.Errorf("block %d: loss %v, want %v", block, loss.Item(), 0.7*want/float64(len(seq)-1))
		}
	}
	if (Objective{TMin: 0.5, TMax: 0.5, Positions: All, Weighting: NoWeighting}).ExampleTerms(m, ex,
		handCorruption(0.5, ex.Target, make([]bool, len(ex.Target)), nil)).EncSum != nil {
		t.Error("encoder terms without an encoder weight")
	}
}

// BatchLoss normalises the two parts separately over the batch, token-weighted:
// (Σ scale·Sum)/Σ Count + (Σ W·EncSum)/Σ EncCount.
func TestBatchLossWithEncoderTerms(t *testing.T) {
	e := mxtest.Go(t)
	s := func(v float64) *mx.Array { return mx.FromFloat32(e, []float32{float32(v)}) }
	terms := []Terms{
		{Sum: s(3), Count: 2, Scale: 1, EncSum: s(10), EncCount: 4, EncWeight: 0.5},
		{Sum: s(6), Count: 4, Scale: 1, EncSum: s(2), EncCount: 6, EncWeight: 0.5},
	}
	loss, count := BatchLoss(terms)
	// (3 + 6)/6 + 0.5·(10 + 2)/10 = 1.5 + 0.6.
	if count != 6 || !near(loss.Item(), 2.1, 1e-6) {
		t.Fatalf("loss %v count %v, want 2.1 and 6", loss.Item(), count)
	}
}

func ExampleObjective_BlockSpan() {
	o := Objective{BlockLen: 256}
	for b := range o.Blocks(600) {
		s, e := o.BlockSpan(b, 600)
		fmt.Printf("block %d: target[%d:%d]\n", b, s, e)
	}
	// Output:
	// block 0: target[0:256]
	// block 1: target[256:512]
	// block 2: target[512:600]
}
