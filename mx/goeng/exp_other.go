//go:build !amd64 || purego

package goeng

const expAVX2 = false

func expKernel(dst, src *float32, n int, shift float32, table *float32, sums *[4]float64) {
	panic("goeng: no exp kernel")
}

func maxKernel(x *float32, n int) float32 { panic("goeng: no max kernel") }
