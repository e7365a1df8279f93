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
