package half

import (
	"math"
	"testing"
)

// bf16Value decodes a bfloat16 pattern from its definition, independently of
// FromBF16: (-1)^s * 2^(e-127) * (1 + m/128) for normals and
// (-1)^s * 2^-126 * (m/128) for subnormals.
func bf16Value(h uint16) float64 {
	s, e, m := h>>15, int(h>>7)&0xff, float64(h&0x7f)
	var v float64
	switch e {
	case 0xff:
		if m != 0 {
			return math.NaN()
		}
		v = math.Inf(1)
	case 0:
		v = math.Ldexp(m/128, -126)
	default:
		v = math.Ldexp(1+m/128, e-127)
	}
	if s == 1 {
		v = -v
	}
	return v
}

// f16Value does the same for binary16: 2^(e-15) * (1 + m/1024) and
// 2^-14 * (m/1024).
func f16Value(h uint16) float64 {
	s, e, m := h>>15, int(h>>10)&0x1f, float64(h&0x3ff)
	var v float64
	switch e {
	case 0x1f:
		if m != 0 {
			return math.NaN()
		}
		v = math.Inf(1)
	case 0:
		v = math.Ldexp(m/1024, -14)
	default:
		v = math.Ldexp(1+m/1024, e-15)
	}
	if s == 1 {
		v = -v
	}
	return v
}

func isNaN32(f float32) bool { return f != f }

// TestBF16Exhaustive checks every one of the 65536 patterns: widening gives
// the value from the format's definition (sign of zero included), and
// narrowing back returns the same pattern, except that a signalling NaN
// comes back with its quiet bit set.
func TestBF16Exhaustive(t *testing.T) {
	for i := range 1 << 16 {
		h := uint16(i)
		f := FromBF16(h)
		want := bf16Value(h)
		if math.IsNaN(want) {
			if !isNaN32(f) {
				t.Fatalf("FromBF16(%#04x) = %v, want NaN", h, f)
			}
			if got := ToBF16(f); got != h|bf16QuietBit {
				t.Fatalf("ToBF16(FromBF16(%#04x)) = %#04x, want %#04x", h, got, h|bf16QuietBit)
			}
			continue
		}
		if float64(f) != want || math.Signbit(float64(f)) != (h>>15 == 1) {
			t.Fatalf("FromBF16(%#04x) = %v, want %v", h, f, want)
		}
		if got := ToBF16(f); got != h {
			t.Fatalf("ToBF16(FromBF16(%#04x)) = %#04x", h, got)
		}
	}
}

// TestF16Exhaustive is the binary16 twin of TestBF16Exhaustive.
func TestF16Exhaustive(t *testing.T) {
	for i := range 1 << 16 {
		h := uint16(i)
		f := FromF16(h)
		want := f16Value(h)
		if math.IsNaN(want) {
			if !isNaN32(f) {
				t.Fatalf("FromF16(%#04x) = %v, want NaN", h, f)
			}
			if got := ToF16(f); got != h|f16QuietBit {
				t.Fatalf("ToF16(FromF16(%#04x)) = %#04x, want %#04x", h, got, h|f16QuietBit)
			}
			continue
		}
		if float64(f) != want || math.Signbit(float64(f)) != (h>>15 == 1) {
			t.Fatalf("FromF16(%#04x) = %v, want %v", h, f, want)
		}
		if got := ToF16(f); got != h {
			t.Fatalf("ToF16(FromF16(%#04x)) = %#04x", h, got)
		}
	}
}

// TestMidpoints rounds, for every pair of adjacent finite positive 16-bit
// values a < b (b = a+1 as patterns), the exact midpoint and its float32
// neighbours. The midpoint needs one bit more than the 16-bit format and so
// is exact in float32 (8 resp. 12 significant bits out of 24). Just below it
// must give a, just above it b, and the midpoint itself whichever of a, b has
// an even pattern (ties to even). The last pair, max finite -> +Inf, checks
// overflow rounding too. Negative values mirror this through the sign bit.
func TestMidpoints(t *testing.T) {
	for _, c := range []struct {
		name   string
		maxFin uint16
		from   func(uint16) float32
		to     func(float32) uint16
	}{
		{"bf16", 0x7f7f, FromBF16, ToBF16},
		{"f16", 0x7bff, FromF16, ToF16},
	} {
		for a := uint16(0); a <= c.maxFin; a++ {
			b := a + 1
			lo, hi := float64(c.from(a)), float64(c.from(b))
			if b == c.maxFin+1 {
				// The pattern after the largest finite value is +Inf; the
				// rounding boundary is where the next step would be:
				// lo + (lo - previous)/2.
				hi = lo + (lo - float64(c.from(a-1)))
			}
			mid := float32((lo + hi) / 2)
			if float64(mid) != (lo+hi)/2 {
				t.Fatalf("%s: midpoint of %#04x not exact in float32", c.name, a)
			}
			even := a
			if a&1 == 1 {
				even = b
			}
			below := math.Nextafter32(mid, 0)
			above := math.Nextafter32(mid, float32(math.Inf(1)))
			for _, v := range []struct {
				x    float32
				want uint16
			}{{below, a}, {mid, even}, {above, b}} {
				if got := c.to(v.x); got != v.want {
					t.Fatalf("%s: round(%v = %#08x) = %#04x, want %#04x", c.name, v.x, math.Float32bits(v.x), got, v.want)
				}
				if got := c.to(-v.x); got != v.want|0x8000 {
					t.Fatalf("%s: round(%v) = %#04x, want %#04x", c.name, -v.x, got, v.want|0x8000)
				}
			}
		}
	}
}

