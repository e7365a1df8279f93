package goeng_test

import (
	"math/rand/v2"
	"testing"

	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
)

// BenchmarkBinary times the elementwise ops that dominate a training step: same-shape
// add/multiply (residuals, GeGLU), a row against a keepdims column, and a scalar.
func BenchmarkBinary(b *testing.B) {
	e := mxtest.Go(b)
	rng := rand.New(rand.NewPCG(1, 1))
	x := mxtest.RandN(e, rng, 256, 1024)
	y := mxtest.RandN(e, rng, 256, 1024)
	col := mxtest.RandN(e, rng, 256, 1)
	for _, c := range []struct {
		name string
		f    func() *mx.Array
	}{
		{"add", func() *mx.Array { return mx.Add(x, y) }},
		{"multiply", func() *mx.Array { return mx.Multiply(x, y) }},
		{"column", func() *mx.Array { return mx.Multiply(x, col) }},
		{"scalar", func() *mx.Array { return mx.MulScalar(x, 0.5) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(256 * 1024 * 4)
			for b.Loop() {
				c.f()
			}
		})
	}
}
