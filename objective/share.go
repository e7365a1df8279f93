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

// ShareLoss is one part of a batch loss whose examples are spread over several
// processes: Σ_b scale_b·Sum_b over this part's terms, divided by max(count, 1) where
// count is the scored positions of the whole batch. The parts of a batch add up to its
// BatchLoss, and so do their gradients; with every example in one part it is BatchLoss.
func ShareLoss(terms []Terms, count float64) *mx.Array {
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
	}
	return mx.DivScalar(total, max(count, 1))
}
