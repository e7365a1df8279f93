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
// processes: Σ_b scale_b·Sum_b over this part's terms divided by max(count, 1), plus (with
// encoder terms) Σ_b W·EncSum_b divided by max(encCount, 1), where count and encCount are
// the whole batch's. The parts of a batch add up to its BatchLoss, and so do their
// gradients; with every example in one part it is BatchLoss.
func ShareLoss(terms []Terms, count, encCount float64) *mx.Array {
	var total, encTotal *mx.Array
	for _, t := range terms {
		total = addScaled(total, t.Sum, t.Scale)
		if t.EncSum != nil && t.EncWeight != 0 {
			encTotal = addScaled(encTotal, t.EncSum, t.EncWeight)
		}
	}
	loss := mx.DivScalar(total, max(count, 1))
	if encTotal != nil {
		loss = mx.Add(loss, mx.DivScalar(encTotal, max(encCount, 1)))
	}
	return loss
}