// TestHandVectors pins a few values whose rounding is worked out by hand.
func TestHandVectors(t *testing.T) {
	inf := float32(math.Inf(1))
	f := math.Float32frombits
	tests := []struct {
		name string
		in   float32
		bf16 uint16
		f16  uint16
	}{
		// 1.0 is 0x3f800000; bf16 keeps 0x3f80, f16 is 2^0 -> exponent 15 -> 0x3c00.
		{"one", 1, 0x3f80, 0x3c00},
		{"minus two", -2, 0xc000, 0xc000},
		{"zero", 0, 0x0000, 0x0000},
		{"negative zero", float32(math.Copysign(0, -1)), 0x8000, 0x8000},
		{"inf", inf, 0x7f80, 0x7c00},
		{"-inf", -inf, 0xff80, 0xfc00},
		// 1 + 2^-8: the bf16 neighbours are 1 (0x3f80, even) and 1+2^-7
		// (0x3f81); a tie, so even wins. In f16 it is exact: mantissa
		// 2^-8 * 1024 = 4 -> 0x3c04.
		{"bf16 tie to even down", f(0x3f808000), 0x3f80, 0x3c04},
		// 1 + 3*2^-8: between 0x3f81 and 0x3f82, tie -> 0x3f82 (even).
		// f16: mantissa 3*2^-8*1024 = 12 -> 0x3c0c.
		{"bf16 tie to even up", f(0x3f818000), 0x3f82, 0x3c0c},
		// One float32 ulp above the tie rounds up.
		{"bf16 above tie", f(0x3f808001), 0x3f81, 0x3c04},
		// 1 + 2^-11: f16 neighbours 1 (0x3c00) and 1+2^-10 (0x3c01): tie -> 0x3c00.
		// bf16 truncates it to 1.0 (far below its half ulp 2^-8).
		{"f16 tie to even down", 1 + 1.0/2048, 0x3f80, 0x3c00},
		// 1 + 3*2^-11: between 0x3c01 and 0x3c02: tie -> 0x3c02.
		{"f16 tie to even up", 1 + 3.0/2048, 0x3f80, 0x3c02},
		// 65504 = (1+1023/1024)*2^15 is the largest f16 -> 0x7bff; as bf16
		// 65504 = 0x477fe000, low half 0xe000 > 0x8000 rounds up to 0x4780 (65536).
		{"f16 max", 65504, 0x4780, 0x7bff},
		// 65520 is halfway between 65504 (odd pattern 0x7bff) and 2^16
		// (would be 0x7c00): ties to even gives 0x7c00 = +Inf.
		{"f16 overflow tie", 65520, 0x4780, 0x7c00},
		{"f16 below overflow tie", math.Nextafter32(65520, 0), 0x4780, 0x7bff},
		// 2^-14 is the smallest f16 normal; bf16 2^-14 = exponent 113 = 0x3880.
		{"f16 min normal", 1.0 / 16384, 0x3880, 0x0400},
		// 2^-24 is the smallest f16 subnormal (pattern 1); bf16 exponent 103 -> 0x3380.
		{"f16 min subnormal", 1.0 / (1 << 24), 0x3380, 0x0001},
		// 2^-25 is half of it: tie between 0 and 1 -> 0. bf16 exponent 102 -> 0x3300.
		{"f16 underflow tie", 1.0 / (1 << 25), 0x3300, 0x0000},
		// 1.5*2^-25 = 0.75 * 2^-24 rounds to 1 subnormal ulp; bf16: 0x3340.
		{"f16 above underflow tie", 1.5 / (1 << 25), 0x3340, 0x0001},
		// 3*2^-25 = 1.5 subnormal ulps: tie between 1 and 2 -> 2.
		// bf16 of 1.5*2^-24: exponent 103 with mantissa .5 -> 0x33c0.
		{"f16 subnormal tie up", 3.0 / (1 << 25), 0x33c0, 0x0002},
		// 1023.5 * 2^-24 lies between the largest f16 subnormal (0x03ff,
		// odd) and the smallest normal 2^-14 (0x0400): tie -> 0x0400.
		// bf16: the value is 2^-15 * 1.9990..., whose 7-bit mantissa rounds
		// up to 2.0, i.e. 2^-14 = 0x3880.
		{"f16 subnormal carries into normal", 1023.5 / (1 << 24), 0x3880, 0x0400},
		// Largest finite float32 0x7f7fffff: bf16 low half 0xffff rounds up
		// past 0x7f7f to 0x7f80 (+Inf). f16 overflows.
		{"f32 max", math.MaxFloat32, 0x7f80, 0x7c00},
		// 0x7f7f7fff: low half 0x7fff < tie, keeps 0x7f7f.
		{"bf16 max finite", f(0x7f7f7fff), 0x7f7f, 0x7c00},
		// The smallest float32 subnormal 2^-149 is below half the smallest
		// bf16 subnormal: top half 0x0000, low half 0x0001 < tie -> +0.
		{"f32 min subnormal", f(0x00000001), 0x0000, 0x0000},
		// 0x00018000: low half is exactly the tie above the odd pattern
		// 0x0001 -> rounds to 0x0002, a bf16 subnormal.
		{"bf16 subnormal tie", f(0x00018000), 0x0002, 0x0000},
	}
	for _, tt := range tests {
		if got := ToBF16(tt.in); got != tt.bf16 {
			t.Errorf("%s: ToBF16(%v) = %#04x, want %#04x", tt.name, tt.in, got, tt.bf16)
		}
		if got := ToF16(tt.in); got != tt.f16 {
			t.Errorf("%s: ToF16(%v) = %#04x, want %#04x", tt.name, tt.in, got, tt.f16)
		}
	}
}

