//go:build amd64 && !purego

package goeng

import "golang.org/x/sys/cpu"

// geluAVX2 selects the eight-lane kernels of gelu_amd64.s (AVX2; no FMA, so they round
// as the Go code does).
var geluAVX2 = cpu.X86.HasAVX2

// The kernels take n, a positive multiple of 8, elements.

//go:noescape
func geluKernel(out, x *float32, n int)

//go:noescape
func geluGradKernel(out, x, gr *float32, n int)

//go:noescape
func gegluKernel(out, gate, up *float32, n int)

//go:noescape
func gegluGradKernel(dg, du, gate, up, ct *float32, n int)

//go:noescape
func tanhKernel(out, x *float32, n int)
