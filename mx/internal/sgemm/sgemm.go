package sgemm

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/dgtune/dgtune/mx/internal/par"
	"github.com/dgtune/dgtune/mx/internal/uninit"
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
	// mcPackedMax is mcMax for a product whose B a PackFunc decodes or that is big
	// (bigB): the packed A block (mcPackedMax×kc, 512 KiB) still fits an L2 of 1 MiB or
	// more.
	mcPackedMax = 516
	// ncMax bounds the packed B slab (kc×ncMax, 512 KiB), which lives in L2/L3.
	ncMax = 512

	// smallM: with at most this many rows, each element of B is used so few
	// times that packing it would cost as much as the product; B is streamed
	// through the row kernel instead.
	smallM = 16

	// bigB is the size of op(B) (elements, 1 MiB of float32) from which a product takes
	// the tall row tiles of a decoded B: its packing then costs more than re-packing A.
	bigB = 1 << 18

	// prefetchMinB is the size of op(B) (elements, 256 KiB of float32) from which its next
	// block is prefetched: an expert's or a linear's weight, which streams from memory,
	// and not attention's keys and values, which are in cache already (a hint of a line
	// in cache still takes a load slot from the micro-kernel).
	prefetchMinB = 1 << 16

	// minParallel is the number of multiply-adds below which starting goroutines
	// costs more than it saves (2^16 MACs take ~4 µs on one AVX2 core; starting and
	// joining a goroutine one or two).
	minParallel = 1 << 16
)

// kernels is a micro-kernel set: tile6x16 always; pair, when set, computes two vertically
// adjacent full tiles at once (rounding exactly as two tile6x16 calls); row, when set,
// takes products with few rows of A.
type kernels struct {
	tile6x16 kernel
	pair     pairKernel
	// wide, when set, is pair on two adjacent B panels at once (a 2mr×2nr tile), rounding
	// exactly as two pair calls.
	wide wideKernel
	// edge, when set (with wide), computes the tiles wide and pair cannot — fewer rows
	// than 2mr, or a last panel only partly inside C — straight into C.
	edge edgeTileKernel
	// inplace, when set (with wide and edge), is wide reading A in place (see inplaceA).
	inplace inplaceKernel
	row     rowKernel
	skinny  skinnyKernel
	// skinnyT16, when set, is skinny for sixteen rows of a transposed A (one vector of
	// sixteen A values per k step: the LoRA gradient xᵀ·dxa).
	skinnyT16 skinnyT16Kernel
	thin      thinKernel
	// prefetch: while a k-block's panels are swept, hint the float32 B of the next one
	// (the next k-block of the tile, or the first of the tile claimed next) into L2 (see
	// bAhead). Values never change; only when packing the next block waits on memory.
	prefetch bool
}

// skinnyT16Kernel computes the 16×skinnyCols tile C[i, j] (+)= Σ_p A[i, p]·B[p, j] with
// A[i, p] at a[p·lda + i], rounding as kernel does.
type skinnyT16Kernel func(kc int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int, acc bool)

// thinKernel computes thinRows rows of C = A·B for a product with few k steps (K at most
// thinMaxK: a LoRA up-projection, (x·A)·B, or its input gradient), reading the rows of an
// untransposed A in place at a[i·lda + p] and B from chunks nr-column panels as packB
// lays them out for one k-block of k (panel q at b[q·k·nr:], row p at + p·nr):
//
//	c[i·ldc + j] = (acc ? c : 0) + Σ_p a[i·lda + p]·B[p, j],  i < thinRows, j < chunks·nr,
//
// rounding as kernel does. With so few k steps the tile kernels spend most of their time
// packing A, storing C and being called; this one sweeps a whole row block of C per call.
type thinKernel func(k int, a []float32, lda int, b []float32, chunks int, c []float32, ldc int, acc bool)

// The thin kernel's rows per call, and the largest K that takes it.
const (
	thinRows = 8
	thinMaxK = 32
)

// skinnyKernel computes a skinnyRows×skinnyCols tile of C = op(A)·B reading op(A) in place
// (a[i·lda + p] untransposed, a[p·lda + i] transposed) and B from a panel with row
// stride ldb: c[i·ldc + j] = (acc ? c : 0) + Σ_p A[i, p]·B[p, j], rounding as kernel
// does. A product only a LoRA rank wide (x·A, g·Bᵀ, xᵀ·h) spends as long packing A as
// multiplying; this kernel never packs it.
type skinnyKernel func(ta Trans, kc int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int, acc bool)

// The skinny kernel's tile, and the widest product that takes it (one B panel).
const (
	skinnyRows = 8
	skinnyCols = 8
	skinnyMaxN = nr
)

// pairKernel is kernel for the 2mr×nr tile of two consecutive A micro-panels a0 (rows
// 0..mr−1) and a1 (rows mr..2mr−1): every element is formed as kernel forms it, so it is
// bitwise the same as two kernel calls. A wider register file (AVX-512's ZMM) holds a
// whole nr-wide row in one register, so twice the rows share each load of B.
type pairKernel func(kc int, a0, a1, b []float32, ldb int, c []float32, ldc int, acc bool)

