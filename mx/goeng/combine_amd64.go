//go:build amd64 && !purego

package goeng

import "golang.org/x/sys/cpu"

// combineAVX2 selects the combine kernels of combine_amd64.s.
var combineAVX2 = cpu.X86.HasAVX2

// The kernels take n, a positive multiple of 8, elements.

//go:noescape
func axpyRoundedF64(acc *float64, x *float32, w float32, n int)

//go:noescape
func roundF64(dst *float32, src *float64, n int)
