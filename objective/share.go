package objective

import "github.com/dgtune/dgtune/mx"

// Count is the number of scored positions of a corruption (Σ wᵢ, the Count its Terms
// will have), known before the model runs.
func (o Objective) Count(c Corruption) float64 {
	n := 0.0
	for _, w := range o.weights(c) {
		n += float64(w)
	}
	return n
}

// EncoderCount is the number of next-token pairs the encoder's loss scores for ex (the
// EncCount its Terms will have; 0 without an EncoderWeight), known before the model runs.
// imageTokenID is the model config's image soft token.
func (o Objective) EncoderCount(ex Example, imageTokenID int) float64 {
	if o.EncoderWeight == 0 {
		return 0
	}
	seq := append(append([]int32(nil), ex.Prompt...), ex.Target...)
	_, n := encoderPairs(seq, len(ex.Images) > 0, int32(imageTokenID))
	return n
}

// ShareLoss is one part of a batch loss whose examples are spread over several
// processes: Σ_b scale_b·Sum_b over this part's terms divided by count, plus (with encoder
// terms) Σ_b W·EncSum_b divided by encCount, where count and encCount are the whole
// batch's (a count ≤ 0, a batch with nothing scored, divides by 1). The parts of a batch add
// up to its BatchLoss, and so do their gradients; with every example in one part it is
// BatchLoss. A denominator need not be a whole number: a training step divides by a step's
// count over the number of micro-batches it averages (see train's loss_normalization).
func ShareLoss(terms []Terms, count, encCount float64) *mx.Array {
	var total, encTotal *mx.Array
	for _, t := range terms {
		total = addScaled(total, t.Sum, t.Scale)
		if t.EncSum != nil && t.EncWeight != 0 {
			encTotal = addScaled(encTotal, t.EncSum, t.EncWeight)
		}
	}
	loss := mx.DivScalar(total, positive(count))
	if encTotal != nil {
		loss = mx.Add(loss, mx.DivScalar(encTotal, positive(encCount)))
	}
	return loss
}

// positive is n, or 1 for a count of nothing (n ≤ 0).
func positive(n float64) float64 {
	if n <= 0 {
		return 1
	}
	return n
}

// Coin is the self-conditioning coin u < SelfCond, u ~ U(0, 1) from key — drawn once per
// micro-batch when the coin is shared by its examples (self_conditioning_draw step), as
// Choose draws it per example.
func (o Objective) Coin(key *mx.Array) bool {
	switch {
	case o.SelfCond >= 1:
		return true
	case o.SelfCond <= 0:
		return false
	}
	return float64(mx.Uniform(key, []int{1}, 0, 1, mx.Float32).Float32s()[0]) < o.SelfCond
}
