package sgemm

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// Matmul sets c[M, N] = a[M, K]·b[K, N], all three contiguous and row-major, through
// Gemm: the tests' plain entry point. It panics if a slice is too short for its shape.
func Matmul(c, a, b []float32, m, k, n int) {
	Gemm(NoTrans, NoTrans, m, n, k, a, k, b, n, c, n, false)
}

// sameAcrossKernels runs each shape through two kernel sets and wants bitwise equal
// products — for all four transposes, with and without accumulation, on 1 and 3 workers,
// with pads (A, B, C) added to the leading strides. what names the difference in a failure.
func sameAcrossKernels(t *testing.T, rng *rand.Rand, with, without kernels, shapes [][3]int, pads [3]int, what string) {
	t.Helper()
	for _, s := range shapes {
		m, k, n := s[0], s[1], s[2]
		a, b := randMat(rng, m*k), randMat(rng, k*n)
		c0 := randMat(rng, m*n)
		for _, tr := range [][2]Trans{{NoTrans, NoTrans}, {Transposed, NoTrans}, {NoTrans, Transposed}, {Transposed, Transposed}} {
			for _, acc := range []bool{false, true} {
				for _, workers := range []int{1, 3} {
					g := gemmCase{m: m, k: k, n: n, ta: tr[0], tb: tr[1], padA: pads[0], padB: pads[1], padC: pads[2], a: a, b: b, kern: with, workers: workers}
					if acc {
						g.c0 = c0
					}
					got := g.run(t)
					g.kern = without
					if want := g.run(t); !slices.Equal(got, want) {
						t.Fatalf("M=%d K=%d N=%d trans %v acc %v workers %d: %s", m, k, n, tr, acc, workers, what)
					}
				}
			}
		}
	}
}
