package optim

import (
	"slices"

	"github.com/dgtune/dgtune/mx"
)

// Accumulator sums gradients over micro-batches for grad_accumulation_steps and
// averages them, as mlx-lm's trainer does (sum, then divide by the count). The zero
// value is ready to use; the first Add fixes the names, shapes and dtypes every later
// Add must match.
type Accumulator struct {
	sum Params // arrays the accumulator owns and frees
	n   int
}

// Add adds one micro-batch's gradients. On a mismatch it returns an error listing every
// offending name and leaves the sum unchanged. It never keeps the caller's arrays, so the
// caller may free grads (or let its Tidy free them) right after.
func (a *Accumulator) Add(grads Params) error {
	var bad problems
	for _, n := range grads.Names() {
		if grads[n] == nil {
			bad.addf("gradient %q is nil", n)
		}
	}
	if len(grads) == 0 {
		bad.addf("no gradients")
	}
	if a.sum != nil {
		for _, n := range a.sum.Names() {
			if _, ok := grads[n]; !ok {
				bad.addf("missing gradient %q", n)
			}
		}
		for _, n := range grads.Names() {
			g, s := grads[n], a.sum[n]
			switch {
			case g == nil:
			case s == nil:
				bad.addf("unexpected gradient %q", n)
			case g.Engine() != s.Engine():
				bad.addf("gradient %q is on engine %s, earlier ones on %s", n, g.Engine().Name(), s.Engine().Name())
			case !slices.Equal(g.Shape(), s.Shape()) || g.DType() != s.DType():
				bad.addf("gradient %q is %v %s, earlier ones %v %s", n, g.Shape(), g.DType(), s.Shape(), s.DType())
			}
		}
	}
	if err := bad.err("optim: accumulate", ErrGradMismatch); err != nil {
		return err
	}
	if a.sum == nil {
		// A same-shape reshape is a new handle on the same data: ownership without a copy.
		a.sum = make(Params, len(grads))
		for n, g := range grads {
			a.sum[n] = mx.Reshape(g, g.Shape()...)
		}
		a.n = 1
		return nil
	}
	for _, n := range a.sum.Names() {
		// mlx-lm adds the new gradient to the previous sum: grad + prev_grad.
		prev := a.sum[n]
		a.sum[n] = mx.Add(grads[n], prev)
		prev.Free()
	}
	a.n++
	return nil
}

// Average returns sum/Count as new arrays the caller owns. It does not reset.
func (a *Accumulator) Average() (Params, error) {
	if a.n == 0 {
		return nil, ErrAccumulatorEmpty
	}
	out := make(Params, len(a.sum))
	for n, s := range a.sum {
		// x/1 is exact, so one micro-batch gives the gradient itself, as mlx-lm (which
		// skips the division) does.
		out[n] = mx.DivScalar(s, float64(a.n))
	}
	return out, nil
}

// Reset empties the accumulator and frees its sum.
func (a *Accumulator) Reset() {
	for _, s := range a.sum {
		s.Free()
	}
	*a = Accumulator{}
}
