//go:build !amd64 || purego

package goeng

const rmsAVX2 = false

func dotPD(a, b *float32, n int, sums *[4]float64)          { panic("goeng: no rms_norm kernel") }
func dot3PD(gr, w, x *float32, n int, sums *[4]float64)     { panic("goeng: no rms_norm kernel") }
func rmsScaleW(dst, x, w *float32, inv float32, n int)      { panic("goeng: no rms_norm kernel") }
func rmsGradW(dst, gr, w, x *float32, ir, c float64, n int) { panic("goeng: no rms_norm kernel") }
