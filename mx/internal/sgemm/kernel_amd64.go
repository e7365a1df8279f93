//go:build amd64 && !purego

package sgemm

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/cpu"
)

func hasAVX2FMA() bool { return cpu.X86.HasAVX2 && cpu.X86.HasFMA }

// hasAVX512 says whether the CPU (and the OS, which must save ZMM state) runs AVX-512F.
func hasAVX512() bool { return hasAVX2FMA() && cpu.X86.HasAVX512F }

// avx2Kernels are the AVX2/FMA kernels.
func avx2Kernels() kernels { return kernels{tile6x16: kernelAVX2, row: rowAVX2, skinny: skinnyAVX2} }

// defaultKernels are the AVX2/FMA kernels where the CPU has both — with the AVX-512 pair
// kernel where it has that too — and the Go kernel otherwise.
func defaultKernels() kernels {
	if !hasAVX2FMA() {
		return goKernels()
	}
	ks := avx2Kernels()
	ks.prefetch = true
	if hasAVX512() {
		ks.tile6x16, ks.pair, ks.thin, ks.skinnyT16 = kernel6x16AVX512, kernelAVX512, thinAVX512, skinnyT16AVX512
		ks.wide, ks.edge, ks.inplace = kernelWideAVX512, edgeAVX512, inplaceAVX512
	}
	return ks
}

// kernelAVX512 checks the slice bounds the assembly relies on, then runs it.
func kernelAVX512(kc int, a0, a1, b []float32, ldb int, c []float32, ldc int, acc bool) {
	if kc == 0 {
		kernelAVX2(kc, a0, b, ldb, c, ldc, acc)
		kernelAVX2(kc, a1, b, ldb, c[mr*ldc:], ldc, acc)
		return
	}
	_ = a0[kc*mr-1]
	_ = a1[kc*mr-1]
	_ = b[(kc-1)*ldb+nr-1]
	_ = c[(2*mr-1)*ldc+nr-1]
	kern12x16(kc, &a0[0], &a1[0], &b[0], ldb, &c[0], ldc, acc)
}

// kernelWideAVX512 checks the slice bounds the assembly relies on, then runs it.
func kernelWideAVX512(kc int, a0, a1, b0, b1 []float32, ldb int, c []float32, ldc int, acc bool) {
	if kc == 0 {
		kernelAVX512(kc, a0, a1, b0, ldb, c, ldc, acc)
		kernelAVX512(kc, a0, a1, b1, ldb, c[nr:], ldc, acc)
		return
	}
	_ = a0[kc*mr-1]
	_ = a1[kc*mr-1]
	_ = b0[(kc-1)*ldb+nr-1]
	_ = b1[(kc-1)*ldb+nr-1]
	_ = c[(2*mr-1)*ldc+2*nr-1]
	kern12x32(kc, &a0[0], &a1[0], &b0[0], &b1[0], ldb, &c[0], ldc, acc)
}

// kern12x32 is kernelWideAVX512 without bounds checks; kc must be positive.
//
//go:noescape
func kern12x32(kc int, a0, a1, b0, b1 *float32, ldb int, c *float32, ldc int, acc bool)

// skinnyT16AVX512 checks the slice bounds the assembly relies on, then runs it.
func skinnyT16AVX512(kc int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int, acc bool) {
	if kc == 0 {
		for i := range 2 * skinnyRows {
			if !acc {
				clear(c[i*ldc : i*ldc+skinnyCols])
			}
		}
		return
	}
	_ = a[(kc-1)*lda+2*skinnyRows-1]
	_ = b[(kc-1)*ldb+skinnyCols-1]
	_ = c[(2*skinnyRows-1)*ldc+skinnyCols-1]
	skinnyT16(kc, &a[0], lda, &b[0], ldb, &c[0], ldc, acc)
}

// skinnyT16 is skinnyT16AVX512 without bounds checks; kc must be positive.
//
//go:noescape
func skinnyT16(kc int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int, acc bool)

// thinAVX512 checks the slice bounds the assembly relies on, then runs it.
func thinAVX512(k int, a []float32, lda int, b []float32, chunks int, c []float32, ldc int, acc bool) {
	if k == 0 || chunks == 0 {
		panic("sgemm: thin kernel without k steps or columns")
	}
	_ = a[(thinRows-1)*lda+k-1]
	_ = b[chunks*k*nr-1]
	_ = c[(thinRows-1)*ldc+chunks*nr-1]
	thin8x16(k, &a[0], lda, &b[0], chunks, &c[0], ldc, acc)
}

// thin8x16 is thinAVX512 without bounds checks; k and chunks must be positive.
//
//go:noescape
func thin8x16(k int, a *float32, lda int, b *float32, chunks int, c *float32, ldc int, acc bool)