// edgeTileKernel computes rows (1 to 2mr) rows and cols (1 to 2nr; b1 is read only past
// nr) columns of a 2mr×2nr tile as wideKernel would, storing only those into C: the
// rounding of every element is the tile kernels'.
type edgeTileKernel func(kc int, a0, a1, b0, b1 []float32, ldb int, c []float32, ldc int, acc bool, rows, cols int)

// inplaceKernel is wideKernel for 2mr rows of op(A) read in place from a with row
// stride lda (A[i, p] at a[i·lda + p], or a[p·lda + i] when ta is set) instead of from
// packed micro-panels, rounding exactly as wideKernel does.
type inplaceKernel func(ta Trans, kc int, a []float32, lda int, b0, b1 []float32, ldb int, c []float32, ldc int, acc bool)

// inplaceMaxN is the widest product whose A the tile kernels read in place: at N = 64
// (attention's P·V, dS·K, Pᵀ·dO, dSᵀ·Q) each element of A packed feeds only 64
// multiply-adds, so packing it cost about as much as the product.
const inplaceMaxN = 128

// wideKernel is pairKernel on the 2mr×2nr tile of A micro-panels a0, a1 and B panels b0
// (columns 0..nr−1) and b1 (nr..2nr−1): bitwise the same as a pair call on each panel.
type wideKernel func(kc int, a0, a1, b0, b1 []float32, ldb int, c []float32, ldc int, acc bool)

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
	p.mustRun(runtime.GOMAXPROCS(0))
}

// Epilogue finishes a block of C — rows i0..i1−1, columns j0..j1−1 — right after the
// goroutine that computed it wrote its last k-block, while it is still in cache: an
// elementwise step after the product (C = β·C₀ + α·C) then costs no second pass over C
// and no parallel region of its own. Epilogues of different blocks run concurrently and
// never overlap; together they cover C exactly once.
type Epilogue func(i0, i1, j0, j1 int)

// GemmThen is Gemm (without accumulation) followed by then on every block of C as it
// is finished. It rounds exactly as Gemm does.
func GemmThen(ta, tb Trans, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int, then Epilogue) {
	p := problem{ta: ta, tb: tb, m: m, n: n, k: k, a: a, lda: lda, b: b, ldb: ldb, c: c, ldc: ldc, then: then}
	p.mustRun(runtime.GOMAXPROCS(0))
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
	then    Epilogue // when set, finishes each block of C
}

// PanelWidth is the column width of the packed B panels a PackFunc writes.
const PanelWidth = nr

// KBlock is the granularity of the k-blocks handed to a PackFunc: every block but the
// last starts and ends on a multiple of KBlock, so a block never splits a quantization
// group of 32 or 64, nor a packed word.
const KBlock = 64

// KBlockMax is the largest k-block handed to a PackFunc.
const KBlockMax = kcMax

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
	p.mustRun(runtime.GOMAXPROCS(0))
}

// GemmPackedThen is GemmPacked (without accumulation) followed by then on every block
// of C as it is finished, as GemmThen does. It rounds exactly as GemmPacked does.
func GemmPackedThen(ta Trans, m, n, k int, a []float32, lda int, pack PackFunc, c []float32, ldc int, then Epilogue) {
	if pack == nil {
		panic("sgemm: GemmPackedThen without a pack function")
	}
	p := problem{ta: ta, m: m, n: n, k: k, a: a, lda: lda, c: c, ldc: ldc, pack: pack, then: then}
	p.mustRun(runtime.GOMAXPROCS(0))
}

