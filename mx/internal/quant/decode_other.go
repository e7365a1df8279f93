//go:build !amd64 || purego

package quant

func decodeT8x8(bits int, words []uint32, wstride int, sc, bi *[8]float32, dst []float32, ldd int) {
	decodeT8x8Go(bits, words, wstride, sc, bi, dst, ldd)
}
