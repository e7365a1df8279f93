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
