package objective

import (
	"fmt"

	dg "github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/mx"
)

// NeMo AutoModel's DiffusionGemma SFT objective (DiffusionGemmaSFTRecipe, examples
// dllm_sft/diffusion_gemma_lora.yaml): t ~ U(0.001, 1) per example, every supervised
// canvas position scored, self-conditioning with probability 0.5 per example, the
// encoder's causal-LM loss at weight 1, and one random canvas-sized block of a long
// target per example. The README's objective table gives the sources.

// NeMo's values (dllm.eps, self_conditioning_p, encoder_loss_weight).
const (
	NeMoTMin          = 0.001
	NeMoTMax          = 1.0
	NeMoSelfCond      = 0.5
	NeMoEncoderWeight = 1.0
)

// NeMo returns NeMo AutoModel's objective with canvas-sized blocks of blockLen.
func NeMo(blockLen int) Objective {
	return Objective{TMin: NeMoTMin, TMax: NeMoTMax, Positions: All, Weighting: NoWeighting,
		SelfCond: NeMoSelfCond, EncoderWeight: NeMoEncoderWeight, BlockLen: blockLen}
}

// SinglePass is o without the training-only terms — no self-conditioning and no encoder
// loss — for validation, whose value must be comparable across steps and with the
// reference objective.
func (o Objective) SinglePass() Objective {
	o.SelfCond, o.EncoderWeight = 0, 0
	return o
}

// Blocks returns how many canvas-sized blocks a target of n tokens has (1 without a
// BlockLen).
func (o Objective) Blocks(n int) int {
	if o.BlockLen <= 0 || n <= o.BlockLen {
		return 1
	}
	return (n + o.BlockLen - 1) / o.BlockLen
}

// BlockSpan returns the target positions [start, end) of block b of a target of n tokens.
func (o Objective) BlockSpan(b, n int) (start, end int) {
	if o.BlockLen <= 0 {
		return 0, n
	}
	return b * o.BlockLen, min((b+1)*o.BlockLen, n)
}

// Choice is what an example's choice key decides: the block of a long target that is
// trained and whether the example takes the two-pass self-conditioned step.
type Choice struct {
	Block    int
	SelfCond bool
}

// needsChoice reports whether o draws anything from a choice key.
func (o Objective) needsChoice() bool { return o.BlockLen > 0 || o.SelfCond > 0 }

// Choose draws one example's Choice for a target of n tokens from key: the block
// uniformly among Blocks(n) (NeMo: ⌊u·blocks⌋) and the self-conditioning coin u < SelfCond,
// each from its own subkey. An objective with neither option draws nothing (key may be
// nil).
func (o Objective) Choose(key *mx.Array, n int) Choice {
	var ch Choice
	if !o.needsChoice() {
		return ch
	}
	if key == nil {
		panic("objective: this objective needs a choice key (random_block or self_conditioning)")
	}
	ks := mx.SplitKey(key, 2)
	if nb := o.Blocks(n); nb > 1 {
		ch.Block = int(mx.Randint(ks[0], []int{1}, 0, int64(nb), mx.Int32).Int32s()[0])
	}
	switch {
	case o.SelfCond >= 1:
		ch.SelfCond = true
	case o.SelfCond > 0:
		ch.SelfCond = float64(mx.Uniform(ks[1], []int{1}, 0, 1, mx.Float32).Float32s()[0]) < o.SelfCond
	}
	return ch
}

// DrawExample is one example's randomness: the Choice from choice, then the corruption
// of the chosen block from noise exactly as Draw makes it. The two keys are separate so
// that the reference objective, which uses no choice, draws the same noise as before the
// options existed.
func (o Objective) DrawExample(noise, choice *mx.Array, target []int32, vocab int) Corruption {
	ch := o.Choose(choice, len(target))
	start, end := o.BlockSpan(ch.Block, len(target))
	c := o.Draw(noise, target[start:end], vocab)
	c.Block, c.SelfCond = ch.Block, ch.SelfCond
	return c
}

