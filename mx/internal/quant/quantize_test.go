package quant

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

var (
	allBits   = []int{2, 3, 4, 5, 6, 8}
	allGroups = []int{32, 64, 128}
)

// TestPackingVectors quantizes one group of 32 values chosen so that the
// codes are known in advance, and checks the packed words bit for bit.
//
// Each case is w[j] = q[j] − k with 0 and 2^b−1 among the codes and
// k > (2^b−1)/2, so min = −k is the larger-magnitude extreme: MLX takes
// scale = (max−min)/(2^b−1) = 1, q0 = rint(−k/1) = −k ≠ 0, so scale stays
// −k/−k = 1, bias = −k, and the code of w[j] is w[j]+k = q[j].
func TestPackingVectors(t *testing.T) {
	seq := func(first ...uint8) []uint8 { // first codes given, then q[j] = j
		q := make([]uint8, 32)
		for j := range q {
			q[j] = uint8(j)
		}
		copy(q, first)
		return q
	}
	mod := func(n int) []uint8 { // q[j] = j mod n
		q := make([]uint8, 32)
		for j := range q {
			q[j] = uint8(j % n)
		}
		return q
	}
	tests := []struct {
		bits  int
		codes []uint8
		k     float32
		want  []uint32
	}{
		// 2 bits, 16 codes a word, code j at bit 2j: codes 0,1,2,3 make the
		// byte 0b11_10_01_00 = 0xE4.
		{2, mod(4), 2, []uint32{0xE4E4E4E4, 0xE4E4E4E4}},
		// 3 bits: one LE bit stream, 8 codes per 3 bytes. Codes 0..7 are the
		// octal digits of the 24-bit pattern P = 0o76543210 = 0xFAC688
		// (MLX's byte 0 = c0 | c1<<3 | (c2&3)<<6 = 0x88). Four copies of P
		// fill 96 bits: word0 = P | P<<24, word1 = P>>8 | P<<16,
		// word2 = P>>16 | P<<8 (each truncated to 32 bits).
		{3, mod(8), 4, []uint32{0x88FAC688, 0xC688FAC6, 0xFAC688FA}},
		// 4 bits: element j in word j/8 at bit 4·(j mod 8).
		{4, mod(16), 8, []uint32{0x76543210, 0xFEDCBA98, 0x76543210, 0xFEDCBA98}},
		// 5 bits, codes 0, 31, 2, 3, …, 31: 8 codes per 5 bytes; byte 0 =
		// c0 | (c1&7)<<5 = 0xE0, byte 1 = c1>>3 | c2<<2 | (c3&1)<<7 = 0x8B.
		{5, seq(0, 31), 16, []uint32{0x8A418BE0, 0xC5A92839, 0xCA307B9A, 0x38BDAB49, 0xFFBBCDEB}},
		// 6 bits, codes 0, 63, 2, 3, …, 31: 4 codes per 3 bytes; byte 0 =
		// c0 | (c1&3)<<6 = 0xC0, byte 1 = c1>>2 | (c2&15)<<4 = 0x2F, byte 2 =
		// c2>>4 | c3<<2 = 0x0C, byte 3 = c4 | (c5&3)<<6 = 0x44.
		{6, seq(0, 63), 32, []uint32{0x440C2FC0, 0xA2481C61, 0x3CE34C2C, 0x544D2450, 0xA6585D65, 0x7DE75C6D}},
		// 8 bits: element j in word j/4 at bit 8·(j mod 4).
		{8, seq(0, 255), 128, []uint32{0x0302FF00, 0x07060504, 0x0B0A0908, 0x0F0E0D0C,
			0x13121110, 0x17161514, 0x1B1A1918, 0x1F1E1D1C}},
	}
	for _, tc := range tests {
		p := Params{Bits: tc.bits, GroupSize: 32}
		w := make([]float32, 32)
		for j, q := range tc.codes {
			w[j] = float32(q) - tc.k
		}
		packed, scales, biases, err := Quantize(w, 1, 32, p)
		if err != nil {
			t.Fatalf("Quantize(%v): %v", p, err)
		}
		if !slices.Equal(packed, tc.want) {
			t.Errorf("Quantize(%v) packed = %#x, want %#x", p, packed, tc.want)
		}
		if scales[0] != 1 || biases[0] != -tc.k {
			t.Errorf("Quantize(%v) scale, bias = %v, %v, want 1, %v", p, scales[0], biases[0], -tc.k)
		}
		if got := Dequantize(tc.want, scales, biases, 1, 32, p); !slices.Equal(got, w) {
			t.Errorf("Dequantize(%v) = %v, want %v", p, got, w)
		}
		if PackedCols(32, tc.bits) != len(tc.want) {
			t.Errorf("PackedCols(32, %d) = %d, want %d", tc.bits, PackedCols(32, tc.bits), len(tc.want))
		}
	}
}

