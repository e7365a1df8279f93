package goeng_test

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/goeng"
	"github.com/dgtune/dgtune/mx/mxtest"
)

// normRoPEComposed is mx.NormRoPE's definition, op by op.
func normRoPEComposed(x, w *mx.Array, eps, scale float64, offset int, freqs *mx.Array) *mx.Array {
	return mx.RoPE(mx.Transpose(mx.RMSNorm(x, w, eps), 0, 2, 1, 3), x.Dim(3), false, 0, scale, offset, freqs)
}

// TestNormRoPEMatchesComposition wants the go engine's one-pass NormRoPE to give the
// composition's values and its cotangents of x and of the weight (traced or not) to the
// bit, at the bench preset's query shape and at small odd ones, with an offset and a scale.
func TestNormRoPEMatchesComposition(t *testing.T) {
	for _, c := range []struct {
		b, l, h, d, offset int
		scale              float64
		traceW             bool
	}{
		{1, 384, 8, 64, 0, 1, false},
		{2, 5, 3, 8, 7, 1, true},
		{1, 33, 2, 18, 128, 0.25, true},
		{1, 1, 1, 2, 0, 1, false},
	} {
		t.Run(fmt.Sprintf("%dx%dx%dx%d/offset%d", c.b, c.l, c.h, c.d, c.offset), func(t *testing.T) {
			e := goeng.New()
			rng := newRand(uint64(c.l*c.d + 1))
			x := mxtest.RandN(e, rng, c.b, c.l, c.h, c.d)
			w := mx.AddScalar(mx.MulScalar(mxtest.RandN(e, rng, c.d), 0.1), 1)
			freqs := make([]float32, c.d/2)
			for i := range freqs {
				freqs[i] = float32(math.Pow(10000, 2*float64(i)/float64(c.d)))
			}
			f := fa(e, freqs, c.d/2)
			g := mxtest.RandN(e, rng, c.b, c.h, c.l, c.d)
			run := func(op func(x, w *mx.Array) *mx.Array) (y []float32, grads [][]float32) {
				argnums := []int{0}
				if c.traceW {
					argnums = append(argnums, 1)
				}
				vals, gs := mx.ValueAndGrad(func(a []*mx.Array) []*mx.Array {
					y := op(a[0], a[1])
					return []*mx.Array{mx.Sum(mx.Multiply(y, g), false), y}
				}, argnums...)([]*mx.Array{x, w})
				for _, gr := range gs {
					grads = append(grads, gr.Float32s())
				}
				return vals[1].Float32s(), grads
			}
			yf, gf := run(func(x, w *mx.Array) *mx.Array { return mx.NormRoPE(x, w, 1e-6, c.scale, c.offset, f) })
			yc, gc := run(func(x, w *mx.Array) *mx.Array { return normRoPEComposed(x, w, 1e-6, c.scale, c.offset, f) })
			if !bitsEqual(yf, yc) {
				t.Errorf("values differ from the composition")
			}
			if len(gf) != len(gc) {
				t.Fatalf("%d gradients, want %d", len(gf), len(gc))
			}
			for i := range gf {
				if !bitsEqual(gf[i], gc[i]) {
					t.Errorf("gradient %d differs from the composition", i)
				}
			}
		})
	}
}

// TestNormRoPEFallsBack wants operands the one-pass kernel does not take (bfloat16) to get
// the composition's values, shape and dtype.
func TestNormRoPEFallsBack(t *testing.T) {
	e := goeng.New()
	rng := newRand(9)
	x := mx.AsType(mxtest.RandN(e, rng, 1, 4, 2, 8), mx.BFloat16)
	w := mx.AsType(mx.AddScalar(mxtest.RandN(e, rng, 8), 1), mx.BFloat16)
	f := fa(e, []float32{1, 10, 100, 1000}, 4)
	got, want := mx.NormRoPE(x, w, 1e-6, 1, 3, f), normRoPEComposed(x, w, 1e-6, 1, 3, f)
	if got.DType() != want.DType() || !slices.Equal(got.Shape(), want.Shape()) || !bitsEqual(got.Float32s(), want.Float32s()) {
		t.Errorf("bfloat16 NormRoPE %v %v differs from the composition %v %v", got.DType(), got.Shape(), want.DType(), want.Shape())
	}
}

// bitsEqual says whether a and b hold the same float32 bit patterns.
func bitsEqual(a, b []float32) bool {
	return slices.EqualFunc(a, b, func(x, y float32) bool { return math.Float32bits(x) == math.Float32bits(y) })
}
