//go:build amd64 && !purego

package goeng

import "testing"

// BenchmarkGeGLURows is the bench preset's GeGLU over a step's rows (384 × 1024), forward
// and backward, through the eight-lane kernels and, where the CPU has AVX-512, the
// sixteen-lane ones.
func BenchmarkGeGLURows(b *testing.B) {
	const n = 384 * 1024
	x, u, ct := make([]float32, n), make([]float32, n), make([]float32, n)
	for i := range x {
		x[i], u[i], ct[i] = float32(i%2000)/100-10, float32(i%7)/7, float32(i%5)/5-0.5
	}
	out, out2 := make([]float32, n), make([]float32, n)
	lanes := []bool{false}
	if geluAVX512 {
		lanes = append(lanes, true)
	}
	defer func(v bool) { geluAVX512 = v }(geluAVX512)
	for _, wide := range lanes {
		name := map[bool]string{false: "8", true: "16"}[wide]
		b.Run("forward/lanes"+name, func(b *testing.B) {
			geluAVX512 = wide
			for b.Loop() {
				gegluRows(out, x, u)
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "Gelem/s")
		})
		b.Run("backward/lanes"+name, func(b *testing.B) {
			geluAVX512 = wide
			for b.Loop() {
				gegluGradRows(out, out2, x, u, ct)
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "Gelem/s")
		})
	}
}
