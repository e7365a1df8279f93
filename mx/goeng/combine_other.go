//go:build !amd64 || purego

package goeng

// Without the assembly kernels the combine's Go loops do all the work.
const combineAVX2 = false

func axpyRoundedF64(acc *float64, x *float32, w float32, n int) { panic("goeng: no combine kernel") }
func roundF64(dst *float32, src *float64, n int)                { panic("goeng: no combine kernel") }