// TestQuantizeGroupCases pins MLX's affine_quantize arithmetic on single
// 4-bit groups of 32 (nBins = 15); unlisted values are 0.
func TestQuantizeGroupCases(t *testing.T) {
	tests := []struct {
		name        string
		vals        []float32 // leading values of the group
		scale, bias float32
		codes       []uint8 // leading codes
		zeroCode    uint8   // code of the padding zeros
	}{
		{
			// |max| = 2 ≥ |min| = 1.75: max is the edge, the scale is negative.
			// scale0 = −3.75/15 = −0.25, q0 = rint(2/−0.25) = −8, scale =
			// 2/−8 = −0.25, bias = 2; codes (w−2)/−0.25: 2→0, −1.75→15, 0→8.
			name: "max edge, negative scale", vals: []float32{2, -1.75, 1},
			scale: -0.25, bias: 2, codes: []uint8{0, 15, 4}, zeroCode: 8,
		},
		{
			// min = −0.3, max = 1 → scale0 = −1.3/15, 1/scale0 = −11.54 so
			// q0 = −12 and the scale snaps to 1/−12 (0 is then code 12
			// exactly); −0.3 maps to 15.6 → 16 and is clamped to 15, i.e.
			// dequantizes to 1 − 15/12 = −0.25; 0.5 → (0.5−1)·−12 = 6.
			name: "snapped scale and clamp", vals: []float32{1, -0.3, 0.5},
			scale: float32(-1.0 / 12), bias: 1, codes: []uint8{0, 15, 6}, zeroCode: 12,
		},
		{
			// min = −8 edge, scale 1, bias −8: 0.5 → 8.5 and 1.5 → 9.5 are ties
			// that rint resolves to even (8 and 10), unlike math.Round (9, 10).
			name: "ties round to even", vals: []float32{-8, 7, 0.5, 1.5, -6.5},
			scale: 1, bias: -8, codes: []uint8{0, 15, 8, 10, 2}, zeroCode: 8,
		},
		{
			// All zeros: scale = −max(0/15, 1e−7), q0 = rint(0) = 0 so the bias
			// stays 0 and every code is 0.
			name: "all zero", vals: nil,
			scale: -1e-7, bias: 0, codes: nil, zeroCode: 0,
		},
	}
	p := Params{Bits: 4, GroupSize: 32}
	for _, tc := range tests {
		w := make([]float32, 32)
		copy(w, tc.vals)
		packed, scales, biases, err := Quantize(w, 1, 32, p)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if scales[0] != tc.scale || biases[0] != tc.bias {
			t.Errorf("%s: scale, bias = %v, %v, want %v, %v", tc.name, scales[0], biases[0], tc.scale, tc.bias)
		}
		for j := range 32 {
			want := tc.zeroCode
			if j < len(tc.codes) {
				want = tc.codes[j]
			}
			if got := uint8(packed[j/8] >> (4 * (j % 8)) & 15); got != want {
				t.Errorf("%s: code[%d] = %d, want %d", tc.name, j, got, want)
			}
		}
	}
}

