//go:build amd64 && !purego

package quant

import "golang.org/x/sys/cpu"

var hasAVX2 = cpu.X86.HasAVX2

//go:noescape
func decodeT4AVX2(words *uint32, wstride int, sc, bi *float32, dst *float32, ldd int)

//go:noescape
func decodeT8AVX2(words *uint32, wstride int, sc, bi *float32, dst *float32, ldd int)

// decodeT8x8 is decodeT8x8Go through AVX2 where the CPU has it (same values: the
// assembly multiplies then adds, rounding twice, as the Go code does).
func decodeT8x8(bits int, words []uint32, wstride int, sc, bi *[8]float32, dst []float32, ldd int) {
	if !hasAVX2 {
		decodeT8x8Go(bits, words, wstride, sc, bi, dst, ldd)
		return
	}
	_ = words[7*wstride+bits/4-1]
	_ = dst[7*ldd+7]
	if bits == 4 {
		decodeT4AVX2(&words[0], wstride, &sc[0], &bi[0], &dst[0], ldd)
	} else {
		decodeT8AVX2(&words[0], wstride, &sc[0], &bi[0], &dst[0], ldd)
	}
}

//go:noescape
func decodeN4AVX2(words *uint32, sc, bi float32, dst *float32, stride, n int)

//go:noescape
func decodeN8AVX2(words *uint32, sc, bi float32, dst *float32, stride, n int)

// decodeN16 is decodeN16Go through AVX2 where the CPU has it (same values).
func decodeN16(bits int, words []uint32, sc, bi float32, dst []float32, stride, n int) {
	if !hasAVX2 || n <= 0 {
		decodeN16Go(bits, words, sc, bi, dst, stride, n)
		return
	}
	_ = words[n*bits/2-1]
	_ = dst[(n-1)*stride+15]
	if bits == 4 {
		decodeN4AVX2(&words[0], sc, bi, &dst[0], stride, n)
	} else {
		decodeN8AVX2(&words[0], sc, bi, &dst[0], stride, n)
	}
}