// kernel6x16AVX512 is kernelAVX2 with a ZMM register per tile row.
func kernel6x16AVX512(kc int, a, b []float32, ldb int, c []float32, ldc int, acc bool) {
	if kc == 0 {
		kernelAVX2(kc, a, b, ldb, c, ldc, acc)
		return
	}
	_ = a[kc*mr-1]
	_ = b[(kc-1)*ldb+nr-1]
	_ = c[(mr-1)*ldc+nr-1]
	kern6x16Z(kc, &a[0], &b[0], ldb, &c[0], ldc, acc)
}

// kern6x16Z is kernel6x16AVX512 without bounds checks; kc must be positive.
//
//go:noescape
func kern6x16Z(kc int, a, b *float32, ldb int, c *float32, ldc int, acc bool)

// kern12x16 is kernelAVX512 without bounds checks; kc must be positive.
//
//go:noescape
func kern12x16(kc int, a0, a1, b *float32, ldb int, c *float32, ldc int, acc bool)

// kernelAVX2 checks the slice bounds the assembly relies on, then runs it.
func kernelAVX2(kc int, a, b []float32, ldb int, c []float32, ldc int, acc bool) {
	if kc == 0 {
		storeTile(c, ldc, acc, &[mr * nr]float32{})
		return
	}
	_ = a[kc*mr-1]
	_ = b[(kc-1)*ldb+nr-1]
	_ = c[(mr-1)*ldc+nr-1]
	kern6x16(kc, &a[0], &b[0], ldb, &c[0], ldc, acc)
}

// rowAVX2 checks the slice bounds the assembly relies on, then runs it.
func rowAVX2(kc int, a []float32, astride int, b []float32, ldb int, sums []float32) {
	n := len(sums)
	if kc == 0 || n == 0 {
		return
	}
	if n%rowUnit != 0 {
		panic("sgemm: row kernel width not a multiple of 32")
	}
	_ = a[(kc-1)*astride]
	_ = b[(kc-1)*ldb+n-1]
	rowFMA(kc, &a[0], astride, &b[0], ldb, &sums[0], n)
}

// kern6x16 is kernelAVX2 without bounds checks; kc must be positive.
//
//go:noescape
func kern6x16(kc int, a, b *float32, ldb int, c *float32, ldc int, acc bool)

// rowFMA is rowAVX2 without bounds checks; kc and n must be positive, n a multiple of 32.
//
//go:noescape
func rowFMA(kc int, a *float32, astride int, b *float32, ldb int, c *float32, n int)

//go:noescape
func transpose8RunAVX(src *float32, ld int, dst *float32, ldd int, n int)

// transpose8Run is transpose8 on n consecutive blocks along the rows of src (src + 8b,
// dst + 8b·ldd), in one call where the CPU has AVX.
func transpose8Run(src *float32, ld int, dst *float32, ldd int, n int) {
	if cpu.X86.HasAVX {
		transpose8RunAVX(src, ld, dst, ldd, n)
		return
	}
	for b := range n {
		transpose8((*float32)(unsafe.Add(unsafe.Pointer(src), 32*b)), ld, (*float32)(unsafe.Add(unsafe.Pointer(dst), 32*b*ldd)), ldd)
	}
}

func transpose8(src *float32, ld int, dst *float32, ldd int) {
	if cpu.X86.HasAVX {
		transpose8RunAVX(src, ld, dst, ldd, 1)
		return
	}
	transpose8Go(unsafe.Slice(src, 7*ld+8), ld, unsafe.Slice(dst, 7*ldd+8), ldd)
}

// skinnyAVX2 checks the slice bounds the assembly relies on, then runs it.
func skinnyAVX2(ta Trans, kc int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int, acc bool) {
	if kc == 0 {
		for i := range skinnyRows {
			row := c[i*ldc : i*ldc+skinnyCols]
			if !acc {
				clear(row)
			}
		}
		return
	}
	if ta {
		_ = a[(kc-1)*lda+skinnyRows-1]
	} else {
		_ = a[(skinnyRows-1)*lda+kc-1]
	}
	_ = b[(kc-1)*ldb+skinnyCols-1]
	_ = c[(skinnyRows-1)*ldc+skinnyCols-1]
	if ta {
		skinnyT(kc, &a[0], lda, &b[0], ldb, &c[0], ldc, acc)
		return
	}
	skinnyN(kc, &a[0], lda, &b[0], ldb, &c[0], ldc, acc)
}

// skinnyN is skinnyAVX2 for an untransposed A, without bounds checks; kc must be positive.
//
//go:noescape
func skinnyN(kc int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int, acc bool)

// skinnyT is skinnyAVX2 for a transposed A, without bounds checks; kc must be positive.
//
//go:noescape
func skinnyT(kc int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int, acc bool)

// packA6AVX2 packs blocks·8 k steps of one full untransposed A micro-panel (pack.go).
//
//go:noescape
func packA6AVX2(dst, src *float32, lda, blocks int)

