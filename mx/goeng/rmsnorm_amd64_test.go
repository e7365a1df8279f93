//go:build amd64 && !purego

package goeng

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestRMSKernelsMatchGo: the AVX2 rms_norm row kernels give the Go loops' bits — the
// float64 partial sums of dot4 and dot4w, the scaled row and the row of dx — over lengths
// around multiples of 4 and 8.
func TestRMSKernelsMatchGo(t *testing.T) {
	if !rmsAVX2 {
		t.Skip("CPU without AVX2")
	}
	rng := rand.New(rand.NewPCG(51, 52))
	for _, n := range []int{1, 3, 4, 5, 7, 8, 9, 15, 16, 17, 100, 512, 515} {
		g, w, x := randF32(rng, n), randF32(rng, n), randF32(rng, n)
		type result struct {
			d, dw      float64
			scaled, dx []float32
		}
		run := func() result {
			r := result{d: dot4(g, x), dw: dot4w(g, w, x), scaled: make([]float32, n), dx: make([]float32, n)}
			rmsScaleRow(r.scaled, x, w, 0.37)
			rmsGradRow(r.dx, g, w, x, 1.25, -0.031)
			return r
		}
		got := run()
		rmsAVX2 = false
		want := run()
		rmsAVX2 = true
		if math.Float64bits(got.d) != math.Float64bits(want.d) || math.Float64bits(got.dw) != math.Float64bits(want.dw) {
			t.Fatalf("n=%d: dot %v / %v, Go %v / %v", n, got.d, got.dw, want.d, want.dw)
		}
		if at := sameBits(got.scaled, want.scaled); at >= 0 {
			t.Fatalf("n=%d: scaled row element %d differs", n, at)
		}
		if at := sameBits(got.dx, want.dx); at >= 0 {
			t.Fatalf("n=%d: dx element %d differs", n, at)
		}
	}
}
