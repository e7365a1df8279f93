package threefry

import (
	"fmt"
	"math"
	"sort"
)

// layout is a row-major logits shape seen around the sampling axis:
// outer distributions before it, n categories along it, inner after it.
type layout struct {
	outer, n, inner int
}

func newLayout(what string, logits []float32, shape []int, axis int) (layout, error) {
	nd := len(shape)
	if nd == 0 {
		return layout{}, fmt.Errorf("%s: logits must have at least one dimension", what)
	}
	ax := axis
	if ax < 0 {
		ax += nd
	}
	if ax < 0 || ax >= nd {
		return layout{}, fmt.Errorf("%s: invalid axis %d for logits with %d dimensions", what, axis, nd)
	}
	size := 1
	for _, d := range shape {
		if d < 0 {
			return layout{}, fmt.Errorf("%s: negative dimension %d in shape %v", what, d, shape)
		}
		if d > 0 && size > math.MaxInt/d {
			return layout{}, fmt.Errorf("%s: shape %v overflows", what, shape)
		}
		size *= d
	}
	if size != len(logits) {
		return layout{}, fmt.Errorf("%s: shape %v holds %d logits, got %d", what, shape, size, len(logits))
	}
	if shape[ax] == 0 {
		return layout{}, fmt.Errorf("%s: axis %d of shape %v has no categories", what, axis, shape)
	}
	l := layout{outer: 1, n: shape[ax], inner: 1}
	for _, d := range shape[:ax] {
		l.outer *= d
	}
	for _, d := range shape[ax+1:] {
		l.inner *= d
	}
	return l, nil
}

// Categorical mirrors mlx.core.random.categorical(logits, axis, key) as of
// MLX v0.32.1 for row-major logits of the given shape. The result has the
// shape of logits without axis, row-major. A single distribution with
// more than one dimension (every dimension but axis is 1) is sampled by
// inverse CDF; anything else by Gumbel-max.
func Categorical(k Key, logits []float32, shape []int, axis int) ([]uint32, error) {
	const what = "threefry: categorical"
	l, err := newLayout(what, logits, shape, axis)
	if err != nil {
		return nil, err
	}
	if l.outer*l.inner == 1 && len(shape) > 1 {
		return inverseCDF(k, logits, 1)
	}
	return gumbelMax(k, logits, l, 1)
}

// GumbelMax is categorical sampling by argmax(logits + gumbel) along axis,
// what MLX releases before v0.32.1 do for every input. Output as Categorical.
func GumbelMax(k Key, logits []float32, shape []int, axis int) ([]uint32, error) {
	l, err := newLayout("threefry: gumbel max", logits, shape, axis)
	if err != nil {
		return nil, err
	}
	return gumbelMax(k, logits, l, 1)
}

// gumbelMax draws one Gumbel value per (outer, category, inner, sample) in
// that row-major order, which is MLX's gumbel shape with the category axis
// inserted at axis, and keeps the first maximum of logits + noise.
func gumbelMax(k Key, logits []float32, l layout, num int) ([]uint32, error) {
	g, err := Gumbel(k, l.outer*l.n*l.inner*num)
	if err != nil {
		return nil, fmt.Errorf("threefry: categorical: %w", err)
	}
	out := make([]uint32, l.outer*l.inner*num)
	for o := 0; o < l.outer; o++ {
		for in := 0; in < l.inner; in++ {
			for s := 0; s < num; s++ {
				gAt := func(c int) float32 { return g[((o*l.n+c)*l.inner+in)*num+s] }
				lAt := func(c int) float32 { return logits[(o*l.n+c)*l.inner+in] }
				best, bestV := 0, lAt(0)+gAt(0)
				for c := 1; c < l.n; c++ {
					// Strictly greater keeps the first maximum, like MLX's
					// argmax; NaNs never win.
					if v := lAt(c) + gAt(c); v > bestV {
						best, bestV = c, v
					}
				}
				out[(o*l.inner+in)*num+s] = uint32(best)
			}
		}
	}
	return out, nil
}

// inverseCDF is MLX's single-distribution sampler: weights exp(x - max)
// (or an indicator of the maxima when the max is infinite), an exclusive
// float32 prefix sum as the CDF, uniforms scaled by the total, and
// searchsorted(cdf, u, right) - 1. Sums run left to right.
func inverseCDF(k Key, logits []float32, num int) ([]uint32, error) {
	// A NaN logit makes the max NaN, as MLX's max propagates it; every
	// weight is then NaN and the draw is meaningless, as in MLX.
	m := logits[0]
	for _, x := range logits[1:] {
		if x != x || x > m {
			m = x
		}
		if m != m {
			break
		}
	}
	w := make([]float32, len(logits))
	for i, x := range logits {
		switch {
		case math.IsInf(float64(m), 0) && x == m:
			w[i] = 1
		case math.IsInf(float64(m), 0):
			w[i] = 0
		default:
			w[i] = exp32(x - m)
		}
	}
	cdf := make([]float32, len(w))
	var total float32
	for i, v := range w {
		cdf[i] = total
		total += v
	}
	u, err := Uniform(k, num, 0, 1)
	if err != nil {
		return nil, fmt.Errorf("threefry: categorical: %w", err)
	}
	out := make([]uint32, num)
	for i, v := range u {
		t := v * total
		// Count of cdf entries <= t; cdf[0] = 0 <= t makes it at least 1
		// for any non-NaN t.
		c := sort.Search(len(cdf), func(j int) bool { return cdf[j] > t })
		out[i] = uint32(c) - 1
	}
	return out, nil
}