// GemmOnCaller is Gemm computed entirely on the calling goroutine: the product an
// Epilogue forms for its own block (a low-rank term added to each block of a bigger
// product) runs inside a worker of that product and must not start goroutines of its
// own. It rounds exactly as Gemm does.
func GemmOnCaller(ta, tb Trans, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int, accumulate bool) {
	p := problem{ta: ta, tb: tb, m: m, n: n, k: k, a: a, lda: lda, b: b, ldb: ldb, c: c, ldc: ldc, acc: accumulate}
	p.mustRun(1)
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

// mustRun checks the problem of a public entry point — panicking, naming the operand, on a
// bad one — and computes it with the default kernels on at most workers goroutines.
func (p *problem) mustRun(workers int) {
	if err := p.check(); err != nil {
		panic(err.Error())
	}
	p.run(defaultKernels(), workers)
}

// run computes a checked problem with ks on at most workers goroutines.
func (p *problem) run(ks kernels, workers int) { runBatch([]*problem{p}, ks, workers) }

// Product is one C (+)= op(A)·op(B) of a Batch, with Gemm's arguments; Pack, when set,
// supplies op(B) as GemmPacked's pack does (B and LDB are then ignored).
type Product struct {
	TA, TB     Trans
	M, N, K    int
	A          []float32
	LDA        int
	B          []float32
	LDB        int
	C          []float32
	LDC        int
	Accumulate bool
	Pack       PackFunc
}

// Batch computes independent products on one pool of at most GOMAXPROCS goroutines that
// pull the tiles of all of them from one queue, so many small products (the experts of a
// mixture-of-experts layer, the heads of attention) keep every core busy where one call
// per product would run each on few cores or one after another. Each result rounds
// exactly as Gemm (or GemmPacked) of that product alone. The Cs must not overlap each
// other or any A or B. Batch panics, naming the product, on a bad dimension, stride or
// slice length.
func Batch(ps []Product) {
	probs := make([]*problem, len(ps))
	for i, q := range ps {
		p := &problem{ta: q.TA, tb: q.TB, m: q.M, n: q.N, k: q.K, a: q.A, lda: q.LDA, b: q.B, ldb: q.LDB,
			c: q.C, ldc: q.LDC, acc: q.Accumulate, pack: q.Pack}
		if err := p.check(); err != nil {
			panic(fmt.Sprintf("sgemm: batch product %d: %v", i, err))
		}
		probs[i] = p
	}
	runBatch(probs, defaultKernels(), runtime.GOMAXPROCS(0))
}

// plan is how one problem is cut into tiles.
type plan struct {
	*problem
	rows           bool // stream B through the row kernel (few rows of A)
	skinny         bool // at most one panel wide: the skinny kernel reads A in place
	unitM, unitN   int
	tm, tn, kc     int
	tilesM, tilesN int
	// packedA, when set, holds all of op(A) packed once, k-block after k-block, for the
	// tiles to share (a product with one block of rows cut into many column tiles).
	packedA *[]float32
	// thin: K is at most thinMaxK; op(B) is packed once, whole, into thinB for every tile
	// to read, and the thin kernel reads A in place.
	thin  bool
	thinB *[]float32
	// inplaceA: op(A) is never packed; the in-place kernel reads it (whole blocks of 2mr
	// rows; the rows past the last are packed and go through the edge kernel).
	inplaceA bool
}

func newPlan(p *problem, ks kernels) plan {
	pl := plan{problem: p}
	// One panel wide with enough rows: the skinny kernel, A never packed.
	pl.skinny = ks.skinny != nil && p.n <= skinnyMaxN && p.m >= skinnyRows && p.pack == nil
	// Few rows of A: stream B a row at a time instead of packing it.
	pl.rows = !pl.skinny && ks.row != nil && p.m <= smallM && p.tb == NoTrans && p.pack == nil
	// Few k steps and an A read in place: the thin kernel.
	pl.thin = !pl.skinny && !pl.rows && ks.thin != nil && p.k <= thinMaxK && p.m >= thinRows && p.ta == NoTrans && p.pack == nil
	// Few panels, all of them paired: A in place — unless A's rows are a multiple of 4 KiB
	// apart, which puts the lines a block of A reads into one L1 set (1024×383×64 with a
	// transposed A: 95 → 93 GFLOP/s on one core; at a stride of 383, 384 or 512 floats
	// the in-place kernel is 7-13 % faster).
	pl.inplaceA = !pl.skinny && !pl.rows && !pl.thin && ks.inplace != nil && ks.wide != nil && ks.edge != nil &&
		p.n <= inplaceMaxN && p.n%(2*nr) == 0 && p.lda%1024 != 0
	pl.unitM, pl.unitN = mr, nr
	if pl.inplaceA {
		pl.unitN = 2 * nr // tiles of whole panel pairs
	}
	if ks.pair != nil {
		pl.unitM = 2 * mr // tiles of whole pairs of panels
	}
	if pl.rows {
		pl.unitN = rowUnit
	}
	if pl.skinny {
		pl.unitM = skinnyRows
	}
	if pl.thin {
		pl.unitM = thinRows
	}
	rowLimit := mcMax
	if p.pack != nil || p.k*p.n >= bigB {
		// B is packed (or decoded) once per row tile: taller tiles pack it fewer times.
		// Decoding a quantized weight costs more than packing the rows of A, and a large
		// float32 weight streams from memory each time (at 384 rows, 144-row tiles read
		// it three times; 2 threads on the device, float32 bench: 661–700 → 694–803
		// tokens/s).
		rowLimit = mcPackedMax
	}
	pl.tm, pl.tilesM = split(p.m, rowLimit, pl.unitM)
	pl.tn, pl.tilesN = split(p.n, ncMax, pl.unitN)
	pl.kc, _ = split(p.k, kcMax, KBlock)
	return pl
}

// cut splits the tiles further until there are at least want of them, as long as tiles
// stay big enough to amortise their packing. A product with a single block of rows keeps
// it whole and cuts only its columns, down to one panel width: its packed A is then
// shared by every tile (see shareA) instead of being packed again by each. One that is a
// single panel wide (a LoRA down-projection, x·A with rank 8 columns) can only be cut
// by rows, and is.
func (pl *plan) cut(want int) {
	if pl.tilesM == 1 && !pl.inplaceA {
		for pl.tilesN < want && pl.tn >= 2*pl.unitN {
			pl.tn, pl.tilesN = split(pl.n, roundUp(pl.tn/2, pl.unitN), pl.unitN)
		}
		if pl.tilesN > 1 || pl.rows {
			return
		}
	}
	for pl.tilesM*pl.tilesN < want {
		if pl.tn >= 4*pl.unitN && pl.tn >= pl.tm {
			pl.tn, pl.tilesN = split(pl.n, roundUp(pl.tn/2, pl.unitN), pl.unitN)
		} else if pl.tm >= 4*pl.unitM {
			pl.tm, pl.tilesM = split(pl.m, roundUp(pl.tm/2, pl.unitM), pl.unitM)
		} else {
			return
		}
	}
}

// aBlockOffset is where k-block pc starts in a shared packed A (all blocks but the last
// are kc long).
func (pl *plan) aBlockOffset(pc int) int { return roundUp(pl.m, mr) * pc }

// sharedAPool recycles the shared packed-A buffers.
var sharedAPool = sync.Pool{New: func() any { return new([]float32) }}

// shareA packs op(A) of every plan with a single block of rows and several column tiles
// once, in parallel over (plan, k-block), before any tile runs; each element is packed
// exactly as the tile would have packed it.
func shareA(plans []plan, workers int) {
	// A job is one k-block of rows i0..i0+shareRows of one plan, so that even a product
	// of one or two k-blocks packs on many goroutines.
	const shareRows = 8 * mr
	type job struct{ pl, pc, i0 int }
	var jobs []job
	for i := range plans {
		pl := &plans[i]
		if pl.tilesM != 1 || pl.tilesN < 2 || pl.inplaceA {
			continue
		}
		buf := sharedAPool.Get().(*[]float32)
		*buf = grow(*buf, roundUp(pl.m, mr)*pl.k)
		pl.packedA = buf
		for pc := 0; pc < pl.k; pc += pl.kc {
			for i0 := 0; i0 < pl.m; i0 += shareRows {
				jobs = append(jobs, job{i, pc, i0})
			}
		}
	}
	if len(jobs) == 0 {
		return
	}
	var next atomic.Int64
	work := func() {
		for {
			j := int(next.Add(1) - 1)
			if j >= len(jobs) {
				return
			}
			pl := &plans[jobs[j].pl]
			pc, i0 := jobs[j].pc, jobs[j].i0
			kb := min(pl.kc, pl.k-pc)
			// Panel i0/mr of the block starts i0·kb floats in (panels are mr·kb long).
			packA((*pl.packedA)[pl.aBlockOffset(pc)+i0*kb:], pl.a, pl.lda, pl.ta, i0, min(shareRows, pl.m-i0), pc, kb)
		}
	}
	par.Run(min(workers, len(jobs)), work)
}

// packThinB packs the whole op(B) of every thin plan once, as packB lays out one k-block
// of K (at most thinMaxK·n floats: far less than the product's m·n·K multiply-adds).
func packThinB(plans []plan) {
	for i := range plans {
		pl := &plans[i]
		if !pl.thin {
			continue
		}
		buf := sharedAPool.Get().(*[]float32)
		*buf = grow(*buf, roundUp(pl.n, nr)*pl.k)
		packB(*buf, pl.b, pl.ldb, pl.tb, 0, pl.k, 0, pl.n)
		pl.thinB = buf
	}
}

// releaseShared returns the plans' shared packed operands (packedA, thinB) to their pool.
func releaseShared(plans []plan) {
	for i := range plans {
		for _, buf := range []*[]float32{plans[i].packedA, plans[i].thinB} {
			if buf != nil {
				sharedAPool.Put(buf)
			}
		}
	}
}

// runBatch computes checked problems with ks on at most workers goroutines. Each tile of
// each problem is one task; every goroutine is meant to get about two tasks' worth of
// work, so a problem gets tiles in proportion to its share of the multiply-adds.
func runBatch(ps []*problem, ks kernels, workers int) {
	plans, first, sz, workers := planBatch(ps, ks, workers)
	if len(plans) == 0 {
		return
	}
	tasks := first[len(plans)]
	packThinB(plans)
	defer releaseShared(plans)
	if workers > 1 {
		shareA(plans, workers)
	}
	var next atomic.Int64
	q := &queue{plans: plans, first: first, next: &next, tasks: tasks, workers: workers}
	work := func() {
		w := newWorker(ks, sz)
		defer w.release()
		w.queue = q
		t := q.claim()
		for t < tasks {
			pl, i0, mt, j0, nt := q.locate(t)
			w.bind(pl)
			w.ahead = -1
			w.tile(i0, mt, j0, nt)
			if pl.then != nil {
				pl.then(i0, i0+mt, j0, j0+nt)
			}
			t = w.ahead
			if t < 0 {
				t = q.claim()
			}
		}
	}
	par.Run(workers, work)
}

// planBatch plans the tiles of checked problems for at most workers goroutines: the
// plans of the problems with work (problems with an empty C or K are finished here),
// first[i] the number of plan i's first task (tasks are numbered plan by plan), the
// buffers each worker needs and the number of workers to start.
func planBatch(ps []*problem, ks kernels, workers int) ([]plan, []int, bufSizes, int) {
	var plans []plan
	total := 0
	for _, p := range ps {
		if p.m == 0 || p.n == 0 {
			continue
		}
		if p.k == 0 {
			if !p.acc {
				for i := range p.m {
					clear(p.c[i*p.ldc : i*p.ldc+p.n])
				}
			}
			if p.then != nil {
				p.then(0, p.m, 0, p.n)
			}
			continue
		}
		plans = append(plans, newPlan(p, ks))
		total += p.m * p.n * p.k
	}
	if len(plans) == 0 {
		return nil, nil, bufSizes{}, 0
	}
	if total < minParallel {
		workers = 1
	}
	// No more goroutines than there are minParallel units of work: on a many-core
	// machine a small product is not spread so thin that starting goroutines dominates.
	workers = min(workers, max(1, total/minParallel))
	first := make([]int, len(plans)+1)
	var sz bufSizes
	for i := range plans {
		pl := &plans[i]
		if workers > 1 {
			share := pl.m * pl.n * pl.k
			pl.cut(int((int64(2*workers)*int64(share) + int64(total) - 1) / int64(total)))
		}
		first[i+1] = first[i] + pl.tilesM*pl.tilesN
		sz.fit(pl)
	}
	return plans, first, sz, max(1, min(workers, first[len(plans)]))
}

// Scratch is the float32 scratch Gemm of op(A) [m, k] by op(B) [k, n] — GemmPacked when
// packed (a decoded B, a quantized weight) — takes on at most workers goroutines, as
// runBatch plans it: perWorker is each of the running workers' packing buffers, which a
// pool recycles from product to product, and shared the operands packed once for all the
// tiles (packed A, a thin product's B), back to their pool when the product ends. A
// memory estimate reads it (package shapeeng).
func Scratch(m, n, k int, ta, tb, packed bool, workers int) (perWorker, shared, running int) {
	p := &problem{ta: Trans(ta), tb: Trans(tb), m: m, n: n, k: k}
	if packed {
		p.pack = func([]float32, int, int, int, int) {}
	}
	plans, _, sz, running := planBatch([]*problem{p}, defaultKernels(), workers)
	for i := range plans {
		pl := &plans[i]
		if pl.thin {
			shared += roundUp(pl.n, nr) * pl.k
		}
		if running > 1 && pl.tilesM == 1 && pl.tilesN >= 2 && !pl.inplaceA {
			shared += roundUp(pl.m, mr) * pl.k
		}
	}
	return sz.a + sz.b + sz.row, shared, running
}

// queue hands out the tasks (tiles) of a batch's plans, numbered plan by plan.
type queue struct {
	plans   []plan
	first   []int // first[i] is the number of the first task of plan i
	next    *atomic.Int64
	tasks   int
	workers int // goroutines pulling from it
}

// claim takes the next unclaimed task (tasks when none is left).
func (q *queue) claim() int { return min(int(q.next.Add(1)-1), q.tasks) }

// locate returns task t's plan and tile: rows i0..i0+mt, columns j0..j0+nt.
func (q *queue) locate(t int) (pl *plan, i0, mt, j0, nt int) {
	i, _ := slices.BinarySearch(q.first, t+1)
	pl = &q.plans[i-1]
	t -= q.first[i-1]
	i0, j0 = (t/pl.tilesN)*pl.tm, (t%pl.tilesN)*pl.tn
	return pl, i0, min(pl.tm, pl.m-i0), j0, min(pl.tn, pl.n-j0)
}

// split cuts n into the fewest parts of at most limit, evened out and rounded up
// to a multiple of unit; it returns the part size and the number of parts.
func split(n, limit, unit int) (size, parts int) {
	parts = (n + limit - 1) / limit
	size = roundUp((n+parts-1)/parts, unit)
	return size, (n + size - 1) / size
}

func roundUp(n, unit int) int { return (n + unit - 1) / unit * unit }

// worker is one goroutine's packing buffers, bound to one problem at a time.
type worker struct {
	*problem
	kernels
	kc         int
	rows       bool      // stream B through the row kernel (few rows of A)
	bufA, bufB []float32 // packed A block; packed B slab (or, with rows, the edge panels)
	rowBuf     []float32 // one row of sums for the row kernel
	tmp        [mr * nr]float32
	bufs       *buffers
	plan       *plan
	curA       []float32 // the packed A block of the current k-block
	// queue, when set, is the batch the worker pulls tiles from; ahead is the task it
	// claimed during its current tile's last k-block to prefetch its B (−1: none).
	queue *queue
	ahead int
}

// bAhead is a float32 op(B) block to hint into L2 while the current one is swept: segs
// runs of length floats, run s starting at b[base + s·stride].
type bAhead struct {
	b                          []float32
	base, stride, segs, length int
}

// block returns the bAhead of rows pc..pc+kb−1 and columns j0..j0+nt−1 of pl's op(B),
// ok false when pl's B is not a float32 matrix packed per block (decoded by a PackFunc,
// streamed by rows, or packed once whole).
func (pl *plan) block(pc, kb, j0, nt int) (bAhead, bool) {
	if pl.pack != nil || pl.rows || pl.thin || pl.skinny || kb <= 0 || nt <= 0 || pl.k*pl.n < prefetchMinB {
		return bAhead{}, false
	}
	if pl.tb {
		// op(B)[p, j] = b[j·ldb + p]: one run of kb per column.
		return bAhead{b: pl.b, base: j0*pl.ldb + pc, stride: pl.ldb, segs: nt, length: kb}, true
	}
	return bAhead{b: pl.b, base: pc*pl.ldb + j0, stride: pl.ldb, segs: kb, length: nt}, true
}

// hint prefetches runs lo..hi−1 of a.
func (a *bAhead) hint(lo, hi int) {
	for s := lo; s < hi; s++ {
		prefetchL2(&a.b[a.base+s*a.stride], a.length)
	}
}

// nextBlock is the block to prefetch during k-block pc (length kb) of the tile at
// columns j0..j0+nt: the tile's next k-block, or, during its last, the first of the task
// the worker claims now (w.ahead) and computes next.
func (w *worker) nextBlock(pc, kb, j0, nt int) (bAhead, bool) {
	if !w.prefetch {
		return bAhead{}, false
	}
	if pc+kb < w.k {
		return w.plan.block(pc+kb, min(w.kc, w.k-pc-kb), j0, nt)
	}
	q := w.queue
	if q == nil || w.ahead >= 0 {
		return bAhead{}, false
	}
	// Claiming early gives up some dynamic balance, so only for a tile whose B is worth
	// prefetching, and never among the batch's last tiles (one per worker), which stay
	// first come, first served.
	t := int(q.next.Load())
	if t+q.workers > q.tasks {
		return bAhead{}, false
	}
	if pl, _, _, j1, nt1 := q.locate(t); !pl.prefetchable(j1, nt1) {
		return bAhead{}, false
	}
	w.ahead = q.claim() // t, unless another worker took it meanwhile
	if w.ahead >= q.tasks {
		return bAhead{}, false
	}
	pl, _, _, j1, nt1 := q.locate(w.ahead)
	return pl.block(0, min(pl.kc, pl.k), j1, nt1)
}

// prefetchable says whether the first k-block of pl's tile at columns j0..j0+nt has a B
// that block would hint.
func (pl *plan) prefetchable(j0, nt int) bool {
	_, ok := pl.block(0, min(pl.kc, pl.k), j0, nt)
	return ok
}

// bufSizes are the largest buffers any tile of a batch needs.
type bufSizes struct{ a, b, row int }

func (s *bufSizes) fit(pl *plan) {
	s.a = max(s.a, roundUp(pl.tm, mr)*pl.kc)
	if pl.rows {
		s.row = max(s.row, pl.tn)
		s.b = max(s.b, pl.kc*rowUnit)
	} else {
		s.b = max(s.b, pl.kc*roundUp(pl.tn, nr))
	}
}

// buffers are a worker's scratch slices, recycled across calls: every element a kernel
// reads is written first (packing zero-pads its edges and the row sums are cleared), so
// they need no clearing, and a training step's thousands of products do not each
// allocate (and have the runtime zero) a fresh half-megabyte.
type buffers struct{ a, b, row []float32 }

var bufferPool = sync.Pool{New: func() any { return new(buffers) }}

// grow returns s resized to n, reallocated (unzeroed: see buffers) when too small.
func grow(s []float32, n int) []float32 {
	if cap(s) < n {
		return uninit.Float32s(n)
	}
	return s[:n]
}

func newWorker(ks kernels, sz bufSizes) *worker {
	bufs := bufferPool.Get().(*buffers)
	bufs.a, bufs.b, bufs.row = grow(bufs.a, sz.a), grow(bufs.b, sz.b), grow(bufs.row, sz.row)
	return &worker{kernels: ks, bufA: bufs.a, bufB: bufs.b, rowBuf: bufs.row, bufs: bufs}
}

// bind points the worker at a plan's problem.
func (w *worker) bind(pl *plan) { w.problem, w.kc, w.rows, w.plan = pl.problem, pl.kc, pl.rows, pl }

// release returns the buffers to the pool.
func (w *worker) release() {
	w.problem, w.plan = nil, nil
	bufferPool.Put(w.bufs)
}

// tile computes C[i0:i0+mt, j0:j0+nt], walking K in blocks in order.
func (w *worker) tile(i0, mt, j0, nt int) {
	if w.plan != nil && w.plan.skinny {
		w.skinnyTile(i0, mt, j0, nt)
		return
	}
	if w.plan != nil && w.plan.thin {
		w.thinTile(i0, mt, j0, nt)
		return
	}
	if w.plan != nil && w.plan.inplaceA {
		w.inplaceTile(i0, mt, j0, nt)
		return
	}
	for pc := 0; pc < w.k; pc += w.kc {
		kb := min(w.kc, w.k-pc)
		acc := w.acc || pc > 0
		if w.plan != nil && w.plan.packedA != nil {
			w.curA = (*w.plan.packedA)[w.plan.aBlockOffset(pc):]
		} else {
			packA(w.bufA, w.a, w.lda, w.ta, i0, mt, pc, kb)
			w.curA = w.bufA
		}
		if !w.rows {
			if w.pack != nil {
				w.pack(w.bufB[:roundUp(nt, nr)*kb], pc, kb, j0, nt)
			} else {
				packB(w.bufB, w.b, w.ldb, w.tb, pc, kb, j0, nt)
			}
			ahead, ok := w.nextBlock(pc, kb, j0, nt)
			var pf *bAhead
			if ok {
				pf = &ahead
			}
			w.sweep(kb, i0, mt, j0, nt, w.bufB, acc, pf)
			continue
		}
		// The row kernel takes whole multiples of rowUnit columns; the rest (fewer
		// than rowUnit) go through the tile kernel from packed edge panels.
		nw := nt / rowUnit * rowUnit
		if nw > 0 {
			for i := range mt {
				sums := w.rowBuf[:nw]
				clear(sums)
				w.row(kb, w.curA[(i/mr)*kb*mr+i%mr:], mr, w.b[pc*w.ldb+j0:], w.ldb, sums)
				addInto(w.c[(i0+i)*w.ldc+j0:][:nw], sums, acc)
			}
		}
		if nw < nt {
			packB(w.bufB, w.b, w.ldb, w.tb, pc, kb, j0+nw, nt-nw)
			w.sweep(kb, i0, mt, j0+nw, nt-nw, w.bufB, acc, nil)
		}
	}
}

// inplaceTile is tile for an inplaceA plan: per k-block, B is packed as usual and the
// in-place kernel runs over every whole block of 2mr rows, each block across all the
// tile's panel pairs (its rows of A stay in L1); the rows past the last whole block are
// packed and go through the edge kernel.
func (w *worker) inplaceTile(i0, mt, j0, nt int) {
	full := mt / (2 * mr) * (2 * mr)
	for pc := 0; pc < w.k; pc += w.kc {
		kb := min(w.kc, w.k-pc)
		acc := w.acc || pc > 0
		if w.pack != nil {
			w.pack(w.bufB[:roundUp(nt, nr)*kb], pc, kb, j0, nt)
		} else {
			packB(w.bufB, w.b, w.ldb, w.tb, pc, kb, j0, nt)
		}
		for ir := 0; ir < full; ir += 2 * mr {
			var a []float32
			if w.ta {
				a = w.a[pc*w.lda+i0+ir:]
			} else {
				a = w.a[(i0+ir)*w.lda+pc:]
			}
			for jr := 0; jr < nt; jr += 2 * nr {
				w.inplace(w.ta, kb, a, w.lda, w.bufB[jr*kb:], w.bufB[(jr+nr)*kb:], nr, w.c[(i0+ir)*w.ldc+j0+jr:], w.ldc, acc)
			}
		}
		if rest := mt - full; rest > 0 {
			packA(w.bufA, w.a, w.lda, w.ta, i0+full, rest, pc, kb)
			a1 := w.bufA
			if rest > mr {
				a1 = w.bufA[mr*kb:]
			}
			for jr := 0; jr < nt; jr += 2 * nr {
				w.edge(kb, w.bufA, a1, w.bufB[jr*kb:], w.bufB[(jr+nr)*kb:], nr, w.c[(i0+full)*w.ldc+j0+jr:], w.ldc, acc, rest, 2*nr)
			}
		}
	}
}

// skinnyTile is tile for a plan at most one panel wide: per k-block it packs the B panel
// once and runs the skinny kernel down the rows, reading A in place; rows past the last
// whole group of skinnyRows go through the packed tile kernel as usual.
func (w *worker) skinnyTile(i0, mt, j0, nt int) {
	full := mt / skinnyRows * skinnyRows
	var tmp [skinnyRows * skinnyCols]float32
	for pc := 0; pc < w.k; pc += w.kc {
		kb := min(w.kc, w.k-pc)
		acc := w.acc || pc > 0
		packB(w.bufB, w.b, w.ldb, w.tb, pc, kb, j0, nt)
		for ir := 0; ir < full; {
			rows := skinnyRows
			if w.ta && w.skinnyT16 != nil && ir+2*skinnyRows <= full {
				rows = 2 * skinnyRows
			}
			for jc := 0; jc < nt; jc += skinnyCols {
				for h := 0; h < rows; h += skinnyRows {
					var a []float32
					if w.ta {
						a = w.a[pc*w.lda+i0+ir+h:]
					} else {
						a = w.a[(i0+ir+h)*w.lda+pc:]
					}
					off := (i0+ir+h)*w.ldc + j0 + jc
					if jc+skinnyCols <= nt {
						if rows > skinnyRows {
							// Both halves at once.
							w.skinnyT16(kb, a, w.lda, w.bufB[jc:], nr, w.c[off:], w.ldc, acc)
							break
						}
						w.skinny(w.ta, kb, a, w.lda, w.bufB[jc:], nr, w.c[off:], w.ldc, acc)
						continue
					}
					// Edge columns: the same kernel into a scratch tile (the panel is
					// zero past nt), then the same c + Σ into C.
					nn := nt - jc
					w.skinny(w.ta, kb, a, w.lda, w.bufB[jc:], nr, tmp[:], skinnyCols, false)
					for i := range skinnyRows {
						addInto(w.c[off+i*w.ldc:][:nn], tmp[i*skinnyCols:i*skinnyCols+nn], acc)
					}
				}
			}
			ir += rows
		}
		if full < mt {
			packA(w.bufA, w.a, w.lda, w.ta, i0+full, mt-full, pc, kb)
			w.curA = w.bufA
			w.sweep(kb, i0+full, mt-full, j0, nt, w.bufB, acc, nil)
		}
	}
}

// thinTile is tile for a thin plan: the thin kernel down the rows in blocks of thinRows,
// over the whole panels of the tile in one call per block. Edge columns (a last panel
// past nt) and the rows past the last whole block — copied into a zero-padded block, as A
// is read in place — go through the same kernel into a scratch block and then the same
// c + Σ into C, so every element rounds alike.
func (w *worker) thinTile(i0, mt, j0, nt int) {
	k := w.k
	bp := (*w.plan.thinB)[(j0/nr)*k*nr:] // j0 is a multiple of nr (unitN)
	cols := nt / nr * nr
	var tmp [thinRows * nr]float32
	var rest [thinRows * thinMaxK]float32
	for ir := 0; ir < mt; ir += thinRows {
		rows := min(thinRows, mt-ir)
		a, lda := w.a[(i0+ir)*w.lda:], w.lda
		if rows < thinRows {
			clear(rest[:])
			for i := range rows {
				copy(rest[i*k:(i+1)*k], w.a[(i0+ir+i)*w.lda:])
			}
			a, lda = rest[:], k
		}
		c := w.c[(i0+ir)*w.ldc+j0:]
		if rows == thinRows && cols > 0 {
			w.thin(k, a, lda, bp, cols/nr, c, w.ldc, w.acc)
		}
		for jr := 0; jr < nt; jr += nr {
			if rows == thinRows && jr < cols {
				continue
			}
			nn := min(nr, nt-jr)
			w.thin(k, a, lda, bp[(jr/nr)*k*nr:], 1, tmp[:], nr, false)
			for i := range rows {
				addInto(c[i*w.ldc+jr:][:nn], tmp[i*nr:i*nr+nn], w.acc)
			}
		}
	}
}

// sweep runs the tile kernel over C[i0:i0+mt, j0:j0+nt] for one k-block of kb, from the
// packed A block and the packed B panels bp. With pf set, each panel's sweep first hints
// its share of pf's runs into L2, so the next block's weight streams in from memory while
// this one is multiplied (a float32 weight packs from memory otherwise: the experts' 48-row
// products spent about as long packing B as multiplying). Two full panels at a time go
// through the wide kernel where there is one, for every whole pair of A micro-panels.
func (w *worker) sweep(kb, i0, mt, j0, nt int, bp []float32, acc bool, pf *bAhead) {
	if w.edge != nil && w.wide != nil {
		w.sweepWide(kb, i0, mt, j0, nt, bp, acc, pf)
		return
	}
	panels := (nt + nr - 1) / nr
	for jr := 0; jr < nt; jr += nr {
		q := jr / nr
		wide := w.wide != nil && jr+2*nr <= nt && mt >= 2*mr
		if pf != nil {
			last := q + 1
			if wide {
				last++
			}
			pf.hint(q*pf.segs/panels, last*pf.segs/panels)
		}
		panel := bp[jr*kb:]
		if !wide {
			w.sweepPanel(kb, i0, 0, mt, j0+jr, min(nr, nt-jr), panel, acc)
			continue
		}
		next := bp[(jr+nr)*kb:]
		ir := 0
		for ; ir+2*mr <= mt; ir += 2 * mr {
			w.wide(kb, w.curA[ir*kb:], w.curA[(ir+mr)*kb:], panel, next, nr, w.c[(i0+ir)*w.ldc+j0+jr:], w.ldc, acc)
		}
		w.sweepPanel(kb, i0, ir, mt, j0+jr, nr, panel, acc)
		w.sweepPanel(kb, i0, ir, mt, j0+jr+nr, nr, next, acc)
		jr += nr
	}
}

// sweepWide is sweep with the wide and edge kernels: C is covered in blocks of two panels
// (2nr columns, fewer at the right edge) by 2mr rows (fewer at the bottom), every block in
// one kernel call that stores straight into C.
func (w *worker) sweepWide(kb, i0, mt, j0, nt int, bp []float32, acc bool, pf *bAhead) {
	panels := (nt + nr - 1) / nr
	for jr := 0; jr < nt; jr += 2 * nr {
		q := jr / nr
		cols := min(2*nr, nt-jr)
		if pf != nil {
			pf.hint(q*pf.segs/panels, min(q+2, panels)*pf.segs/panels)
		}
		panel := bp[jr*kb:]
		next := panel
		if cols > nr {
			next = bp[(jr+nr)*kb:]
		}
		for ir := 0; ir < mt; ir += 2 * mr {
			rows := min(2*mr, mt-ir)
			a0 := w.curA[ir*kb:]
			a1 := a0
			if rows > mr {
				a1 = w.curA[(ir+mr)*kb:]
			}
			c := w.c[(i0+ir)*w.ldc+j0+jr:]
			switch {
			case rows == 2*mr && cols == 2*nr:
				w.wide(kb, a0, a1, panel, next, nr, c, w.ldc, acc)
			case rows == 2*mr && cols == nr:
				w.pair(kb, a0, a1, panel, nr, c, w.ldc, acc)
			default:
				w.edge(kb, a0, a1, panel, next, nr, c, w.ldc, acc, rows, cols)
			}
		}
	}
}

// sweepPanel runs the tile kernels down rows ir..mt−1 of the block at row i0 for one B
// panel, whose first nn columns are C's columns j..j+nn−1.
func (w *worker) sweepPanel(kb, i0, ir, mt, j, nn int, panel []float32, acc bool) {
	for ; ir < mt; ir += mr {
		mm := min(mr, mt-ir)
		ap := w.curA[ir*kb:]
		off := (i0+ir)*w.ldc + j
		if w.pair != nil && nn == nr && ir+2*mr <= mt {
			w.pair(kb, ap, w.curA[(ir+mr)*kb:], panel, nr, w.c[off:], w.ldc, acc)
			ir += mr
			continue
		}
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
