//go:build amd64 && !purego

package goeng

import "golang.org/x/sys/cpu"

// rmsAVX2 selects the rms_norm kernels of rmsnorm_amd64.s (AVX2 without fused
// multiply-adds, so they round as the Go loops do).
var rmsAVX2 = cpu.X86.HasAVX2

//go:noescape
func dotPD(a, b *float32, n int, sums *[4]float64)

//go:noescape
func dot3PD(gr, w, x *float32, n int, sums *[4]float64)

//go:noescape
func rmsScaleW(dst, x, w *float32, inv float32, n int)

//go:noescape
func rmsGradW(dst, gr, w, x *float32, ir, c float64, n int)
