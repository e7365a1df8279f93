package half

import (
	"fmt"
	"math"
	"math/bits"
)

// IEEE binary16: 1 sign bit, 5 exponent bits (bias 15), 10 mantissa bits.
// The smallest normal is 2^-14, the smallest subnormal 2^-24, the largest
// finite value 65504.
const (
	f16ExpMask  = 0x7c00
	f16MantMask = 0x03ff
	f16QuietBit = 0x0200
)

// FromF16 returns the float32 equal to the binary16 value h. Every binary16
// value, subnormals included, is exactly representable as a float32. NaN
// payloads move to the top of the float32 mantissa, so the quiet bit stays
// where IEEE puts it.
func FromF16(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h&f16ExpMask) >> 10
	mant := uint32(h & f16MantMask)
	switch {
	case exp == 0x1f: // Inf or NaN
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case exp != 0: // normal: rebias 15 -> 127
		return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
	case mant == 0:
		return math.Float32frombits(sign)
	}
	// Subnormal: value = mant * 2^-24. Shift the leading one up to the
	// implicit-bit position (bit 10); each shift lowers the exponent by one
	// from the smallest normal exponent, -14.
	shift := uint32(bits.LeadingZeros16(uint16(mant))) - 5 // bring bit 10 on top
	mant = (mant << shift) & f16MantMask
	exp = 127 - 14 - shift
	return math.Float32frombits(sign | exp<<23 | mant<<13)
}

// ToF16 rounds f to the nearest binary16, ties to even. Magnitudes that round
// above 65504 become infinity; those below 2^-14 become subnormals and those
// at or below 2^-25 (half the smallest subnormal, a tie that goes to even)
// become signed zero. A NaN becomes a quiet NaN with the same sign.
func ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23) & 0xff
	mant := b & 0x7fffff
	if exp == 0xff {
		if mant != 0 {
			return sign | f16ExpMask | f16QuietBit | uint16(mant>>13)
		}
		return sign | f16ExpMask
	}
	e := exp - 127 + 15 // binary16 biased exponent
	if e >= 0x1f {
		return sign | f16ExpMask
	}
	if e >= 1 {
		// Normal: keep 10 of the 23 mantissa bits and round on the other 13.
		// A carry out of the mantissa lands in the exponent, which is right,
		// including the step from 65504 up to infinity.
		h := uint16(e)<<10 | uint16(mant>>13)
		return sign | roundShifted(h, mant&0x1fff, 13)
	}
	// Subnormal result. The float32 value is m * 2^(exp-150) with m the
	// 24-bit significand; as a binary16 subnormal it is h * 2^-24, so
	// h = m >> (14 - e). For e < -10 the shift exceeds 24, the value is below
	// 2^-25, and it rounds to zero. (float32 subnormals have exp 0, e = -112.)
	if e < -10 {
		return sign
	}
	m := mant | 0x800000
	shift := uint(14 - e) // 14..24
	h := uint16(m >> shift)
	// A carry from the largest subnormal to 0x0400 yields the smallest
	// normal, which is again correct.
	return sign | roundShifted(h, m&(1<<shift-1), shift)
}

// roundShifted rounds h, the kept bits of a value whose discarded low
// `shift` bits are rest, to nearest with ties to even.
func roundShifted(h uint16, rest uint32, shift uint) uint16 {
	half := uint32(1) << (shift - 1)
	if rest > half || (rest == half && h&1 == 1) {
		h++
	}
	return h
}

// F16ToF32 widens src into dst. It panics if dst is shorter than src.
func F16ToF32(dst []float32, src []uint16) {
	if len(dst) < len(src) {
		panic(fmt.Sprintf("half.F16ToF32: dst has %d elements, src %d", len(dst), len(src)))
	}
	dst = dst[:len(src)]
	for i, h := range src {
		dst[i] = FromF16(h)
	}
}

// F32ToF16 rounds src into dst with ToF16. It panics if dst is shorter than
// src.
func F32ToF16(dst []uint16, src []float32) {
	if len(dst) < len(src) {
		panic(fmt.Sprintf("half.F32ToF16: dst has %d elements, src %d", len(dst), len(src)))
	}
	dst = dst[:len(src)]
	for i, f := range src {
		dst[i] = ToF16(f)
	}
}