// TestNaN checks that narrowing never turns a NaN into an infinity, even a
// NaN whose only payload bits are the ones the narrowing drops, and that the
// sign and the surviving payload are kept.
func TestNaN(t *testing.T) {
	tests := []struct {
		in       uint32
		bf16     uint16
		f16      uint16
		describe string
	}{
		// Payload only in bit 0: truncation would give Inf, so the quiet bit is set.
		{0x7f800001, 0x7fc0, 0x7e00, "low payload"},
		{0xff800001, 0xffc0, 0xfe00, "negative low payload"},
		// Canonical quiet NaN 0x7fc00000 -> bf16 0x7fc0; f16 quiet bit 0x200 -> 0x7e00.
		{0x7fc00000, 0x7fc0, 0x7e00, "canonical quiet"},
		// Payload 0x7fe00000: bf16 0x7fe0 already quiet; f16 keeps the top
		// 10 mantissa bits 0x300 -> 0x7f00.
		{0x7fe00000, 0x7fe0, 0x7f00, "payload kept"},
	}
	for _, tt := range tests {
		f := math.Float32frombits(tt.in)
		if got := ToBF16(f); got != tt.bf16 {
			t.Errorf("%s: ToBF16(%#08x) = %#04x, want %#04x", tt.describe, tt.in, got, tt.bf16)
		}
		if got := ToF16(f); got != tt.f16 {
			t.Errorf("%s: ToF16(%#08x) = %#04x, want %#04x", tt.describe, tt.in, got, tt.f16)
		}
	}
}

func TestBulk(t *testing.T) {
	src := []float32{1, -2, 0.5, 65520, float32(math.Inf(-1))}
	// Expected patterns worked out as in TestHandVectors: 0.5 = 2^-1 is
	// bf16 exponent 126 -> 0x3f00 and f16 exponent 14 -> 0x3800.
	wantBF := []uint16{0x3f80, 0xc000, 0x3f00, 0x4780, 0xff80}
	wantF16 := []uint16{0x3c00, 0xc000, 0x3800, 0x7c00, 0xfc00}

	bf := make([]uint16, len(src))
	F32ToBF16(bf, src)
	f16 := make([]uint16, len(src)+2) // a longer dst is allowed
	F32ToF16(f16, src)
	for i := range src {
		if bf[i] != wantBF[i] {
			t.Errorf("F32ToBF16[%d] = %#04x, want %#04x", i, bf[i], wantBF[i])
		}
		if f16[i] != wantF16[i] {
			t.Errorf("F32ToF16[%d] = %#04x, want %#04x", i, f16[i], wantF16[i])
		}
	}

	back := make([]float32, len(src))
	BF16ToF32(back, bf)
	// 65520 -> bf16 65536; the rest are exact in both formats.
	wantBack := []float32{1, -2, 0.5, 65536, float32(math.Inf(-1))}
	for i := range back {
		if back[i] != wantBack[i] {
			t.Errorf("BF16ToF32[%d] = %v, want %v", i, back[i], wantBack[i])
		}
	}
	F16ToF32(back, f16[:len(src)])
	wantBack[3] = float32(math.Inf(1))
	for i := range back {
		if back[i] != wantBack[i] {
			t.Errorf("F16ToF32[%d] = %v, want %v", i, back[i], wantBack[i])
		}
	}
}

func TestBulkShortDstPanics(t *testing.T) {
	for name, fn := range map[string]func(){
		"BF16ToF32": func() { BF16ToF32(make([]float32, 1), make([]uint16, 2)) },
		"F16ToF32":  func() { F16ToF32(make([]float32, 1), make([]uint16, 2)) },
		"F32ToBF16": func() { F32ToBF16(make([]uint16, 1), make([]float32, 2)) },
		"F32ToF16":  func() { F32ToF16(make([]uint16, 1), make([]float32, 2)) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s with short dst did not panic", name)
				}
			}()
			fn()
		}()
	}
}
