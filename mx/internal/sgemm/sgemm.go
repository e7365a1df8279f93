package sgemm

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
)

// Trans says whether an operand is stored as the transpose of its logical shape.
type Trans bool

const (
	// NoTrans: A[i, p] is a[i·lda + p] (and B[p, j] is b[p·ldb + j]).
	NoTrans Trans = false
	// Transposed: A[i, p] is a[p·lda + i] (and B[p, j] is b[j·ldb + p]).
	Transposed Trans = true
)

const (
	mr = 6  // micro-tile rows
	nr = 16 // micro-tile columns (two YMM registers)

	// kcMax keeps a B micro-panel (kc×nr, 16 KiB) plus an A micro-panel (6 KiB)
	// inside a 32 KiB L1.
	kcMax = 256
	// mcMax keeps the packed A block (mcMax×kc, 144 KiB) in L2 next to the B slab.
	mcMax = 144
	// ncMax bounds the packed B slab (kc×ncMax, 512 KiB), which lives in L2/L3.
	ncMax = 512

	// smallM: with at most this many rows, each element of B is used so few
	// times that packing it would cost as much as the product; B is streamed
	// through the row kernel instead.
	smallM = 16

	// minParallel is the number of multiply-adds below which starting goroutines
	// costs more than it saves (2^18 MACs take ~15 µs on one AVX2 core).
	minParallel = 1 << 18
)

// kernels is a micro-kernel set: tile6x16 always; row, when set, takes products with few
// rows of A.
type kernels struct {
	tile6x16 kernel
	row      rowKernel
}

// rowKernel adds a row of sums for a single row of A:
//
//	sums[j] += Σ_p a[p·astride]·b[p·ldb + j],  j < len(sums) (a multiple of rowUnit),
//
// reading b row by row. Called on zeroed sums, it must round exactly like kernel.
type rowKernel func(kc int, a []float32, astride int, b []float32, ldb int, sums []float32)

// rowUnit is the column granularity of a rowKernel.
const rowUnit = 32

// kernel computes one mr×nr tile of C from an A micro-panel (a[p·mr + i]) and a B
// micro-panel (b[p·ldb + j]), p < kc:
//
//	c[i·ldc + j] = (acc ? c[i·ldc + j] : 0) + Σ_p a[p·mr + i]·b[p·ldb + j]
//
// with the sum formed first, in order of p, and then added to c.
type kernel func(kc int, a, b []float32, ldb int, c []float32, ldc int, acc bool)

// Gemm computes C = op(A)·op(B), or C += op(A)·op(B) when accumulate is set, where
// op(A) is M×K, op(B) is K×N and C is M×N with row stride ldc. lda and ldb are the
// row strides of a and b as stored (so lda ≥ K for an untransposed A and lda ≥ M for
// a transposed one). With K = 0 the product is zero. c must not overlap a or b. Gemm
// panics, naming the operand, if a dimension is negative, a stride too small or a slice
// too short.
func Gemm(ta, tb Trans, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int, accumulate bool) {
	p := problem{ta: ta, tb: tb, m: m, n: n, k: k, a: a, lda: lda, b: b, ldb: ldb, c: c, ldc: ldc, acc: accumulate}
	if err := p.check(); err != nil {
		panic(err.Error())
	}
	p.run(defaultKernels(), runtime.GOMAXPROCS(0))
}

// problem is one validated Gemm call.
type problem struct {
	ta, tb  Trans
	m, n, k int
	a       []float32
	lda     int
	b       []float32
	ldb     int
	c       []float32
	ldc     int
	acc     bool
	pack    PackFunc // when set, supplies op(B) in place of b
}

// PanelWidth is the column width of the packed B panels a PackFunc writes.
const PanelWidth = nr

// KBlock is the granularity of the k-blocks handed to a PackFunc: every block but the
// last starts and ends on a multiple of KBlock, so a block never splits a quantization
// group of 32 or 64, nor a packed word.
const KBlock = 64

