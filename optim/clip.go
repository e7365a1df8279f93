package optim

import (
	"fmt"
	"maps"
	"math"

	"github.com/dgtune/dgtune/mx"
)

// ClipGradNorm is mlx.optimizers.clip_grad_norm: with the global norm
// ‖g‖ = √(Σ over all gradients of Σ g²), every gradient is multiplied by
// min(maxNorm/(‖g‖ + 1e-6), 1), computed in float32 as MLX does. Note the 1e-6: a norm
// equal to maxNorm is still scaled, by maxNorm/(maxNorm+1e-6). It returns the clipped
// gradients and the norm before clipping. When the scale is 1 the returned map holds
// the input arrays themselves (so do not free grads while using the result); otherwise
// its arrays are new and the caller's.
//
// Differences from MLX, deliberate: squares are summed in float32 whatever the
// gradient dtype (MLX sums half-precision gradients in their own dtype), in sorted name
// order; the scale is cast to each gradient's dtype, so the dtypes are kept; and a
// non-finite norm leaves the gradients unscaled (MLX would turn them all into NaN)
// so the caller can see the norm and stop. Nil gradients pass through.
//
// A negative or NaN maxNorm is a programmer error (the trainer validates its config)
// and panics.
func ClipGradNorm(grads Params, maxNorm float64) (Params, float64) {
	if !(maxNorm >= 0) {
		panic(fmt.Sprintf("optim: clip_grad_norm: max_norm should be >= 0, %g was provided instead", maxNorm))
	}
	out := maps.Clone(grads)
	var names []string
	for _, n := range grads.Names() {
		if grads[n] != nil {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return out, 0
	}
	e := grads[names[0]].Engine()
	res := mx.Tidy(e, func() []*mx.Array {
		var sq *mx.Array
		for _, n := range names {
			s := mx.Sum(mx.Square(mx.AsType(grads[n], mx.Float32)), false)
			if sq == nil {
				sq = s
			} else {
				sq = mx.Add(sq, s)
			}
		}
		return []*mx.Array{mx.Sqrt(sq)}
	})
	norm32 := res[0].Float32s()[0]
	res[0].Free()
	norm := float64(norm32)
	if math.IsNaN(norm) || math.IsInf(norm, 0) {
		return out, norm
	}
	// Explicit float32 conversions round each operation as MLX's float32 arrays do.
	scale := min(float32(float32(maxNorm)/float32(norm32+float32(1e-6))), 1)
	if scale == 1 {
		return out, norm
	}
	for _, n := range names {
		out[n] = mx.MulScalar(grads[n], float64(scale))
	}
	return out, norm
}
