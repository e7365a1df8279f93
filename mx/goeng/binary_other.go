//go:build !amd64 || purego

package goeng

import "github.com/dgtune/dgtune/mx"

// Without the assembly kernels the elementwise loops do all the work.
func vecVV(op mx.BinaryOp, dst, x, y []float32) int                   { return 0 }
func vecVS(op mx.BinaryOp, dst, x []float32, s float32) int           { return 0 }
func vecSV(op mx.BinaryOp, dst []float32, s float32, y []float32) int { return 0 }
