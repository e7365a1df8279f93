//go:build !purego && uninitnan

package uninit

import (
	"math"
	"unsafe"
)

// Float32s returns a slice of n float32s, each a NaN in this build (tag uninitnan), so that
// a caller that reads an element it never wrote — a block its kernel does not cover — turns
// a test's values into NaN instead of passing on memory that happened to be zero.
func Float32s(n int) []float32 {
	if n*4 < minBytes {
		return make([]float32, n)
	}
	p := mallocgc(uintptr(n)*4, nil, false)
	s := unsafe.Slice((*float32)(p), n)
	nan := float32(math.NaN())
	for i := range s {
		s[i] = nan
	}
	return s
}
