package objective

import (
	"fmt"

	dg "github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/mx"
)

// Dense is one example's reference step as arrays whose shapes depend only on the
// prompt and canvas lengths — what a compiled step takes as its inputs, since a replay
// cannot read host data: ExampleTerms keeps only the scored rows (a shape that changes
// with every draw), Dense scores every canvas row with its 0/1 weight.
type Dense struct {
	Context *mx.Array // [1, P] int32: the prompt and the target's blocks before the canvas
	Canvas  *mx.Array // [1, L] int32: what the decoder sees
	Target  *mx.Array // [1, L, 1] int32: the clean canvas
	Weights *mx.Array // [1, L] float32: the per-position loss weights
	// Norm is the example's scale over the batch's count (scale/max(count, 1) for one
	// example), a [1] float32 array: the loss is Norm·Σ wᵢ·ceᵢ.
	Norm *mx.Array
}

// DenseSupported reports whether an example's step has a Dense form: the reference
// step (one pass over context and canvas) of an objective without encoder loss,
// self-conditioning or images.
func (o Objective) DenseSupported(ex Example, c Corruption) bool {
	return o.EncoderWeight == 0 && !c.SelfCond && len(ex.Images) == 0
}

// DenseInputs builds the Dense arrays of one example and corruption; count is the
// denoising count its loss is divided by (Count(c) for a batch of one).
func (o Objective) DenseInputs(e mx.Engine, ex Example, c Corruption, count float64) (Dense, error) {
	if !o.DenseSupported(ex, c) {
		return Dense{}, fmt.Errorf("objective: the step has no dense form (encoder loss, self-conditioning or images)")
	}
	start, err := o.canvasStart(ex, c)
	if err != nil {
		return Dense{}, err
	}
	l := len(c.Canvas)
	ctx := append(append([]int32(nil), ex.Prompt...), ex.Target[:start]...)
	scale := 1.0
	if o.Weighting == InvT && c.T > 0 {
		scale = 1 / c.T
	}
	return Dense{
		Context: mx.FromInt32(e, ctx, 1, len(ctx)),
		Canvas:  mx.FromInt32(e, c.Canvas, 1, l),
		Target:  mx.FromInt32(e, ex.Target[start:start+l], 1, l, 1),
		Weights: mx.FromFloat32(e, o.weights(c), 1, l),
		Norm:    mx.FromFloat32(e, []float32{float32(scale / max(count, 1))}, 1),
	}, nil
}

// Arrays lists the Dense arrays in the order DenseLoss takes them.
func (d Dense) Arrays() []*mx.Array {
	return []*mx.Array{d.Context, d.Canvas, d.Target, d.Weights, d.Norm}
}

// DenseLoss is Norm·Σ wᵢ·ceᵢ over the canvas from the arrays of Dense.Arrays: the
// reference step's loss share, equal to ShareLoss of ExampleTerms up to summation order.
func DenseLoss(m *dg.Model, a []*mx.Array) *mx.Array {
	ctx, canvas, target, w, norm := a[0], a[1], a[2], a[3], a[4]
	logits := m.Logits(m.EncodeDecodeHidden(ctx, canvas))
	picked := mx.Squeeze(mx.TakeAlongAxis(logits, target, -1), -1)
	ce := mx.Subtract(mx.LogSumExp(logits, false, -1), picked)
	return mx.Multiply(mx.Sum(mx.Multiply(ce, w), false), norm)
}
