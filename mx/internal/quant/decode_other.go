//go:build !amd64 || purego

package quant

func decodeT8x8Run(bits int, words []uint32, wstride int, sc, bi *[8]float32, dst []float32, ldd, n int) {
	decodeT8x8RunGo(bits, words, wstride, sc, bi, dst, ldd, n)
}

func decodeN16Rows(bits int, words []uint32, wpr int, scales, biases []float32, ng int, dst []float32, stride, n, rows int) {
	decodeN16RowsGo(bits, words, wpr, scales, biases, ng, dst, stride, n, rows)
}

func decodeT16Run(bits int, words []uint32, wstride int, sc, bi *[16]float32, dst []float32, ldd, n int) {
	decodeT16As8x8(bits, words, wstride, sc, bi, dst, ldd, n)
}

// hintRows does nothing here: the portable decoders do not prefetch.
func hintRows(m []float32, ld, r, n, c int) {}
