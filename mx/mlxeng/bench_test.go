//go:build mlx

package mlxeng_test

import (
	"testing"

	"github.com/dgtune/dgtune/mx"
)

// BenchmarkOpOverhead is the cost of one small op through cgo (graph building, handle
// bookkeeping, scope tracking), evaluated every 100 ops.
func BenchmarkOpOverhead(b *testing.B) {
	m := mlxEngine(b)
	x := mx.FromFloat32(m, []float32{1, 2, 3, 4}, 4)
	for b.Loop() {
		mx.Tidy(m, func() []*mx.Array {
			y := x
			for range 100 {
				y = mx.AddScalar(y, 1)
			}
			mx.Eval(y)
			return nil
		})
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*200), "ns/op-call")
}

// BenchmarkEval is the round trip of evaluating and reading one small array, which
// runs on the engine's home thread.
func BenchmarkEval(b *testing.B) {
	m := mlxEngine(b)
	x := mx.FromFloat32(m, []float32{1, 2, 3, 4}, 4)
	for b.Loop() {
		mx.Tidy(m, func() []*mx.Array {
			_ = mx.AddScalar(x, 1).Float32s()
			return nil
		})
	}
}
