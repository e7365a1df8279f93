package objective

import (
	"fmt"

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
// and Count = Σ wᵢ.
type Terms struct {
	Sum   *mx.Array
	Count float64
	Scale float64 // per-example weight (1, or 1/t)
}

// ExampleTerms runs the model on one example's prompt and corrupted canvas and returns
// its weighted cross-entropy sum. The logits are those of Model.Forward: fresh caches,
// no self-conditioning.
func (o Objective) ExampleTerms(m *dg.Model, ex Example, c Corruption) Terms {
	e := m.Engine
	prompt := mx.FromInt32(e, ex.Prompt, 1, len(ex.Prompt))
	canvas := mx.FromInt32(e, c.Canvas, 1, len(c.Canvas))
	logits := forward(m, prompt, canvas, ex.Images) // [1, L, V] float32
	ce := CrossEntropy(logits, ex.Target)
	w := o.weights(c)
	count := 0.0
	for _, v := range w {
		count += float64(v)
	}
	scale := 1.0
	if o.Weighting == InvT && c.T > 0 {
		scale = 1 / c.T
	}
	sum := mx.Sum(mx.Multiply(ce, mx.FromFloat32(e, w, 1, len(w))), false)
	return Terms{Sum: sum, Count: count, Scale: scale}
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
func BatchLoss(terms []Terms) (loss *mx.Array, count float64) {
	var total *mx.Array
	for _, t := range terms {
		s := t.Sum
		if t.Scale != 1 {
			s = mx.MulScalar(s, t.Scale)
		}
		if total == nil {
			total = s
		} else {
			total = mx.Add(total, s)
		}
		count += t.Count
	}
	return mx.DivScalar(total, max(count, 1)), count
}

// forward is Model.Forward, or ForwardWithImages for an image prompt. The images were
// decoded when the data was read and the prompt's blocks were sized from them, so a
// failure here is a bug, not bad input.
func forward(m *dg.Model, prompt, canvas *mx.Array, srcs []*imageproc.Source) *mx.Array {
	if len(srcs) == 0 {
		return m.Forward(prompt, canvas)
	}
	images, err := m.Images(srcs)
	if err == nil {
		var logits *mx.Array
		if logits, err = m.ForwardWithImages(prompt, canvas, images); err == nil {
			return logits
		}
	}
	panic(fmt.Sprintf("objective: image prompt: %v", err))
}
