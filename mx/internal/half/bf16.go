package half

import (
	"fmt"
	"math"
)

// bfloat16 is the upper 16 bits of an IEEE float32: 1 sign bit, 8 exponent
// bits, 7 mantissa bits. Widening is therefore a shift, and narrowing is a
// rounding of the low 16 bits.

// bf16QuietBit is the top mantissa bit of a bfloat16; set, it marks a NaN quiet.
const bf16QuietBit = 0x0040

// FromBF16 returns the float32 whose upper half is h. It is exact for every
// pattern, NaNs included.
func FromBF16(h uint16) float32 {
	return math.Float32frombits(uint32(h) << 16)
}

// ToBF16 rounds f to the nearest bfloat16, ties to even. Values beyond the
// largest finite bfloat16 round to infinity as IEEE rounding requires;
// float32 subnormals round to bfloat16 subnormals (or zero), never flushed
// early. A NaN becomes a quiet NaN with the same sign.
func ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		// Truncating could clear every mantissa bit and turn the NaN into
		// an infinity, so the quiet bit is forced on.
		return uint16(b>>16) | bf16QuietBit
	}
	// Adding 0x7fff rounds up exactly when the low half exceeds 0x8000;
	// the extra +lsb makes a tie (low half == 0x8000) round up only when the
	// kept half is odd, i.e. towards even. A carry out of the mantissa bumps
	// the exponent, which is the correct rounding, and from the largest
	// finite value it lands on infinity (0x7f80).
	lsb := (b >> 16) & 1
	return uint16((b + 0x7fff + lsb) >> 16)
}

// BF16ToF32 widens src into dst. It panics if dst is shorter than src.
func BF16ToF32(dst []float32, src []uint16) {
	if len(dst) < len(src) {
		panic(fmt.Sprintf("half.BF16ToF32: dst has %d elements, src %d", len(dst), len(src)))
	}
	dst = dst[:len(src)]
	for i, h := range src {
		dst[i] = FromBF16(h)
	}
}

// F32ToBF16 rounds src into dst with ToBF16. It panics if dst is shorter
// than src.
func F32ToBF16(dst []uint16, src []float32) {
	if len(dst) < len(src) {
		panic(fmt.Sprintf("half.F32ToBF16: dst has %d elements, src %d", len(dst), len(src)))
	}
	dst = dst[:len(src)]
	for i, f := range src {
		dst[i] = ToBF16(f)
	}
}
