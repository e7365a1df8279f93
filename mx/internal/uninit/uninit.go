//go:build !purego

package uninit

import "unsafe"

//go:linkname mallocgc runtime.mallocgc
func mallocgc(size uintptr, typ unsafe.Pointer, needzero bool) unsafe.Pointer

// Float32s returns a slice of n float32s with arbitrary contents.
func Float32s(n int) []float32 {
	if n*4 < minBytes {
		return make([]float32, n)
	}
	// A nil type is a block without pointers, which the collector never scans.
	p := mallocgc(uintptr(n)*4, nil, false)
	s := unsafe.Slice((*float32)(p), n)
	poison(s)
	return s
}