// PackFunc writes rows pc..pc+kb−1 and columns j0..j0+nt−1 of op(B) into dst as panels
// of PanelWidth columns, zero past column nt:
//
//	dst[q·kb·PanelWidth + p·PanelWidth + j] = op(B)[pc+p, j0 + q·PanelWidth + j]
//
// for q < ⌈nt/PanelWidth⌉, p < kb, j < PanelWidth. It is called from several goroutines
// at once (on disjoint dst), so it must only read shared state. It lets a caller whose B
// is not a float32 matrix — a quantized weight — decode it straight into the layout the
// micro-kernel reads, once per block, instead of materialising it.
type PackFunc func(dst []float32, pc, kb, j0, nt int)

// GemmPacked is Gemm with op(B) supplied block by block by pack: C (+)= op(A)·op(B) with
// op(B) K×N. It rounds exactly as Gemm does on the same values.
func GemmPacked(ta Trans, m, n, k int, a []float32, lda int, pack PackFunc, c []float32, ldc int, accumulate bool) {
	if pack == nil {
		panic("sgemm: GemmPacked without a pack function")
	}
	p := problem{ta: ta, m: m, n: n, k: k, a: a, lda: lda, c: c, ldc: ldc, acc: accumulate, pack: pack}
	if err := p.check(); err != nil {
		panic(err.Error())
	}
	p.run(defaultKernels(), runtime.GOMAXPROCS(0))
}

func (p *problem) check() error {
	if p.m < 0 || p.n < 0 || p.k < 0 {
		return fmt.Errorf("sgemm: negative dimension M=%d N=%d K=%d", p.m, p.n, p.k)
	}
	if err := checkOperand("A", p.a, p.lda, p.m, p.k, p.ta); err != nil {
		return err
	}
	if p.pack == nil {
		if err := checkOperand("B", p.b, p.ldb, p.k, p.n, p.tb); err != nil {
			return err
		}
	}
	return checkOperand("C", p.c, p.ldc, p.m, p.n, NoTrans)
}

// checkOperand validates a logical rows×cols matrix stored with stride ld.
func checkOperand(name string, s []float32, ld, rows, cols int, t Trans) error {
	if t {
		rows, cols = cols, rows
	}
	if rows == 0 || cols == 0 {
		return nil // an empty operand is never read, whatever its stride
	}
	if ld < cols {
		return fmt.Errorf("sgemm: %s stride %d < %d columns stored per row", name, ld, cols)
	}
	if need := (rows-1)*ld + cols; len(s) < need {
		return fmt.Errorf("sgemm: %s has %d values, need %d for %d×%d with stride %d", name, len(s), need, rows, cols, ld)
	}
	return nil
}

// run computes a checked problem with ks on at most workers goroutines.
func (p *problem) run(ks kernels, workers int) {
	if p.m == 0 || p.n == 0 {
		return
	}
	if p.k == 0 {
		if !p.acc {
			for i := range p.m {
				clear(p.c[i*p.ldc : i*p.ldc+p.n])
			}
		}
		return
	}
	// Few rows of A: stream B a row at a time instead of packing it.
	rows := ks.row != nil && p.m <= smallM && p.tb == NoTrans && p.pack == nil
	unitN := nr
	if rows {
		unitN = rowUnit
	}
	tm, tilesM := split(p.m, mcMax, mr)
	tn, tilesN := split(p.n, ncMax, unitN)
	if p.m*p.n*p.k < minParallel {
		workers = 1
	}
	// Cut further until every goroutine has two tasks to balance with, as long as
	// tiles stay big enough to amortise their packing.
	for tilesM*tilesN < 2*workers {
		if tn >= 4*unitN && tn >= tm {
			tn, tilesN = split(p.n, roundUp(tn/2, unitN), unitN)
		} else if tm >= 4*mr {
			tm, tilesM = split(p.m, roundUp(tm/2, mr), mr)
		} else {
			break
		}
	}
	tasks := tilesM * tilesN
	workers = max(1, min(workers, tasks))
	kc, _ := split(p.k, kcMax, KBlock)
	var next atomic.Int64
	work := func() {
		w := newWorker(p, ks, tm, tn, kc, rows)
		for {
			t := int(next.Add(1) - 1)
			if t >= tasks {
				return
			}
			i0, j0 := (t/tilesN)*tm, (t%tilesN)*tn
			w.tile(i0, min(tm, p.m-i0), j0, min(tn, p.n-j0))
		}
	}
	var wg sync.WaitGroup
	for range workers - 1 {
		wg.Go(work)
	}
	work()
	wg.Wait()
}

