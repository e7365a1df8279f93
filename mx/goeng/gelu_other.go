//go:build !amd64 || purego

package goeng

const geluAVX2 = false

func geluKernel(out, x *float32, n int)                    { panic("goeng: no GELU kernel") }
func geluGradKernel(out, x, gr *float32, n int)            { panic("goeng: no GELU kernel") }
func gegluKernel(out, gate, up *float32, n int)            { panic("goeng: no GELU kernel") }
func gegluGradKernel(dg, du, gate, up, ct *float32, n int) { panic("goeng: no GELU kernel") }

func tanhKernel(out, x *float32, n int) { panic("goeng: no tanh kernel") }
