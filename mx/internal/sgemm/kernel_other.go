//go:build !amd64 || purego

package sgemm

import "unsafe"

// defaultKernels is the portable kernel: no assembly kernel is built for this target.
func defaultKernels() kernels { return goKernels() }

func transpose8(src *float32, ld int, dst *float32, ldd int) {
	transpose8Go(unsafe.Slice(src, 7*ld+8), ld, unsafe.Slice(dst, 7*ldd+8), ldd)
}

// transpose8Run is transpose8 on n consecutive blocks along the rows of src.
func transpose8Run(src *float32, ld int, dst *float32, ldd int, n int) {
	for b := range n {
		transpose8((*float32)(unsafe.Add(unsafe.Pointer(src), 32*b)), ld, (*float32)(unsafe.Add(unsafe.Pointer(dst), 32*b*ldd)), ldd)
	}
}

const packAVX2 = false

func packA6AVX2(dst, src *float32, lda, blocks int) { panic("sgemm: no AVX2 packing") }

const packRowsAVX = false

func packRows8AVX(src *float32, ld int, dst *float32, panels int, pstride int) {
	panic("sgemm: no AVX packing")
}

// prefetchL2 is never called here: the portable kernels do not prefetch.
func prefetchL2(p *float32, n int) { panic("sgemm: no prefetch") }
