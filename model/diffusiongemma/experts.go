package diffusiongemma

import "github.com/dgtune/dgtune/mx"

// sortedExperts is the MoE branch Σ_k w_k · GeGLU-expert_{idx_k}(z) for z [B, S, H], idx
// and w [B, S, k], with the (token, slot) pairs sorted by expert, as mlx-lm's SwitchGLU
// does for large batches (and the reference's SortedDiffExperts): the T·k pairs are
// ordered by expert with a stable argsort, the token rows gathered into that order, the
// fused gate/up and the down projections run as one contiguous product per expert
// (gather_mm / gather_qmm with sorted_indices), and the outputs are put back in (token,
// slot) order by the inverse permutation before the weighted sum (mx.ExpertOrder gives
// both permutations: where the engine has it, in one pass). No expert weight is
// ever copied per token, for dense and quantized experts alike, and the backward pass
// scatters through the same permutations (the VJPs of Take). The indices are constants.
func sortedExperts(gateUp, down *ExpertWeight, z, idx, w *mx.Array) *mx.Array {
	b, s, h := z.Dim(0), z.Dim(1), z.Dim(2)
	k := idx.Dim(-1)
	e := z.Engine()
	flat := mx.Reshape(idx, b*s*k)
	order, inv := mx.ExpertOrder(flat, gateUp.Experts())                     // sorted position → (token, slot), and back
	sortedIdx := mx.Take(flat, order, 0)                                     // non-decreasing experts
	tokens := mx.FloorDivide(order, mx.Scalar(e, float64(k), order.DType())) // token of each sorted pair
	xs := mx.Take(mx.Reshape(z, b*s, h), tokens, 0)                          // [T·k, H]

	gu := gateUp.Gather(xs, sortedIdx, true)             // [T·k, 2I]: gate, then up
	y := down.Gather(mx.GeGLUSplit(gu), sortedIdx, true) // [T·k, H]

	// Back to (token, slot) order by the inverse permutation, weighted and summed over the
	// slots in one op.
	return mx.TakeWeightedSum(y, mx.Reshape(inv, b, s, k), w)
}
