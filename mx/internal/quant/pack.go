package quant

// packCodes writes codes (each < 2^bits) into words as one little-endian
// bit stream. len(codes)·bits must be a multiple of 32, which holds for
// every group, so a group never shares a word with its neighbour.
func packCodes(words []uint32, codes []uint8, bits int) {
	var acc uint64 // pending stream bits, lowest first
	n := 0         // number of pending bits in acc
	wi := 0
	for _, c := range codes {
		acc |= uint64(c) << n
		n += bits
		if n >= 32 {
			words[wi] = uint32(acc)
			wi++
			acc >>= 32
			n -= 32
		}
	}
}

// Lookup tables from a packed byte to its codes as floats: one load
// replaces a shift, a mask and an int→float conversion per code, which
// roughly doubles decoding speed. They are computed once and never written.
var (
	nibbles = func() (t [256][2]float32) { // 4-bit: low nibble first
		for i := range t {
			t[i] = [2]float32{float32(i & 15), float32(i >> 4)}
		}
		return t
	}()
	bytes8 = func() (t [256]float32) {
		for i := range t {
			t[i] = float32(i)
		}
		return t
	}()
)

// decodeCodes unpacks len(dst) codes from words into dst as floats.
// The 2/4/8-bit cases never straddle a word and get unrolled loops; 3, 5
// and 6 bits go through a 64-bit window that is refilled a word at a time.
func decodeCodes(dst []float32, words []uint32, bits int) {
	switch bits {
	case 4:
		words = words[:len(dst)/8]
		for i, w := range words {
			d := (*[8]float32)(dst[i*8 : i*8+8])
			a, b, c, e := &nibbles[w&255], &nibbles[w>>8&255], &nibbles[w>>16&255], &nibbles[w>>24]
			d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7] = a[0], a[1], b[0], b[1], c[0], c[1], e[0], e[1]
		}
	case 8:
		words = words[:len(dst)/4]
		for i, w := range words {
			d := (*[4]float32)(dst[i*4 : i*4+4])
			d[0], d[1], d[2], d[3] = bytes8[w&255], bytes8[w>>8&255], bytes8[w>>16&255], bytes8[w>>24]
		}
	case 2:
		words = words[:len(dst)/16]
		for i, w := range words {
			d := (*[16]float32)(dst[i*16 : i*16+16])
			for j := range d {
				d[j] = float32(w >> (2 * j) & 3)
			}
		}
	default:
		mask := uint64(1)<<bits - 1
		var acc uint64
		n := 0
		wi := 0
		for j := range dst {
			if n < bits {
				acc |= uint64(words[wi]) << n
				wi++
				n += 32
			}
			dst[j] = float32(acc & mask)
			acc >>= bits
			n -= bits
		}
	}
}

// dequantizeRow writes scale·q + bias for one packed row of len(dst)
// values into dst.
func dequantizeRow(dst []float32, words []uint32, scales, biases []float32, p Params) {
	gs := p.GroupSize
	wpg := gs * p.Bits / 32
	for g := range len(dst) / gs {
		d := dst[g*gs : (g+1)*gs]
		decodeCodes(d, words[g*wpg:(g+1)*wpg], p.Bits)
		s, b := scales[g], biases[g]
		for j, q := range d {
			d[j] = s*q + b
		}
	}
}
