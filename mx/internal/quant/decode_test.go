package quant

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestPackT8x8MatchesRows: the blocked 4- and 8-bit packT writes exactly the panels of
// the per-row path, bit for bit, including rows past the last block of eight.
func TestPackT8x8MatchesRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	const rows, cols = 45, 256
	for _, bits := range []int{4, 8} {
		for _, gs := range allGroups {
			p := Params{Bits: bits, GroupSize: gs}
			packed, scales, biases, _, _ := randQ(t, rng, 1, rows, cols, p)
			w := newQmat(packed, scales, biases, rows, cols, p)
			for _, c := range []struct{ pc, kb, j0, nt int }{{0, 256, 0, 45}, {64, 128, 16, 13}, {192, 64, 3, 21}, {0, 32, 40, 5}} {
				name := fmt.Sprintf("%v %v", p, c)
				got := nans(roundUp(c.nt, pw) * c.kb)
				want := nans(roundUp(c.nt, pw) * c.kb)
				w.packT8x8(got, c.pc, c.kb, c.j0, c.nt)
				w.packTRows(want, c.pc, c.kb, c.j0, c.nt)
				if !slices.Equal(bitsOf(got), bitsOf(want)) {
					t.Fatalf("%s: blocked panels differ from the per-row path", name)
				}
			}
		}
	}
}

// TestDecodeT8x8Run: the assembly decoder (where built) equals the portable one, for one
// block and for runs of several along k.
func TestDecodeT8x8Run(t *testing.T) {
	rng := rand.New(rand.NewPCG(43, 44))
	const wstride, ldd = 17, 11
	words := make([]uint32, 8*wstride)
	for i := range words {
		words[i] = rng.Uint32()
	}
	var sc, bi [8]float32
	for i := range sc {
		sc[i], bi[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
	}
	for _, bits := range []int{4, 8} {
		for _, n := range []int{1, 2, 5, 8} {
			size := (8*n-1)*ldd + 8
			got, want := nans(size), nans(size)
			decodeT8x8Run(bits, words, wstride, &sc, &bi, got, ldd, n)
			for b := range n {
				decodeT8x8Go(bits, words[b*bits/4:], wstride, &sc, &bi, want[8*b*ldd:], ldd)
			}
			if !slices.Equal(bitsOf(got), bitsOf(want)) {
				t.Fatalf("%d bits, %d blocks: %v, want %v", bits, n, got, want)
			}
		}
	}
}

// TestDecodeT16Run: the sixteen-row decoder (AVX-512 for 4-bit codes, where built) writes
// the two eight-row runs' values bit for bit, for one block and for runs along k, with a
// panel-row stride wider than sixteen.
func TestDecodeT16Run(t *testing.T) {
	rng := rand.New(rand.NewPCG(45, 46))
	const wstride, ldd = 19, 21
	words := make([]uint32, 16*wstride)
	for i := range words {
		words[i] = rng.Uint32()
	}
	var sc, bi [16]float32
	for i := range sc {
		sc[i], bi[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
	}
	for _, bits := range []int{4, 8} {
		for _, n := range []int{1, 2, 5, 8} {
			size := (8*n-1)*ldd + 16
			got, want := nans(size), nans(size)
			decodeT16Run(bits, words, wstride, &sc, &bi, got, ldd, n)
			decodeT16As8x8(bits, words, wstride, &sc, &bi, want, ldd, n)
			if !slices.Equal(bitsOf(got), bitsOf(want)) {
				t.Fatalf("%d bits, %d blocks: %v, want %v", bits, n, got, want)
			}
		}
	}
}

func bitsOf(v []float32) []uint32 {
	out := make([]uint32, len(v))
	for i, x := range v {
		out[i] = math32bits(x)
	}
	return out
}

func math32bits(x float32) uint32 { return math.Float32bits(x) }

// TestPackN16MatchesSlow: the 4/8-bit row decoder writes the element path's panels bit for
// bit, for groups of 32/64/128, partial last panels and any k-block.
func TestPackN16MatchesSlow(t *testing.T) {
	rng := rand.New(rand.NewPCG(45, 46))
	const rows, cols = 20, 256
	for _, bits := range []int{4, 8} {
		for _, gs := range allGroups {
			p := Params{Bits: bits, GroupSize: gs}
			packed, scales, biases, _, _ := randQ(t, rng, 1, rows, cols, p)
			w := newQmat(packed, scales, biases, rows, cols, p)
			for _, c := range []struct{ pc, kb, j0, nt int }{{0, 20, 0, 256}, {3, 9, 32, 40}, {0, 5, 240, 16}, {7, 13, 128, 101}} {
				got := nans(roundUp(c.nt, pw) * c.kb)
				want := nans(roundUp(c.nt, pw) * c.kb)
				w.packN16(got, c.pc, c.kb, c.j0, c.nt)
				for jr := 0; jr < c.nt; jr += pw {
					w.packNSlow(want[jr*c.kb:(jr+pw)*c.kb], c.pc, c.kb, c.j0+jr, min(pw, c.nt-jr))
				}
				if !slices.Equal(bitsOf(got), bitsOf(want)) {
					t.Fatalf("%v %v: row decoder differs from the element path", p, c)
				}
			}
		}
	}
	// The assembly (where built) against the portable decoder, for one row and several
	// (rows 48 words apart, scales 3 apart; panel rows 16 floats apart inside a panel of
	// stride 7·16·… ).
	const wpr, ng, stride = 48, 3, 7 * 16 * 5
	words := make([]uint32, 6*wpr)
	for i := range words {
		words[i] = rng.Uint32()
	}
	scales, biases := make([]float32, 6*ng), make([]float32, 6*ng)
	for i := range scales {
		scales[i], biases[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
	}
	for _, bits := range []int{4, 8} {
		for _, rows := range []int{1, 2, 5} {
			got, want := nans(4*stride+16), nans(4*stride+16)
			decodeN16Rows(bits, words, wpr, scales, biases, ng, got, stride, 4, rows)
			for r := range rows {
				decodeN16Go(bits, words[r*wpr:], scales[r*ng], biases[r*ng], want[r*16:], stride, 4)
			}
			if !slices.Equal(bitsOf(got), bitsOf(want)) {
				t.Fatalf("%d bits, %d rows: decodeN16Rows differs from decodeN16Go", bits, rows)
			}
		}
	}
}

// TestHintRowsStaysInside: hintRows takes only rows that exist — none past the matrix's
// last row, at any column, whatever count it is asked for — so hinting the next panel's
// scales at the last panel, or at a partial one, never reaches outside the slice (it
// would panic).
func TestHintRowsStaysInside(t *testing.T) {
	const rows, ld = 37, 5
	m := make([]float32, rows*ld)
	for _, c := range []struct{ r, n, col int }{{0, 16, 0}, {30, 16, 4}, {36, 1, 4}, {37, 16, 0}, {52, 16, 2}, {21, 16, 3}, {0, 0, 0}} {
		func() {
			defer func() {
				if e := recover(); e != nil {
					t.Fatalf("rows %d+%d at column %d: %v", c.r, c.n, c.col, e)
				}
			}()
			hintRows(m, ld, c.r, c.n, c.col)
		}()
	}
	// A matrix cut short of its last row's later columns (an expert's slice ends there).
	short := m[:rows*ld-2]
	hintRows(short, ld, 30, 16, 4)
}
