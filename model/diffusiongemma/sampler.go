package diffusiongemma

import (
	"math"

	"github.com/dgtune/dgtune/mx"
)

// This file holds the arithmetic of one denoising step (diffusiongemma.md §4.3, §4.4), written
// with mx ops over the last (canvas) axis so it runs unchanged on every engine and for any
// leading batch shape. Nothing here knows about the model.

// CanvasLength is the block length of §4.2b: the model's canvas when full is set, otherwise
// the tokens still wanted, clamped to [minCanvas, maxCanvas]. maxCanvas ≤ 0 means the model
// canvas, and neither bound may exceed it; minCanvas is itself capped by the effective maximum
// (mlx-vlm clamps the same way, so a 16-token model canvas with minCanvas 64 yields 16).
func CanvasLength(remaining, minCanvas, maxCanvas, modelCanvas int, full bool) int {
	if full {
		return modelCanvas
	}
	hi := modelCanvas
	if maxCanvas > 0 {
		hi = min(hi, maxCanvas)
	}
	lo := min(hi, max(minCanvas, 1))
	return min(hi, max(remaining, lo))
}

// ScheduleTemperature is the linear logit temperature of §4.3 step 2 at countdown step
// (steps at the first pass, 1 at the last): t_min + (t_max − t_min)·step/steps.
func ScheduleTemperature(step, steps int, tMin, tMax float64) float64 {
	return tMin + (tMax-tMin)*(float64(step)/float64(steps))
}

// ProcessLogits divides logits by the schedule temperature. It divides rather than multiplying
// by 1/T because the two differ by an ULP, enough to flip a 0.9 threshold decision (§3.1).
func ProcessLogits(logits *mx.Array, temperature float64) *mx.Array {
	return mx.DivScalar(mx.AsType(logits, mx.Float32), temperature)
}

// TokenProbability is exp(P[ids] − logsumexp(P)) per position: the probability, under the
// processed logits P [..., V], of the token ids [...] chosen at each position.
func TokenProbability(processed, ids *mx.Array) *mx.Array {
	p := mx.AsType(processed, mx.Float32)
	chosen := mx.Squeeze(mx.TakeAlongAxis(p, mx.ExpandDims(ids, -1), -1), -1)
	return mx.Exp(mx.Subtract(chosen, mx.LogSumExp(p, false, -1)))
}

// TokenEntropy is −Σ_v p_v log p_v per position with p = softmax(P), computed from log-probs so
// that vanishing probabilities contribute 0 rather than 0·(−∞).
func TokenEntropy(processed *mx.Array) *mx.Array {
	p := mx.AsType(processed, mx.Float32)
	logp := mx.Subtract(p, mx.LogSumExp(p, true, -1))
	return mx.Negative(mx.Sum(mx.Multiply(mx.Exp(logp), logp), false, -1))
}

// ConfidenceMask is §4.4's acceptance rule for the confidence-threshold sampler: accept every
// unrevealed position whose confidence reaches tau; if positions remain unrevealed but none
// qualifies, accept the single most confident of them, so each step reveals at least one
// position and a block ends in at most L steps. conf is float [..., L]; unrevealed is bool of
// the same shape; the result is bool.
func ConfidenceMask(conf, unrevealed *mx.Array, tau float64) *mx.Array {
	e := conf.Engine()
	n := conf.Dim(-1)
	transfer := mx.LogicalAnd(unrevealed, mx.GreaterEqual(conf, mx.Scalar(e, tau, conf.DType())))
	needForce := mx.LogicalAnd(mx.Any(unrevealed, true, -1), mx.LogicalNot(mx.Any(transfer, true, -1)))
	masked := mx.Where(unrevealed, conf, mx.Scalar(e, math.Inf(-1), conf.DType()))
	best := mx.Argmax(masked, -1, true)
	forced := mx.LogicalAnd(mx.Equal(mx.Arange(e, 0, float64(n), 1, mx.Int32), best), needForce)
	return mx.LogicalOr(transfer, forced)
}

// EntropyMask is §4.4's entropy-budget rule: sort positions by ascending entropy h [..., L],
// and accept sorted position k iff (Σ_{j≤k} h_j) − max_{j≤k} h_j ≤ beta — the entropy of
// everything accepted except its most uncertain member stays within the budget. The
// lowest-entropy position is always accepted (its excess is 0). Returns bool [..., L] in the
// original order.
func EntropyMask(h *mx.Array, beta float64) *mx.Array {
	order := mx.Argsort(h, -1)
	sorted := mx.TakeAlongAxis(h, order, -1)
	excess := mx.Subtract(mx.Cumsum(sorted, -1, false, true), mx.Cummax(sorted, -1, false, true))
	accept := mx.LessEqual(excess, mx.Scalar(h.Engine(), beta, h.DType()))
	// Sorted slot k holds position order[k]; position j therefore reads slot inverse[j].
	inverse := mx.Argsort(order, -1)
	return mx.TakeAlongAxis(accept, inverse, -1)
}

// keySequence hands out one fresh key per random draw the way MLX's global generator does
// after mx.random.seed: split the state in two, keep the first half, use the second. With
// seed 0 the first draw therefore reproduces the reference goldens' initial canvas.
type keySequence struct {
	state *mx.Array
}

func newKeySequence(e mx.Engine, seed uint64) *keySequence {
	return &keySequence{state: mx.Key(e, seed)}
}

func (k *keySequence) next() *mx.Array {
	ks := mx.SplitKey(k.state, 2)
	k.state.Free()
	k.state = ks[0]
	return ks[1]
}