// SelfConditioned is the two-pass step over an encoded cache: a first decoder pass
// without self-conditioning, held constant (stop-gradient), its logits ℓ turned into the
// soft embedding softmax(ℓ)·E·√H (Model.SoftEmbedding, at temperature 1 as NeMo AutoModel
// and transformers' self_conditioning_logits do), then the second pass conditioned on it.
// It returns the second pass's logits; gradients reach the weights only through the
// second pass (and through E in the soft embedding, for a trainable embedding).
func SelfConditioned(m *dg.Model, canvas *mx.Array, c *dg.Cache) *mx.Array {
	return m.Logits(SelfConditionedHidden(m, canvas, c))
}

// SelfConditionedHidden is SelfConditioned up to the second pass's final-normed hidden
// states [B, L, H] (the first pass needs every position's logits for its soft embedding).
func SelfConditionedHidden(m *dg.Model, canvas *mx.Array, c *dg.Cache) *mx.Array {
	first := mx.StopGradient(m.Decode(canvas, c, nil))
	return m.DecodeHidden(canvas, c, m.SoftEmbedding(first))
}

// encode fills a fresh cache with the prompt and the target's first start tokens (the
// blocks before the trained one), and — with an EncoderWeight — returns the encoder's
// next-token terms over the whole clean sequence prompt + target. The tokens after
// start are encoded into a clone of the cache, which the decoder never reads: a causal
// encoder gives positions < start the same keys and values either way.
func (o Objective) encode(m *dg.Model, ex Example, start int) (*dg.Cache, Terms) {
	e := m.Engine
	imgs := images(m, ex.Images)
	c := m.NewCache()
	prompt := mx.FromInt32(e, ex.Prompt, 1, len(ex.Prompt))
	if o.EncoderWeight == 0 {
		must(m.EncodeWithImages(prompt, imgs, c))
		if start > 0 {
			m.Encode(mx.FromInt32(e, ex.Target[:start], 1, start), c)
		}
		return c, Terms{}
	}
	var hidden []*mx.Array
	add := func(h *mx.Array, err error) {
		must(err)
		if h != nil {
			hidden = append(hidden, h)
		}
	}
	add(m.EncodeHidden(prompt, imgs, c))
	if start > 0 {
		add(m.EncodeHidden(mx.FromInt32(e, ex.Target[:start], 1, start), nil, c))
	}
	if rest := ex.Target[start:]; len(rest) > 0 {
		add(m.EncodeHidden(mx.FromInt32(e, rest, 1, len(rest)), nil, c.Clone()))
	}
	seq := append(append([]int32(nil), ex.Prompt...), ex.Target...)
	t := encoderTerms(m, mx.Concatenate(hidden, 1), seq, len(ex.Images) > 0)
	t.EncWeight = o.EncoderWeight
	return c, t
}

// encoderTerms scores the encoder as a causal LM: hidden [1, S, H] (final-normed) at
// position i predicts seq[i+1] through the tied head, for every i < S−1 — prompt and
// target alike, as NeMo scores the whole clean sequence. With images, pairs whose next
// token is an image soft token are not scored (the encoder sees vision features there,
// not that token).
func encoderTerms(m *dg.Model, hidden *mx.Array, seq []int32, hasImages bool) Terms {
	s := len(seq)
	if s < 2 {
		return Terms{}
	}
	e := m.Engine
	logits := m.Logits(mx.SliceAxis(hidden, 1, 0, s-1)) // [1, S−1, V]
	ce := CrossEntropy(logits, seq[1:])
	w, count := encoderPairs(seq, hasImages, int32(m.Config.ImageTokenID))
	return Terms{EncSum: mx.Sum(mx.Multiply(ce, mx.FromFloat32(e, w, 1, len(w))), false), EncCount: count}
}

// encoderPairs weights the encoder's next-token pairs over seq (pair i predicts
// seq[i+1]): 1, except 0 where the next token is an image soft token of an image prompt.
func encoderPairs(seq []int32, hasImages bool, imageID int32) ([]float32, float64) {
	if len(seq) < 2 {
		return nil, 0
	}
	w := make([]float32, len(seq)-1)
	count := 0.0
	for i := range w {
		if hasImages && seq[i+1] == imageID {
			continue
		}
		w[i] = 1
		count++
	}
	return w, count
}

// must panics on an error of the model's encoder: the examples were checked when the
// data was read (image blocks sized from their images), so one here is a bug.
func must(err error) {
	if err != nil {
		panic(fmt.Sprintf("objective: encode: %v", err))
	}
}
