//go:build !amd64 || purego

package quant

func decodeT8x8(bits int, words []uint32, wstride int, sc, bi *[8]float32, dst []float32, ldd int) {
	decodeT8x8Go(bits, words, wstride, sc, bi, dst, ldd)
}

func decodeN16(bits int, words []uint32, sc, bi float32, dst []float32, stride, n int) {
	decodeN16Go(bits, words, sc, bi, dst, stride, n)
}
