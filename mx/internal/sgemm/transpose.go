package sgemm

// Transpose8 sets dst[q·ldd + i] = src[i·ld + q] for i, q < 8: one 8×8 block, with
// AVX shuffles where the CPU has them. It is how transposed operands are packed (and
// how package quant lays decoded rows down panel columns); it panics if a slice is too
// short for its block.
func Transpose8(src []float32, ld int, dst []float32, ldd int) {
	_ = src[7*ld+7]
	_ = dst[7*ldd+7]
	transpose8(&src[0], ld, &dst[0], ldd)
}

// transpose8Go is the portable Transpose8 on checked pointers' slices.
func transpose8Go(src []float32, ld int, dst []float32, ldd int) {
	for i := range 8 {
		row := src[i*ld : i*ld+8]
		for q, v := range row {
			dst[q*ldd+i] = v
		}
	}
}