// packAVX2 says whether packA may use packA6AVX2.
var packAVX2 = cpu.X86.HasAVX2

// packRows8AVX copies a group of eight rows of an untransposed B into its panels
// (packBRows), 64 bytes per row and panel.
//
//go:noescape
func packRows8AVX(src *float32, ld int, dst *float32, panels int, pstride int)

// packRowsAVX says whether packBRows may use packRows8AVX.
var packRowsAVX = cpu.X86.HasAVX

// prefetchL2 hints p[0..n) into L2 (PREFETCHT1); n must be positive. No value changes.
// PREFETCHNTA instead lost 10 % of the float32 bench step at 2 threads and 4 % at 16 on
// the device, slower in every round (session 25): the weight's lines are wanted in L2.
//
//go:noescape
func prefetchL2(p *float32, n int)

// fmaPeakZ runs n iterations of twelve independent AVX-512 fused multiply-adds on
// registers (384 flops each): the FMA peak the kernels are measured against
// (BenchmarkFMAPeak). n must be positive.
//
//go:noescape
func fmaPeakZ(n int)

// fmaPeakY is fmaPeakZ with AVX2 registers (192 flops an iteration).
//
//go:noescape
func fmaPeakY(n int)

// edgeAVX512 checks the slice bounds the assembly relies on, then runs the edge kernel
// for rows×cols: the 6-row kernels for at most mr rows (a1 unread), the 16-wide ones for
// at most nr columns (b1 unread).
func edgeAVX512(kc int, a0, a1, b0, b1 []float32, ldb int, c []float32, ldc int, acc bool, rows, cols int) {
	if kc == 0 || rows < 1 || rows > 2*mr || cols < 1 || cols > 2*nr {
		panic(fmt.Sprintf("sgemm: edge kernel on %d×%d with %d k steps", rows, cols, kc))
	}
	_ = a0[kc*mr-1]
	_ = b0[(kc-1)*ldb+nr-1]
	_ = c[(rows-1)*ldc+cols-1]
	tall, wide := rows > mr, cols > nr
	if tall {
		_ = a1[kc*mr-1]
	}
	if wide {
		_ = b1[(kc-1)*ldb+nr-1]
	}
	last := cols
	if wide {
		last -= nr
	}
	mask := uint16(1<<last - 1)
	k := kern6x16m
	switch {
	case tall && wide:
		k = kern12x32m
	case tall:
		k = kern12x16m
	case wide:
		k = kern6x32m
	}
	k(kc, &a0[0], &a1[0], &b0[0], &b1[0], ldb, &c[0], ldc, acc, rows, mask)
}

// inplaceAVX512 checks the slice bounds the assembly relies on, then runs the in-place
// wide kernel.
func inplaceAVX512(ta Trans, kc int, a []float32, lda int, b0, b1 []float32, ldb int, c []float32, ldc int, acc bool) {
	if kc == 0 {
		panic("sgemm: in-place kernel without k steps")
	}
	_ = b0[(kc-1)*ldb+nr-1]
	_ = b1[(kc-1)*ldb+nr-1]
	_ = c[(2*mr-1)*ldc+2*nr-1]
	if ta {
		_ = a[(kc-1)*lda+2*mr-1]
		kern12x32t(kc, &a[0], lda, &b0[0], &b1[0], ldb, &c[0], ldc, acc)
		return
	}
	_ = a[(2*mr-1)*lda+kc-1]
	kern12x32n(kc, &a[0], lda, &b0[0], &b1[0], ldb, &c[0], ldc, acc)
}

//go:noescape
func kern12x32t(kc int, a *float32, lda int, b0, b1 *float32, ldb int, c *float32, ldc int, acc bool)

//go:noescape
func kern12x32n(kc int, a *float32, lda int, b0, b1 *float32, ldb int, c *float32, ldc int, acc bool)

// kern12x32m and kern6x32m compute a tile of C that is not whole — rows (at most the
// tile's height) rows, and a last panel of which mask selects the columns in C — storing
// straight into C: every element is formed as the tile kernels form it (see
// edge512_amd64.s).
//
//go:noescape
func kern12x32m(kc int, a0, a1, b0, b1 *float32, ldb int, c *float32, ldc int, acc bool, rows int, mask uint16)

//go:noescape
func kern6x32m(kc int, a0, a1, b0, b1 *float32, ldb int, c *float32, ldc int, acc bool, rows int, mask uint16)

//go:noescape
func kern12x16m(kc int, a0, a1, b0, b1 *float32, ldb int, c *float32, ldc int, acc bool, rows int, mask uint16)

//go:noescape
func kern6x16m(kc int, a0, a1, b0, b1 *float32, ldb int, c *float32, ldc int, acc bool, rows int, mask uint16)