// split cuts n into the fewest parts of at most limit, evened out and rounded up
// to a multiple of unit; it returns the part size and the number of parts.
func split(n, limit, unit int) (size, parts int) {
	parts = (n + limit - 1) / limit
	size = roundUp((n+parts-1)/parts, unit)
	return size, (n + size - 1) / size
}

func roundUp(n, unit int) int { return (n + unit - 1) / unit * unit }

// worker is one goroutine's packing buffers.
type worker struct {
	*problem
	kernels
	kc         int
	rows       bool      // stream B through the row kernel (few rows of A)
	bufA, bufB []float32 // packed A block; packed B slab (or, with rows, the edge panels)
	rowBuf     []float32 // one row of sums for the row kernel
	tmp        [mr * nr]float32
}

func newWorker(p *problem, ks kernels, tm, tn, kc int, rows bool) *worker {
	w := &worker{problem: p, kernels: ks, kc: kc, rows: rows}
	w.bufA = make([]float32, roundUp(tm, mr)*kc)
	if rows {
		w.rowBuf = make([]float32, tn)
		w.bufB = make([]float32, kc*rowUnit)
	} else {
		w.bufB = make([]float32, kc*roundUp(tn, nr))
	}
	return w
}

// tile computes C[i0:i0+mt, j0:j0+nt], walking K in blocks in order.
func (w *worker) tile(i0, mt, j0, nt int) {
	for pc := 0; pc < w.k; pc += w.kc {
		kb := min(w.kc, w.k-pc)
		acc := w.acc || pc > 0
		packA(w.bufA, w.a, w.lda, w.ta, i0, mt, pc, kb)
		if !w.rows {
			if w.pack != nil {
				w.pack(w.bufB[:roundUp(nt, nr)*kb], pc, kb, j0, nt)
			} else {
				packB(w.bufB, w.b, w.ldb, w.tb, pc, kb, j0, nt)
			}
			w.sweep(kb, i0, mt, j0, nt, w.bufB, acc)
			continue
		}
		// The row kernel takes whole multiples of rowUnit columns; the rest (fewer
		// than rowUnit) go through the tile kernel from packed edge panels.
		nw := nt / rowUnit * rowUnit
		if nw > 0 {
			for i := range mt {
				sums := w.rowBuf[:nw]
				clear(sums)
				w.row(kb, w.bufA[(i/mr)*kb*mr+i%mr:], mr, w.b[pc*w.ldb+j0:], w.ldb, sums)
				addInto(w.c[(i0+i)*w.ldc+j0:][:nw], sums, acc)
			}
		}
		if nw < nt {
			packB(w.bufB, w.b, w.ldb, w.tb, pc, kb, j0+nw, nt-nw)
			w.sweep(kb, i0, mt, j0+nw, nt-nw, w.bufB, acc)
		}
	}
}

// sweep runs the tile kernel over C[i0:i0+mt, j0:j0+nt] for one k-block of kb, from the
// packed A block and the packed B panels bp.
func (w *worker) sweep(kb, i0, mt, j0, nt int, bp []float32, acc bool) {
	for jr := 0; jr < nt; jr += nr {
		nn := min(nr, nt-jr)
		panel := bp[jr*kb:]
		for ir := 0; ir < mt; ir += mr {
			mm := min(mr, mt-ir)
			ap := w.bufA[ir*kb:]
			off := (i0+ir)*w.ldc + j0 + jr
			if mm == mr && nn == nr {
				w.tile6x16(kb, ap, panel, nr, w.c[off:], w.ldc, acc)
				continue
			}
			// Edge tile: the same kernel into a scratch tile, then the same c + Σ into
			// C, so edge elements round exactly like interior ones.
			w.tile6x16(kb, ap, panel, nr, w.tmp[:], nr, false)
			for i := range mm {
				addInto(w.c[off+i*w.ldc:][:nn], w.tmp[i*nr:i*nr+nn], acc)
			}
		}
	}
}

// addInto sets dst = src, or dst + src when acc.
func addInto(dst, src []float32, acc bool) {
	if !acc {
		copy(dst, src)
		return
	}
	src = src[:len(dst)]
	for j := range dst {
		dst[j] += src[j]
	}
}
