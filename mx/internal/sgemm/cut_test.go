package sgemm

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestCutPanelPairs: on many workers a single block of rows keeps tiles two panels wide
// (for the wide kernel) and cuts its rows instead, sharing one packed A, before it falls
// back to one-panel tiles; without a wide kernel, and on few workers, the tiles are cut
// as before.
func TestCutPanelPairs(t *testing.T) {
	noWide := kernels{tile6x16: kernelGo}
	withWide := noWide
	withWide.pair = func(int, []float32, []float32, []float32, int, []float32, int, bool) {}
	withWide.wide = func(int, []float32, []float32, []float32, []float32, int, []float32, int, bool) {}
	withWide.edge = func(int, []float32, []float32, []float32, []float32, int, []float32, int, bool, int, int) {}
	pack := func([]float32, int, int, int, int) {}
	for _, tc := range []struct {
		name                   string
		ks                     kernels
		m, n, k, workers       int
		tm, tn, tilesM, tilesN int
		sharesA                bool
	}{
		{"bench linear, 16 workers", withWide, 384, 512, 512, 16, 192, 32, 2, 16, true},
		{"bench linear, narrow", withWide, 384, 256, 512, 16, 96, 32, 4, 8, true},
		{"bench linear, 2 workers", withWide, 384, 512, 512, 2, 384, 128, 1, 4, true},
		{"wide output, 16 workers", withWide, 384, 1024, 512, 16, 384, 32, 1, 32, true},
		{"expert rows, 16 workers", withWide, 48, 512, 512, 16, 48, 16, 1, 32, true},
		{"no wide kernel, 16 workers", noWide, 384, 512, 512, 16, 384, 16, 1, 32, true},
	} {
		p := &problem{ta: NoTrans, tb: Transposed, m: tc.m, n: tc.n, k: tc.k, pack: pack}
		plans, _, _, _ := planBatch([]*problem{p}, tc.ks, tc.workers)
		pl := plans[0]
		if pl.tm != tc.tm || pl.tn != tc.tn || pl.tilesM != tc.tilesM || pl.tilesN != tc.tilesN || pl.sharesA() != tc.sharesA {
			t.Errorf("%s: tiles %d×%d (%d×%d of them), shared A %v; want %d×%d (%d×%d), %v", tc.name,
				pl.tm, pl.tn, pl.tilesM, pl.tilesN, pl.sharesA(), tc.tm, tc.tn, tc.tilesM, tc.tilesN, tc.sharesA)
		}
	}
}

// TestRowTilesSharingA: row tiles of a shared packed A give Gemm's bits on one worker —
// a decoded 4-bit B and a float32 one, every transpose of A — and each element of C is
// finished exactly once.
func TestRowTilesSharingA(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for _, s := range [][3]int{{384, 512, 512}, {390, 320, 256}, {200, 130, 96}} {
		m, k, n := s[0], s[1], s[2]
		w := newQ4(rng, n, k)
		dense := w.dense()
		for _, ta := range []Trans{NoTrans, Transposed} {
			a := randMat(rng, m*k)
			lda := k
			if ta {
				lda = m
			}
			want := make([]float32, m*n)
			(&problem{ta: ta, tb: Transposed, m: m, n: n, k: k, a: a, lda: lda, b: dense, ldb: k, c: want, ldc: n}).run(defaultKernels(), 1)
			for _, workers := range []int{3, 16} {
				for name, pk := range map[string]PackFunc{"q4": w.pack, "dense": nil} {
					t.Run(fmt.Sprintf("M%d_K%d_N%d_ta%v_w%d_%s", m, k, n, ta, workers, name), func(t *testing.T) {
						got := randMat(rng, m*n) // garbage: every element must be overwritten
						rec := newFinishRecorder(got, m, n)
						p := &problem{ta: ta, tb: Transposed, m: m, n: n, k: k, a: a, lda: lda, b: dense, ldb: k, c: got, ldc: n, pack: pk, then: rec.then}
						if pk != nil {
							p.b, p.ldb = nil, 0
						}
						p.run(defaultKernels(), workers)
						rec.once(t)
						if !slices.Equal(got, want) {
							t.Fatal("differs from the product on one worker")
						}
					})
				}
			}
		}
	}
}
