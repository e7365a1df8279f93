//go:build amd64 && !purego

package quant

import "golang.org/x/sys/cpu"

var hasAVX2 = cpu.X86.HasAVX2

//go:noescape
func decodeT4AVX2(words *uint32, wstride int, sc, bi *float32, dst *float32, ldd, n int)

//go:noescape
func decodeT8AVX2(words *uint32, wstride int, sc, bi *float32, dst *float32, ldd, n int)

// decodeT8x8Run decodes n consecutive 8×8 blocks along k that share one group's scales
// (block b: codes 8b..8b+7 of each row, written to dst rows 8b..8b+7), as n calls of
// decodeT8x8Go would; through AVX2 where the CPU has it (same values: the assembly
// multiplies then adds, rounding twice, as the Go code does), in one call.
func decodeT8x8Run(bits int, words []uint32, wstride int, sc, bi *[8]float32, dst []float32, ldd, n int) {
	if n <= 0 {
		return
	}
	if !hasAVX2 {
		decodeT8x8RunGo(bits, words, wstride, sc, bi, dst, ldd, n)
		return
	}
	_ = words[7*wstride+n*bits/4-1]
	_ = dst[(8*n-1)*ldd+7]
	if bits == 4 {
		decodeT4AVX2(&words[0], wstride, &sc[0], &bi[0], &dst[0], ldd, n)
	} else {
		decodeT8AVX2(&words[0], wstride, &sc[0], &bi[0], &dst[0], ldd, n)
	}
}

//go:noescape
func decodeN4AVX2(words *uint32, wpr int, sc, bi *float32, ng int, dst *float32, stride, n, rows int)

//go:noescape
func decodeN8AVX2(words *uint32, wpr int, sc, bi *float32, ng int, dst *float32, stride, n, rows int)

// decodeN16Rows is decodeN16Go for rows consecutive rows of W — row r's words at
// words[r·wpr:], its group's scale and bias at scales[r·ng] and biases[r·ng], its panel
// rows at dst[r·16:] — through AVX2 where the CPU has it, and for 4-bit codes AVX-512
// (same values), in one call.
func decodeN16Rows(bits int, words []uint32, wpr int, scales, biases []float32, ng int, dst []float32, stride, n, rows int) {
	if n <= 0 || rows <= 0 {
		return
	}
	if !hasAVX2 {
		decodeN16RowsGo(bits, words, wpr, scales, biases, ng, dst, stride, n, rows)
		return
	}
	_ = words[(rows-1)*wpr+n*bits/2-1]
	_ = scales[(rows-1)*ng]
	_ = biases[(rows-1)*ng]
	_ = dst[(rows-1)*16+(n-1)*stride+15]
	switch {
	case bits == 4 && hasAVX512:
		decodeN4AVX512(&words[0], wpr, &scales[0], &biases[0], ng, &dst[0], stride, n, rows)
	case bits == 4:
		decodeN4AVX2(&words[0], wpr, &scales[0], &biases[0], ng, &dst[0], stride, n, rows)
	default:
		decodeN8AVX2(&words[0], wpr, &scales[0], &biases[0], ng, &dst[0], stride, n, rows)
	}
}

// hasAVX512 says whether the CPU (and the OS) runs AVX-512F, for decodeT4x16AVX512 and
// decodeN4AVX512.
var hasAVX512 = cpu.X86.HasAVX512F && cpu.X86.HasAVX2

//go:noescape
func decodeN4AVX512(words *uint32, wpr int, sc, bi *float32, ng int, dst *float32, stride, n, rows int)

//go:noescape
func decodeT4x16AVX512(words *uint32, wstride int, sc, bi *float32, dst *float32, ldd, n int)

// decodeT16Run is decodeT8x8Run for sixteen rows (sc and bi of sixteen): rows 0–7 and
// 8–15 decoded as two runs of 8×8 blocks would be, into dst columns 0–7 and 8–15 — for
// 4-bit codes through one AVX-512 pass with no transpose where the CPU has it.
func decodeT16Run(bits int, words []uint32, wstride int, sc, bi *[16]float32, dst []float32, ldd, n int) {
	if n <= 0 {
		return
	}
	if bits != 4 || !hasAVX512 {
		decodeT16As8x8(bits, words, wstride, sc, bi, dst, ldd, n)
		return
	}
	_ = words[15*wstride+n-1]
	_ = dst[(8*n-1)*ldd+15]
	decodeT4x16AVX512(&words[0], wstride, &sc[0], &bi[0], &dst[0], ldd, n)
}

// prefetchRows hints p[i·stride] for i < n into L1 (decode_amd64.s).
//
//go:noescape
func prefetchRows(p *float32, stride, n int)

// hintRows hints rows r..r+n−1 of a row-major matrix m with row stride ld, at column
// c, into L1 — where they exist; no value changes.
func hintRows(m []float32, ld, r, n, c int) {
	n = min(n, (len(m)-c+ld-1)/ld-r)
	if n > 0 {
		prefetchRows(&m[r*ld+c], ld, n)
	}
}
