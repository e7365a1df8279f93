package objective

import (
	"fmt"
	"math"

	"github.com/dgtune/dgtune/imageproc"
	dg "github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/mx"
)

// Positions selects which canvas positions the loss scores.
type Positions string

// The loss-position choices.
const (
	Corrupted Positions = "corrupted" // the reference: only positions that were replaced
	All       Positions = "all"       // every canvas position
)

// Weighting selects a per-example weight on the loss.
type Weighting string

// The weighting choices.
const (
	NoWeighting Weighting = "none"
	InvT        Weighting = "inv_t" // 1/t, the ELBO weighting of masked diffusion
)

// Objective configures the denoising loss.
type Objective struct {
	TMin, TMax float64
	Positions  Positions
	Weighting  Weighting
	// SelfCond is the probability per example of the two-pass self-conditioned step
	// (NeMo AutoModel): a first decoder pass under stop-gradient, whose soft embedding
	// conditions the second, trained pass. 0 is the reference (every example single-pass).
	SelfCond float64
	// EncoderWeight weighs the encoder's causal next-token cross-entropy over the clean
	// prompt + target, added to the denoising loss (0: none, the reference).
	EncoderWeight float64
	// BlockLen > 0 cuts a target longer than BlockLen into canvas-sized blocks and trains
	// one of them, chosen per example, with the prompt and the earlier blocks (clean) in
	// the encoder's context (NeMo's random_block). 0: the whole target is the canvas.
	BlockLen int
}

// Reference returns optiq's objective for a noise range.
func Reference(tMin, tMax float64) Objective {
	return Objective{TMin: tMin, TMax: tMax, Positions: Corrupted, Weighting: NoWeighting}
}

// Validate checks the options.
func (o Objective) Validate() error {
	if !(o.TMin >= 0 && o.TMin <= o.TMax && o.TMax <= 1) {
		return fmt.Errorf("objective: need 0 ≤ t_min ≤ t_max ≤ 1, got t_min %g, t_max %g", o.TMin, o.TMax)
	}
	switch o.Positions {
	case Corrupted, All:
	default:
		return fmt.Errorf("objective: loss_positions %q: want corrupted or all", o.Positions)
	}
	switch o.Weighting {
	case NoWeighting, InvT:
	default:
		return fmt.Errorf("objective: weighting %q: want none or inv_t", o.Weighting)
	}
	if !(o.SelfCond >= 0 && o.SelfCond <= 1) {
		return fmt.Errorf("objective: self_conditioning %g: want a probability in [0, 1]", o.SelfCond)
	}
	if !(o.EncoderWeight >= 0) || math.IsInf(o.EncoderWeight, 1) {
		return fmt.Errorf("objective: encoder_loss_weight %g: want a finite weight ≥ 0", o.EncoderWeight)
	}
	if o.BlockLen < 0 {
		return fmt.Errorf("objective: block length %d: want ≥ 0 (0 = the whole target)", o.BlockLen)
	}
	return nil
}

// Example is one training pair of token ids.
type Example struct {
	Prompt, Target []int32
	// Images are the prompt's images, one per image block of Prompt (see
	// diffusiongemma.ExpandImageTokens); nil for text prompts.
	Images []*imageproc.Source
}

// Corruption is one draw of noise for one example's canvas.
type Corruption struct {
	T       float64
	Corrupt []bool  // position i was replaced
	Canvas  []int32 // what the decoder sees
	// Block is the index of the target's canvas-sized block the canvas covers (always 0
	// unless the objective has a BlockLen and the target is longer).
	Block int
	// SelfCond marks an example that takes the two-pass self-conditioned step.
	SelfCond bool
}

// Draw samples a corruption with t ~ U(TMin, TMax) from key: t, the per-position
// uniforms u (corrupt iff u < t, strict) and the replacement ids each come from their
// own subkey.
func (o Objective) Draw(key *mx.Array, target []int32, vocab int) Corruption {
	ks := mx.SplitKey(key, 2)
	t := o.TMin // a fixed level t_min = t_max is valid; the engines reject an empty range
	if o.TMax > o.TMin {
		t = float64(mx.Uniform(ks[0], []int{1}, o.TMin, o.TMax, mx.Float32).Float32s()[0])
	}
	return CorruptAt(ks[1], target, t, vocab)
}

// CorruptAt corrupts target at a fixed noise level t (evaluation uses fixed levels).
func CorruptAt(key *mx.Array, target []int32, t float64, vocab int) Corruption {
	l := len(target)
	ks := mx.SplitKey(key, 2)
	u := mx.Uniform(ks[0], []int{l}, 0, 1, mx.Float32).Float32s()
	noise := mx.Randint(ks[1], []int{l}, 0, int64(vocab), mx.Int32).Int32s()
	c := Corruption{T: t, Corrupt: make([]bool, l), Canvas: make([]int32, l)}
	for i := range target {
		if float64(u[i]) < t {
			c.Corrupt[i] = true
			c.Canvas[i] = noise[i]
		} else {
			c.Canvas[i] = target[i]
		}
	}
	return c
}

// weights returns the per-position loss weights of one example.
func (o Objective) weights(c Corruption) []float32 {
	w := make([]float32, len(c.Corrupt))
	for i, bad := range c.Corrupt {
		if bad || o.Positions == All {
			w[i] = 1
		}
	}
	return w
}

// Terms are one example's loss ingredients: Sum = Σ wᵢ·ceᵢ (an array, differentiable)
// and Count = Σ wᵢ over the canvas; EncSum and EncCount the same for the encoder's
// next-token cross-entropy (nil and 0 unless the objective has an EncoderWeight).
type Terms struct {
	Sum   *mx.Array
	Count float64
	Scale float64 // per-example weight (1, or 1/t)

	EncSum    *mx.Array
	EncCount  float64
	EncWeight float64
}

