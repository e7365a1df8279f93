//go:build amd64 && !purego

package goeng

import "golang.org/x/sys/cpu"

// geluAVX2 selects the eight-lane kernels of gelu_amd64.s (AVX2; no FMA, so they round
// as the Go code does).
var geluAVX2 = cpu.X86.HasAVX2

// geluAVX512 selects their sixteen-lane twins (AVX-512F, the same operations: the same
// bits) for the leading multiples of 16.
var geluAVX512 = cpu.X86.HasAVX512F && geluAVX2

// The kernels take n, a positive multiple of 8 (the 512 kernels: of 16), elements.

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

//go:noescape
func geluKernel512(out, x *float32, n int)

//go:noescape
func geluGradKernel512(out, x, gr *float32, n int)

//go:noescape
func gegluKernel512(out, gate, up *float32, n int)

//go:noescape
func gegluGradKernel512(dg, du, gate, up, ct *float32, n int)
