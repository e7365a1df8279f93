//go:build !amd64 || purego

package sgemm

// defaultKernels is the portable kernel: no assembly kernel is built for this target.
func defaultKernels() kernels { return goKernels() }

// kernelName says which micro-kernels Gemm uses, for benchmarks and reports.
func kernelName() string { return "go" }
