//go:build amd64 && !purego

package quant

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/dgtune/dgtune/mx/internal/cputest"
)

// TestDecodeT4x16AVX512: the AVX-512 sixteen-row 4-bit decoder, called directly, writes
// the two eight-row runs' values bit for bit, for one block and for runs along k (runs
// of eight and of four blocks through its transposes, the one to three past them by
// gather, and all of them in one call), with a panel-row stride wider than sixteen and nothing written past the run.
// (TestDecodeT16Run takes it through decodeT16Run only where the CPU has it; this test
// says when it could not run, and fails then under GOENG_REQUIRE_AVX512=1: see
// bench/avx512_tests.sh.)
func TestDecodeT4x16AVX512(t *testing.T) {
	cputest.RequireAVX512(t, hasAVX512)
	rng := rand.New(rand.NewPCG(47, 48))
	const wstride, ldd = 29, 19
	words := make([]uint32, 16*wstride)
	for i := range words {
		words[i] = rng.Uint32()
	}
	var sc, bi [16]float32
	for i := range sc {
		sc[i], bi[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
	}
	for _, n := range []int{1, 2, 3, 4, 5, 8, 9, 11, 12, 16, 23} { // runs of eight and four blocks, the rest by gather
		size := (8*n-1)*ldd + 16 + ldd // one row more than the run, which must stay NaN
		got, want := nans(size), nans(size)
		decodeT4x16AVX512(&words[0], wstride, &sc[0], &bi[0], &got[0], ldd, n)
		decodeT16As8x8(4, words, wstride, &sc, &bi, want, ldd, n)
		if !slices.Equal(bitsOf(got), bitsOf(want)) {
			t.Fatalf("%d blocks: %v, want %v", n, got, want)
		}
	}
}

// TestDecodeN4AVX512: the AVX-512 4-bit row decoder, called directly, writes the portable
// decoder's values bit for bit — one row and several (rows words apart by a stride wider
// than a group, scales by more than one group), panel rows a stride apart — and nothing
// past each row's sixteen values or after the last panel row. (TestPackN16MatchesSlow
// takes it through decodeN16Rows only where the CPU has it.)
func TestDecodeN4AVX512(t *testing.T) {
	cputest.RequireAVX512(t, hasAVX512)
	rng := rand.New(rand.NewPCG(49, 50))
	const wpr, ng, stride = 37, 3, 5*16 + 16
	words := make([]uint32, 7*wpr)
	for i := range words {
		words[i] = rng.Uint32()
	}
	scales, biases := make([]float32, 7*ng), make([]float32, 7*ng)
	for i := range scales {
		scales[i], biases[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
	}
	for _, c := range []struct{ n, rows int }{{1, 1}, {4, 1}, {2, 3}, {8, 5}} {
		size := (c.n-1)*stride + 16*c.rows + stride // past the last panel row, which must stay NaN
		got, want := nans(size), nans(size)
		decodeN4AVX512(&words[0], wpr, &scales[0], &biases[0], ng, &got[0], stride, c.n, c.rows)
		for r := range c.rows {
			decodeN16Go(4, words[r*wpr:], scales[r*ng], biases[r*ng], want[r*16:], stride, c.n)
		}
		if !slices.Equal(bitsOf(got), bitsOf(want)) {
			t.Fatalf("%d panel rows, %d rows: %v, want %v", c.n, c.rows, got, want)
		}
	}
}
