package quant

// decodeT8x8Go dequantizes eight codes of each of eight rows and writes row i down
// column i of dst: dst[q·ldd + i] = sc[i]·code_q + bi[i], where row i's codes start at
// words[i·wstride] (4- or 8-bit codes, so eight of them fill one or two whole words).
// The explicit conversion keeps the product rounded on its own (no fused multiply-add
// on any target), as the assembly and the lookup tables of packT compute it.
func decodeT8x8Go(bits int, words []uint32, wstride int, sc, bi *[8]float32, dst []float32, ldd int) {
	for i := range 8 {
		w := words[i*wstride:]
		for q := range 8 {
			var c uint32
			if bits == 4 {
				c = w[0] >> (4 * q) & 15
			} else {
				c = w[q/4] >> (8 * (q % 4)) & 255
			}
			dst[q*ldd+i] = float32(sc[i]*float32(c)) + bi[i]
		}
	}
}

// decodeT8x8RunGo is n calls of decodeT8x8Go on consecutive blocks along k: block b
// reads each row's codes 8b..8b+7 and writes dst rows 8b..8b+7.
func decodeT8x8RunGo(bits int, words []uint32, wstride int, sc, bi *[8]float32, dst []float32, ldd, n int) {
	for b := range n {
		decodeT8x8Go(bits, words[b*bits/4:], wstride, sc, bi, dst[8*b*ldd:], ldd)
	}
}

// decodeT16As8x8 is decodeT16Run as two runs of 8×8 blocks: rows 0–7 into dst columns
// 0–7, rows 8–15 into columns 8–15.
func decodeT16As8x8(bits int, words []uint32, wstride int, sc, bi *[16]float32, dst []float32, ldd, n int) {
	decodeT8x8Run(bits, words, wstride, (*[8]float32)(sc[:8]), (*[8]float32)(bi[:8]), dst, ldd, n)
	decodeT8x8Run(bits, words[8*wstride:], wstride, (*[8]float32)(sc[8:]), (*[8]float32)(bi[8:]), dst[8:], ldd, n)
}

// decodeN16Go dequantizes n runs of 16 consecutive 4- or 8-bit codes of one group (the
// runs consecutive in words) into dst[i·stride + j] = sc·code + bi, each product rounded
// on its own as the lookup tables of packN compute it.
func decodeN16Go(bits int, words []uint32, sc, bi float32, dst []float32, stride, n int) {
	per := 32 / bits
	mask := uint32(1)<<bits - 1
	for i := range n {
		w := words[i*16/per:]
		d := dst[i*stride : i*stride+16]
		for j := range d {
			c := w[j/per] >> (bits * (j % per)) & mask
			d[j] = float32(sc*float32(c)) + bi
		}
	}
}

// decodeN16RowsGo is decodeN16Go for rows consecutive rows of W (see decodeN16Rows).
func decodeN16RowsGo(bits int, words []uint32, wpr int, scales, biases []float32, ng int, dst []float32, stride, n, rows int) {
	for r := range rows {
		decodeN16Go(bits, words[r*wpr:], scales[r*ng], biases[r*ng], dst[r*16:], stride, n)
	}
}
