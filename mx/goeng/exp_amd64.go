//go:build amd64 && !purego

package goeng

import "golang.org/x/sys/cpu"

// expAVX2 selects expKernel (AVX2 with its gather; no FMA, so it rounds as expInto's Go
// loop does).
var expAVX2 = cpu.X86.HasAVX2

//go:noescape
func expKernel(dst, src *float32, n int, shift float32, table *float32, sums *[4]float64)

// maxKernel is the largest of x[0..n), n a positive multiple of 8, NaNs skipped (AVX).
//
//go:noescape
func maxKernel(x *float32, n int) float32
