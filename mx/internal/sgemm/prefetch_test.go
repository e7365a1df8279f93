package sgemm

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// withoutPrefetch is ks with the L2 hints of the next B block turned off.
func withoutPrefetch(ks kernels) kernels {
	ks.prefetch = false
	return ks
}

// TestPrefetchSameBits: hinting the next block of B (and claiming the next tile early to
// hint its first block) changes no value — single products with one and several k-blocks,
// edge rows and columns, every transpose, and batches of expert-sized products whose tiles
// are claimed ahead across plans, on 1, 2 and 5 workers.
func TestPrefetchSameBits(t *testing.T) {
	ks := defaultKernels()
	if !ks.prefetch {
		t.Skip("the kernels here do not prefetch")
	}
	rng := rand.New(rand.NewPCG(31, 32))
	sameAcrossKernels(t, rng, ks, withoutPrefetch(ks), [][3]int{{48, 512, 512}, {37, 700, 130}, {200, 257, 96}, {13, 64, 40}}, [3]int{0, 3, 1}, "prefetch changed the product")
	for _, tb := range []Trans{NoTrans, Transposed} {
		for _, workers := range []int{1, 2, 5} {
			rows := []int{48, 5, 61, 0, 12, 100, 33}
			run := func(ks kernels) [][]float32 {
				rng := rand.New(rand.NewPCG(33, 34))
				var ps []*problem
				var cs [][]float32
				for _, m := range rows {
					k, n := 520, 272
					a, b := randMat(rng, m*k), randMat(rng, k*n)
					bs, ldb := stored(b, k, n, tb, 2)
					c := make([]float32, m*n)
					cs = append(cs, c)
					ps = append(ps, &problem{tb: tb, m: m, n: n, k: k, a: a, lda: k, b: bs, ldb: ldb, c: c, ldc: n})
				}
				runBatch(ps, ks, workers)
				return cs
			}
			got, want := run(ks), run(withoutPrefetch(ks))
			for i := range got {
				if !slices.Equal(got[i], want[i]) {
					t.Fatalf("tb %v, %d workers: product %d (%d rows) differs with prefetch", tb, workers, i, rows[i])
				}
			}
		}
	}
}

// TestQueueLocate: task t of a batch is tile t − first[i] of the plan i it falls in, row
// tile by row tile, and claim hands out every task once, then the task count.
func TestQueueLocate(t *testing.T) {
	plans := []plan{
		{problem: &problem{m: 100, n: 70}, tm: 24, tn: 32, tilesM: 5, tilesN: 3},
		{problem: &problem{m: 10, n: 16}, tm: 10, tn: 16, tilesM: 1, tilesN: 1},
		{problem: &problem{m: 30, n: 50}, tm: 12, tn: 16, tilesM: 3, tilesN: 4},
	}
	first := []int{0, 15, 16, 28}
	var q queue
	q.plans, q.first, q.tasks, q.workers = plans, first, 28, 2
	for task := range q.tasks {
		pl, i0, mt, j0, nt := q.locate(task)
		i := 0
		for task >= first[i+1] {
			i++
		}
		want := &plans[i]
		r := task - first[i]
		wi0, wj0 := (r/want.tilesN)*want.tm, (r%want.tilesN)*want.tn
		if pl != want || i0 != wi0 || j0 != wj0 || mt != min(want.tm, want.m-wi0) || nt != min(want.tn, want.n-wj0) {
			t.Fatalf("task %d: plan %p rows %d+%d cols %d+%d, want plan %d rows %d cols %d", task, pl, i0, mt, j0, nt, i, wi0, wj0)
		}
	}
}

// BenchmarkExpertsColdB is a mixture-of-experts layer's float32 products — 32 experts of
// 48 rows, 512×512 weights — with each iteration's weights cold (a pool of 128 MiB, far
// past the caches), as a training step streams every expert's weight from memory in the
// forward (B transposed: x·Wᵀ) and the backward (g·W), with and without prefetching.
func BenchmarkExpertsColdB(b *testing.B) {
	const experts, rows, k, n = 32, 48, 512, 512
	const pool = 4 // layers of weights in the pool: 4·32 MiB
	rng := rand.New(rand.NewPCG(41, 42))
	ws := make([][]float32, pool*experts)
	for i := range ws {
		ws[i] = randMat(rng, k*n)
	}
	a := randMat(rng, experts*rows*k)
	c := make([]float32, experts*rows*n)
	for _, tb := range []Trans{Transposed, NoTrans} {
		for _, kn := range []struct {
			name string
			ks   kernels
		}{{"prefetch", defaultKernels()}, {"noprefetch", withoutPrefetch(defaultKernels())}} {
			b.Run(fmt.Sprintf("tb=%v/%s", tb, kn.name), func(b *testing.B) {
				layer := 0
				for b.Loop() {
					ps := make([]*problem, experts)
					for e := range experts {
						ps[e] = &problem{tb: tb, m: rows, n: n, k: k, a: a[e*rows*k:], lda: k, b: ws[layer*experts+e], ldb: n,
							c: c[e*rows*n:], ldc: n}
					}
					runBatch(ps, kn.ks, maxProcs())
					layer = (layer + 1) % pool
				}
				reportGFLOPs(b, 2*float64(experts*rows*k*n))
			})
		}
	}
}

// BenchmarkLinearColdB is a float32 linear's product at the bench preset's training size
// (384 rows through a 512×512 and a 512×1024 weight, B transposed as in the forward x·Wᵀ
// and not as in the backward g·W), one product a call with its weight cold (a pool of
// 128 MiB), as each of a step's linears streams its weight from memory; with and without
// prefetching.
func BenchmarkLinearColdB(b *testing.B) {
	const rows, pool = 384, 128 << 20
	rng := rand.New(rand.NewPCG(43, 44))
	for _, s := range [][2]int{{512, 512}, {512, 1024}} {
		k, n := s[0], s[1]
		ws := make([][]float32, pool/4/(k*n))
		for i := range ws {
			ws[i] = randMat(rng, k*n)
		}
		a := randMat(rng, rows*k)
		c := make([]float32, rows*n)
		for _, tb := range []Trans{Transposed, NoTrans} {
			ldb := n
			if tb {
				ldb = k
			}
			for _, kn := range []struct {
				name string
				ks   kernels
			}{{"prefetch", defaultKernels()}, {"noprefetch", withoutPrefetch(defaultKernels())}} {
				b.Run(fmt.Sprintf("%dx%dx%d/tb=%v/%s", rows, k, n, tb, kn.name), func(b *testing.B) {
					i := 0
					for b.Loop() {
						p := problem{tb: tb, m: rows, n: n, k: k, a: a, lda: k, b: ws[i], ldb: ldb, c: c, ldc: n}
						p.run(kn.ks, maxProcs())
						i = (i + 1) % len(ws)
					}
					reportGFLOPs(b, 2*float64(rows*k*n))
				})
			}
		}
	}
}
