package sgemm

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// TestBatch: every product of a batch — of very different sizes (tiny ones that would run
// on one core alone, row-kernel ones, tile-kernel ones, transposed, accumulating, packed,
// empty, K = 0) — equals that product computed alone by Gemm or GemmPacked, bit for bit,
// at any GOMAXPROCS.
func TestBatch(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	type spec struct {
		m, k, n int
		ta, tb  Trans
		acc     bool
		packed  bool
	}
	specs := []spec{
		{3, 17, 40, NoTrans, NoTrans, false, false},
		{48, 512, 512, NoTrans, Transposed, false, false},
		{16, 300, 64, NoTrans, NoTrans, true, false},
		{200, 64, 100, Transposed, NoTrans, false, false},
		{0, 5, 5, NoTrans, NoTrans, false, false},
		{7, 0, 9, NoTrans, NoTrans, false, false},
		{7, 0, 9, NoTrans, NoTrans, true, false},
		{90, 256, 130, NoTrans, NoTrans, false, true},
		{1, 700, 333, NoTrans, NoTrans, false, false},
	}
	var prods []Product
	var want [][]float32
	for _, s := range specs {
		a, b := randMat(rng, s.m*s.k), randMat(rng, s.k*s.n)
		as, lda := stored(a, s.m, s.k, s.ta, 0)
		bs, ldb := stored(b, s.k, s.n, s.tb, 0)
		c0 := randMat(rng, s.m*s.n)
		ref := slices.Clone(c0)
		p := Product{TA: s.ta, TB: s.tb, M: s.m, N: s.n, K: s.k, A: as, LDA: lda, B: bs, LDB: ldb, LDC: s.n, Accumulate: s.acc}
		if s.packed {
			p.Pack = func(dst []float32, pc, kb, j0, nt int) { packB(dst, bs, ldb, s.tb, pc, kb, j0, nt) }
			GemmPacked(s.ta, s.m, s.n, s.k, as, lda, p.Pack, ref, s.n, s.acc)
			p.B, p.LDB = nil, 0
		} else {
			Gemm(s.ta, s.tb, s.m, s.n, s.k, as, lda, bs, ldb, ref, s.n, s.acc)
		}
		p.C = c0
		prods = append(prods, p)
		want = append(want, ref)
	}
	prev := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(prev)
	for _, procs := range []int{1, 2, 5} {
		runtime.GOMAXPROCS(procs)
		batch := slices.Clone(prods)
		for i := range batch {
			batch[i].C = slices.Clone(prods[i].C)
		}
		Batch(batch)
		for i := range batch {
			if !slices.Equal(batch[i].C, want[i]) {
				t.Fatalf("GOMAXPROCS=%d: product %d (%+v) differs from Gemm alone", procs, i, specs[i])
			}
		}
	}
}

// TestBatchBadInput: a bad product panics naming its position and the operand.
func TestBatchBadInput(t *testing.T) {
	z := func(n int) []float32 { return make([]float32, n) }
	msg := func() (msg string) {
		defer func() { msg = fmt.Sprint(recover()) }()
		Batch([]Product{
			{M: 2, N: 2, K: 2, A: z(4), LDA: 2, B: z(4), LDB: 2, C: z(4), LDC: 2},
			{M: 2, N: 2, K: 3, A: z(5), LDA: 3, B: z(6), LDB: 2, C: z(4), LDC: 2},
		})
		return "no panic"
	}()
	for _, w := range []string{"product 1", "A has 5 values, need 6"} {
		if !strings.Contains(msg, w) {
			t.Errorf("panic %q, want it to contain %q", msg, w)
		}
	}
}

// TestTranspose8: the assembly block transpose (where built) and the portable one move
// every element to its transposed place and touch nothing else.
func TestTranspose8(t *testing.T) {
	const ld, ldd = 11, 13
	src := make([]float32, 7*ld+8)
	for i := range src {
		src[i] = float32(i) + 0.5
	}
	for _, f := range []struct {
		name string
		fn   func(src []float32, ld int, dst []float32, ldd int)
	}{{"Transpose8", Transpose8}, {"go", transpose8Go}} {
		dst := make([]float32, 7*ldd+8+3)
		for i := range dst {
			dst[i] = -1
		}
		f.fn(src, ld, dst, ldd)
		for q := range 8 {
			for i := range ldd {
				want := float32(-1)
				if i < 8 {
					want = src[i*ld+q]
				}
				if idx := q*ldd + i; idx < len(dst) && dst[idx] != want {
					t.Fatalf("%s: dst[%d·%d+%d] = %v, want %v", f.name, q, ldd, i, dst[idx], want)
				}
			}
		}
	}
}

// TestScratch: the real geometry's head input gradient, g [256, 262144] by the decoded
// embedding [262144, 2816], is a single block of rows (256 ≤ mcPackedMax) cut into column
// tiles, so on several workers its A is packed once for all of them: 258·262144 floats
// (the rows rounded up to the 6-row micro-panel). On one worker nothing is shared. Each
// worker's buffers hold at most an A block, a B slab and a row of sums.
func TestScratch(t *testing.T) {
	bound := roundUp(mcPackedMax, 2*mr)*kcMax + kcMax*roundUp(ncMax, nr) + ncMax
	for _, tc := range []struct {
		workers, wantShared int
	}{{16, 258 * 262144}, {1, 0}} {
		per, shared, running := Scratch(256, 2816, 262144, false, false, true, tc.workers)
		if shared != tc.wantShared || running < 1 || running > tc.workers || per <= 0 || per > bound {
			t.Errorf("%d workers: per worker %d (at most %d), shared %d, running %d; want shared %d", tc.workers, per, bound, shared, running, tc.wantShared)
		}
	}
	if per, shared, running := Scratch(0, 8, 8, false, false, false, 4); per != 0 || shared != 0 || running != 0 {
		t.Errorf("empty product: %d, %d, %d; want nothing", per, shared, running)
	}
}
