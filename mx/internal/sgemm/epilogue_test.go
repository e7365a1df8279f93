package sgemm

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
)

// TestGemmThen: the epilogue sees each block of C finished — bitwise Gemm's product —
// and the blocks cover C exactly once, on the tile, skinny (one panel wide), row
// (few rows) and K = 0 paths, for every transpose, on one goroutine and several.
func TestGemmThen(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, s := range [][3]int{{256, 8, 512}, {300, 520, 70}, {256, 512, 8}, {5, 300, 200}, {33, 0, 17}, {1, 1, 1}} {
		m, k, n := s[0], s[1], s[2]
		a, b := randMat(rng, m*k), randMat(rng, k*n)
		for _, tr := range [][2]Trans{{NoTrans, NoTrans}, {Transposed, NoTrans}, {NoTrans, Transposed}, {Transposed, Transposed}} {
			for _, workers := range []int{1, 4} {
				t.Run(fmt.Sprintf("M%d_K%d_N%d_%v_w%d", m, k, n, tr, workers), func(t *testing.T) {
					lda, ldb := k, n
					if tr[0] {
						lda = m
					}
					if tr[1] {
						ldb = k
					}
					want := make([]float32, m*n)
					pw := problem{ta: tr[0], tb: tr[1], m: m, n: n, k: k, a: a, lda: lda, b: b, ldb: ldb, c: want, ldc: n}
					pw.run(defaultKernels(), workers)

					c := randMat(rng, m*n) // garbage: every element must be overwritten
					rec := newFinishRecorder(c, m, n)
					p := problem{ta: tr[0], tb: tr[1], m: m, n: n, k: k, a: a, lda: lda, b: b, ldb: ldb, c: c, ldc: n, then: rec.then}
					if err := p.check(); err != nil {
						t.Fatal(err)
					}
					p.run(defaultKernels(), workers)
					if !slices.Equal(rec.once(t), want) {
						t.Fatal("the epilogue saw values other than Gemm's product")
					}
				})
			}
		}
	}
}

// TestGemmPackedThenAndOnCaller: GemmPackedThen's epilogue sees each block of C finished
// — bitwise GemmPacked's product — exactly once, and GemmOnCaller gives Gemm's bits on
// every path (tile, thin, skinny, row) without starting goroutines of its own.
func TestGemmPackedThenAndOnCaller(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, s := range [][3]int{{384, 512, 200}, {40, 64, 33}, {256, 8, 512}, {5, 30, 70}, {300, 70, 8}} {
		m, k, n := s[0], s[1], s[2]
		a, b := randMat(rng, m*k), randMat(rng, k*n) // b is op(B)ᵀ: n rows of k
		pack := func(dst []float32, pc, kb, j0, nt int) { packB(dst, b, k, Transposed, pc, kb, j0, nt) }
		t.Run(fmt.Sprintf("M%d_K%d_N%d", m, k, n), func(t *testing.T) {
			want := make([]float32, m*n)
			GemmPacked(NoTrans, m, n, k, a, k, pack, want, n, false)
			c := randMat(rng, m*n)
			rec := newFinishRecorder(c, m, n)
			GemmPackedThen(NoTrans, m, n, k, a, k, pack, c, n, rec.then)
			if !slices.Equal(rec.once(t), want) {
				t.Fatal("the packed epilogue saw values other than GemmPacked's product")
			}
			for _, acc := range []bool{false, true} {
				c0 := randMat(rng, m*n)
				gemm, here := slices.Clone(c0), slices.Clone(c0)
				Gemm(NoTrans, Transposed, m, n, k, a, k, b, k, gemm, n, acc)
				GemmOnCaller(NoTrans, Transposed, m, n, k, a, k, b, k, here, n, acc)
				if !slices.Equal(here, gemm) {
					t.Fatalf("acc %v: GemmOnCaller differs from Gemm", acc)
				}
			}
		})
	}
}

// finishRecorder is an epilogue for C [m, n] (row stride n) that records each element's
// value when its block is finished and how many times it is finished.
type finishRecorder struct {
	mu   sync.Mutex
	c    []float32
	n    int
	seen []float32
	hits []int
}

func newFinishRecorder(c []float32, m, n int) *finishRecorder {
	return &finishRecorder{c: c, n: n, seen: make([]float32, m*n), hits: make([]int, m*n)}
}

func (r *finishRecorder) then(i0, i1, j0, j1 int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := i0; i < i1; i++ {
		for j := j0; j < j1; j++ {
			r.seen[i*r.n+j] = r.c[i*r.n+j]
			r.hits[i*r.n+j]++
		}
	}
}

// once fails the test unless every element was finished exactly once, and returns the
// values the epilogue saw.
func (r *finishRecorder) once(t *testing.T) []float32 {
	t.Helper()
	for i, h := range r.hits {
		if h != 1 {
			t.Fatalf("element (%d, %d) finished %d times, want once", i/r.n, i%r.n, h)
		}
	}
	return r.seen
}