// TestQuantizeConstantGroup: a group of identical non-zero values has
// max − min = 0, so scale0 = −1e−7 and q0 = rint(1/−1e−7) = −1e7 ≠ 0; the
// value becomes the bias and dequantizes exactly.
func TestQuantizeConstantGroup(t *testing.T) {
	w := make([]float32, 64)
	for j := range w {
		w[j] = 1
	}
	packed, scales, biases, err := Quantize(w, 1, 64, Params{Bits: 8, GroupSize: 64})
	if err != nil {
		t.Fatal(err)
	}
	if scales[0] != float32(-1e-7) || biases[0] != 1 {
		t.Errorf("scale, bias = %v, %v, want -1e-07, 1", scales[0], biases[0])
	}
	if slices.ContainsFunc(packed, func(u uint32) bool { return u != 0 }) {
		t.Errorf("packed = %#x, want all zero", packed)
	}
}

// TestRoundTripError: rounding puts a value within half a step of its
// code, and snapping the scale to edge/q0 can push the far extreme at most
// one step past 2^b−1 (|edge/scale0| ≥ (2^b−1)/2 bounds the change), where
// it is clamped. So every element must come back within one |scale|.
func TestRoundTripError(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const rows, cols = 5, 384
	for _, bits := range allBits {
		for _, gs := range allGroups {
			p := Params{Bits: bits, GroupSize: gs}
			w := make([]float32, rows*cols)
			for i := range w {
				w[i] = float32(rng.NormFloat64())
				if i%97 == 0 {
					w[i] *= 40 // outliers make lopsided groups
				}
				if i/cols == 3 {
					w[i] = 0.25 + float32(rng.Float64())*1e-3 // narrow positive groups
				}
			}
			packed, scales, biases, err := Quantize(w, rows, cols, p)
			if err != nil {
				t.Fatalf("Quantize(%v): %v", p, err)
			}
			got := Dequantize(packed, scales, biases, rows, cols, p)
			for i := range w {
				step := abs32(scales[i/gs])
				if d := abs32(got[i] - w[i]); d > step*(1+1e-5)+1e-6*abs32(w[i]) {
					t.Fatalf("%v: element %d: |%v − %v| = %v > step %v", p, i, got[i], w[i], d, step)
				}
			}
		}
	}
}

// TestExactGrid builds groups already on an affine grid that MLX keeps:
// w = b + s·q with s = ±2^−e, b = −s·k (so 0 is code k), codes 0 and 2^b−1
// present, and b the larger-magnitude extreme (k > (2^b−1)/2 for s > 0,
// k ≥ (2^b−1)/2 for s < 0). Then scale0 = |s| and q0 = −k exactly, so the
// quantizer must return s, b, the same codes, and dequantize to w exactly.
func TestExactGrid(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, bits := range allBits {
		for _, gs := range allGroups {
			p := Params{Bits: bits, GroupSize: gs}
			nBins := 1<<bits - 1
			const rows, cols = 2, 256
			w := make([]float32, rows*cols)
			wantS := make([]float32, rows*cols/gs)
			wantB := make([]float32, len(wantS))
			for g := range wantS {
				s := float32(math.Ldexp(1, -rng.IntN(8)))
				var k int
				if g%2 == 0 { // min edge: k in (nBins/2, nBins]
					k = nBins/2 + 1 + rng.IntN(nBins-nBins/2)
				} else { // max edge: k in [ceil(nBins/2), nBins]
					s = -s
					k = (nBins+1)/2 + rng.IntN(nBins-(nBins+1)/2+1)
				}
				b := -s * float32(k)
				wantS[g], wantB[g] = s, b
				for j := range gs {
					q := rng.IntN(nBins + 1)
					switch j {
					case 3:
						q = 0
					case 17:
						q = nBins
					}
					w[g*gs+j] = b + s*float32(q)
				}
			}
			packed, scales, biases, err := Quantize(w, rows, cols, p)
			if err != nil {
				t.Fatalf("Quantize(%v): %v", p, err)
			}
			if !slices.Equal(scales, wantS) || !slices.Equal(biases, wantB) {
				t.Fatalf("%v: scales %v biases %v, want %v %v", p, scales, biases, wantS, wantB)
			}
			if got := Dequantize(packed, scales, biases, rows, cols, p); !slices.Equal(got, w) {
				t.Fatalf("%v: round trip is not exact", p)
			}
		}
	}
}

