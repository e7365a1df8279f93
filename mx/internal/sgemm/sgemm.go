package sgemm

import (
	"fmt"
	"runtime"
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
	// ncMax bounds the packed B slab (kc×ncMax, 1 MiB), which lives in L2/L3 (2 MiB of
	// L2 a core on the device's Xeon; against 512 columns, bench preset on 2 threads:
	// float32 951 → 1001 tokens/s, 4-bit 1080 → 1090, medians of 4 alternating rounds).
	ncMax = 1024
	// rowCutMin is the fewest rows cut leaves a row tile of a shared packed A: each row
	// tile decodes or packs its columns of B again, which at 96 rows of a 4-bit weight is
	// ~5 % of the tile's products.
	rowCutMin = 96

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
