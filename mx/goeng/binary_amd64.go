//go:build amd64 && !purego

package goeng

import (
	"golang.org/x/sys/cpu"

	"github.com/dgtune/dgtune/mx"
)

// binaryAVX2 selects the eight-lane elementwise kernels of binary_amd64.s.
var binaryAVX2 = cpu.X86.HasAVX2

// The kernels take n, a positive multiple of 8, elements.

//go:noescape
func addVV(dst, x, y *float32, n int)

//go:noescape
func subVV(dst, x, y *float32, n int)

//go:noescape
func mulVV(dst, x, y *float32, n int)

//go:noescape
func divVV(dst, x, y *float32, n int)

//go:noescape
func addVS(dst, x *float32, s float32, n int)

//go:noescape
func subVS(dst, x *float32, s float32, n int)

//go:noescape
func mulVS(dst, x *float32, s float32, n int)

//go:noescape
func divVS(dst, x *float32, s float32, n int)

//go:noescape
func addSV(dst *float32, s float32, y *float32, n int)

//go:noescape
func subSV(dst *float32, s float32, y *float32, n int)

//go:noescape
func mulSV(dst *float32, s float32, y *float32, n int)

//go:noescape
func divSV(dst *float32, s float32, y *float32, n int)

// vecVV sets dst[i] = x[i] op y[i] for the leading whole multiple of 8 elements of dst
// with the AVX2 kernels and returns how many it did: 0 without a kernel for op or CPU.
// x and y must be at least as long as dst.
func vecVV(op mx.BinaryOp, dst, x, y []float32) int {
	n := len(dst) / 8 * 8
	if !binaryAVX2 || n == 0 {
		return 0
	}
	_, _ = x[n-1], y[n-1]
	switch op {
	case mx.OpAdd:
		addVV(&dst[0], &x[0], &y[0], n)
	case mx.OpSubtract:
		subVV(&dst[0], &x[0], &y[0], n)
	case mx.OpMultiply:
		mulVV(&dst[0], &x[0], &y[0], n)
	case mx.OpDivide:
		divVV(&dst[0], &x[0], &y[0], n)
	default:
		return 0
	}
	return n
}

// vecVS is vecVV for dst[i] = x[i] op s.
func vecVS(op mx.BinaryOp, dst, x []float32, s float32) int {
	n := len(dst) / 8 * 8
	if !binaryAVX2 || n == 0 {
		return 0
	}
	_ = x[n-1]
	switch op {
	case mx.OpAdd:
		addVS(&dst[0], &x[0], s, n)
	case mx.OpSubtract:
		subVS(&dst[0], &x[0], s, n)
	case mx.OpMultiply:
		mulVS(&dst[0], &x[0], s, n)
	case mx.OpDivide:
		divVS(&dst[0], &x[0], s, n)
	default:
		return 0
	}
	return n
}

// vecSV is vecVV for dst[i] = s op y[i].
func vecSV(op mx.BinaryOp, dst []float32, s float32, y []float32) int {
	n := len(dst) / 8 * 8
	if !binaryAVX2 || n == 0 {
		return 0
	}
	_ = y[n-1]
	switch op {
	case mx.OpAdd:
		addSV(&dst[0], s, &y[0], n)
	case mx.OpSubtract:
		subSV(&dst[0], s, &y[0], n)
	case mx.OpMultiply:
		mulSV(&dst[0], s, &y[0], n)
	case mx.OpDivide:
		divSV(&dst[0], s, &y[0], n)
	default:
		return 0
	}
	return n
}