func TestQuantizeErrors(t *testing.T) {
	ok := Params{Bits: 4, GroupSize: 64}
	w := make([]float32, 2*128)
	nan := slices.Clone(w)
	nan[130] = float32(math.NaN())
	inf := slices.Clone(w)
	inf[5] = float32(math.Inf(-1))
	tests := []struct {
		name       string
		w          []float32
		rows, cols int
		p          Params
		want       error
		msg        string
	}{
		{"bits 7", w, 2, 128, Params{Bits: 7, GroupSize: 64}, ErrBits, "bits=7"},
		{"bits 1", w, 2, 128, Params{Bits: 1, GroupSize: 64}, ErrBits, "bits=1"},
		{"bits 16", w, 2, 128, Params{Bits: 16, GroupSize: 64}, ErrBits, "bits=16"},
		{"group 48", w, 2, 128, Params{Bits: 4, GroupSize: 48}, ErrGroupSize, "group_size=48"},
		{"group 16", w, 2, 128, Params{Bits: 4, GroupSize: 16}, ErrGroupSize, "group_size=16"},
		{"group 0", w, 2, 128, Params{Bits: 4}, ErrGroupSize, "group_size=0"},
		{"cols not a multiple", make([]float32, 4*96), 4, 96, ok, ErrShape, "96"},
		{"zero cols", nil, 4, 0, ok, ErrShape, "[4, 0]"},
		{"zero rows", nil, 0, 128, ok, ErrShape, "[0, 128]"},
		{"negative rows", w, -2, 128, ok, ErrShape, "[-2, 128]"},
		{"short data", w[:200], 2, 128, ok, ErrShape, "have 200"},
		{"long data", w, 1, 128, ok, ErrShape, "have 256"},
		{"NaN", nan, 2, 128, ok, ErrNonFinite, "at [1, 2]"},
		{"-Inf", inf, 2, 128, ok, ErrNonFinite, "at [0, 5]"},
	}
	for _, tc := range tests {
		packed, _, _, err := Quantize(tc.w, tc.rows, tc.cols, tc.p)
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: Quantize err = %v, want %v mentioning %q", tc.name, err, tc.want, tc.msg)
		}
		if packed != nil {
			t.Errorf("%s: Quantize returned data with an error", tc.name)
		}
	}
}

// TestQuantizeNamesFirstNonFinite: the check runs in the parallel loop, group by group;
// with several non-finite values spread over a matrix large enough to be split between
// workers, the error still names the first in row-major order.
func TestQuantizeNamesFirstNonFinite(t *testing.T) {
	const rows, cols = 512, 256
	w := make([]float32, rows*cols)
	for i := range w {
		w[i] = float32(i%97) / 97
	}
	w[400*cols+7] = float32(math.Inf(1))
	w[300*cols+200] = float32(math.NaN())
	w[450*cols] = float32(math.Inf(-1))
	for range 20 { // workers race for chunks: the answer must not depend on who wins
		_, _, _, err := Quantize(w, rows, cols, Params{Bits: 4, GroupSize: 64})
		if !errors.Is(err, ErrNonFinite) || !strings.Contains(err.Error(), "NaN at [300, 200]") {
			t.Fatalf("Quantize err = %v, want ErrNonFinite naming NaN at [300, 200]", err)
		}
	}
}
