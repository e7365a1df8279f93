package goeng

import (
	"runtime"
	"testing"

	"github.com/dgtune/dgtune/mx"
)

// BenchmarkRMSNormOutput is rms_norm over a step's rows (384 × 512, 2 threads in the bench
// preset) written into an output reused from one call to the next against a fresh one
// from uninit.Float32s, as every op's output is: how much of an element-wise op's time is
// its fresh output rather than its arithmetic. "fresh" alone collects every few calls (its
// heap goal is 4 MB); "fresh-bigheap" runs under a step-sized live heap and is the one to
// read. On the device's Xeon at 2 threads: reused 39-57 µs, fresh 172-232, fresh-bigheap
// 93-107 (README, issue 28's eighth round).
func BenchmarkRMSNormOutput(b *testing.B) {
	const rows, d = 384, 512
	in, w := make([]float32, rows*d), make([]float32, d)
	for i := range in {
		in[i] = float32(i%97) / 50
	}
	for i := range w {
		w[i] = 1 + float32(i%5)/10
	}
	out, inv := make([]float32, rows*d), make([]float32, rows)
	b.Run("reused", func(b *testing.B) {
		for b.Loop() {
			rmsNormInto(out, inv, in, w, d, 1e-6)
		}
	})
	x, wt := newTensor([]int{rows, d}, mx.Float32, in), newTensor([]int{d}, mx.Float32, w)
	fresh := func(b *testing.B) {
		for b.Loop() {
			rmsNormKernel(x, wt, 1e-6)
		}
	}
	b.Run("fresh", fresh)
	// A step's live heap is hundreds of MB, so its collections are far rarer than this
	// benchmark's alone (a 4 MB heap goal: one every ~3 calls); a live ballast of that
	// size separates the cost of collecting from the cost of writing fresh memory.
	b.Run("fresh-bigheap", func(b *testing.B) {
		ballast := make([]float32, 192<<20)
		fresh(b)
		runtime.KeepAlive(ballast)
	})
}
