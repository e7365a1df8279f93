//go:build !amd64 || purego

package sgemm

// defaultKernels is the portable kernel: no assembly kernel is built for this target.
func defaultKernels() kernels { return goKernels() }