// ExampleTerms runs the model on one example's prompt and corrupted canvas and returns
// its weighted cross-entropy sum. The encoder reads the prompt and, for a later block of
// a long target, the blocks before it (clean, positions continuing as in generation);
// the decoder pass is Model.Decode without self-conditioning, or the second of the
// two-pass step when c.SelfCond is set (SelfConditioned).
func (o Objective) ExampleTerms(m *dg.Model, ex Example, c Corruption) Terms {
	e := m.Engine
	start, err := o.canvasStart(ex, c)
	if err != nil {
		panic(err.Error())
	}
	target := ex.Target[start : start+len(c.Canvas)]
	canvas := mx.FromInt32(e, c.Canvas, 1, len(c.Canvas))
	var hidden *mx.Array // [1, L, H], final-normed
	var enc Terms
	if o.EncoderWeight == 0 && !c.SelfCond && len(ex.Images) == 0 {
		// The reference step: the encoder's context (the prompt and the blocks before
		// this one) and the canvas in one pass where the model allows it.
		ctx := append(append([]int32(nil), ex.Prompt...), ex.Target[:start]...)
		hidden = m.EncodeDecodeHidden(mx.FromInt32(e, ctx, 1, len(ctx)), canvas)
	} else {
		var cache *dg.Cache
		cache, enc = o.encode(m, ex, start)
		if c.SelfCond {
			hidden = SelfConditionedHidden(m, canvas, cache)
		} else {
			hidden = m.DecodeHidden(canvas, cache, nil)
		}
	}
	w := o.weights(c)
	count := 0.0
	for _, v := range w {
		count += float64(v)
	}
	scale := 1.0
	if o.Weighting == InvT && c.T > 0 {
		scale = 1 / c.T
	}
	var sum *mx.Array
	if rows, picked := scoredRows(w, target); len(rows) > 0 {
		// Only the scored positions go through the tied head: the others have weight 0,
		// so their logits would only be multiplied away (and their gradient is zero).
		if len(rows) < len(w) {
			hidden = mx.Take(hidden, mx.FromInt32(e, rows, len(rows)), 1)
		}
		sum = mx.Sum(CrossEntropy(m.Logits(hidden), picked), false)
	} else {
		// Nothing scored: a differentiable zero of the same graph, as Σ 0·ceᵢ.
		ce := CrossEntropy(m.Logits(hidden), target)
		sum = mx.Sum(mx.Multiply(ce, mx.FromFloat32(e, w, 1, len(w))), false)
	}
	enc.Sum, enc.Count, enc.Scale = sum, count, scale
	return enc
}

// canvasStart is where c's canvas begins in ex.Target, or why it does not fit there.
func (o Objective) canvasStart(ex Example, c Corruption) (int, error) {
	start := c.Block * o.BlockLen
	if c.Block < 0 || start+len(c.Canvas) > len(ex.Target) || (c.Block > 0 && o.BlockLen == 0) {
		return 0, fmt.Errorf("objective: corruption of block %d (%d positions) does not fit a target of %d with block length %d", c.Block, len(c.Canvas), len(ex.Target), o.BlockLen)
	}
	return start, nil
}

// scoredRows returns the positions with weight 1 and their targets. Weights are 0 or 1.
func scoredRows(w []float32, target []int32) (rows, picked []int32) {
	for i, v := range w {
		if v != 0 {
			rows = append(rows, int32(i))
			picked = append(picked, target[i])
		}
	}
	return rows, picked
}

// CrossEntropy returns ceᵢ = logsumexp(logitsᵢ) − logitsᵢ[targetᵢ] for logits [1, L, V].
func CrossEntropy(logits *mx.Array, target []int32) *mx.Array {
	e := logits.Engine()
	idx := mx.FromInt32(e, target, 1, len(target), 1)
	picked := mx.Squeeze(mx.TakeAlongAxis(logits, idx, -1), -1)
	return mx.Subtract(mx.LogSumExp(logits, false, -1), picked)
}

// BatchLoss combines examples' terms into the batch loss:
// Σ_b scale_b·Sum_b / max(Σ_b Count_b, 1) — token-weighted over the batch, which for
// one example is the reference Σ corruptᵢ·ceᵢ / max(Σ corruptᵢ, 1).
//
// With encoder terms (EncoderWeight > 0) the encoder's causal-LM loss is added the same
// way, token-weighted over the batch: Σ_b W·EncSum_b / max(Σ_b EncCount_b, 1), as NeMo
// AutoModel normalises it. count is always the denoising count.
func BatchLoss(terms []Terms) (loss *mx.Array, count float64) {
	var encCount float64
	for _, t := range terms {
		count += t.Count
		if t.EncSum != nil && t.EncWeight != 0 {
			encCount += t.EncCount
		}
	}
	return ShareLoss(terms, count, encCount), count
}

// addScaled returns total + scale·s (s·scale alone when total is nil).
func addScaled(total, s *mx.Array, scale float64) *mx.Array {
	if scale != 1 {
		s = mx.MulScalar(s, scale)
	}
	if total == nil {
		return s
	}
	return mx.Add(total, s)
}

// images decodes an example's images. They were decoded when the data was read and the
// prompt's blocks were sized from them, so a failure here is a bug, not bad input.
func images(m *dg.Model, srcs []*imageproc.Source) []*imageproc.Image {
	if len(srcs) == 0 {
		return nil
	}
	imgs, err := m.Images(srcs)
	if err != nil {
		panic(fmt.Sprintf("objective: image prompt: %v", err))
	}
	return imgs
}
