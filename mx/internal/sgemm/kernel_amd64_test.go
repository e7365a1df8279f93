//go:build amd64 && !purego

package sgemm

// kernelName says which micro-kernels Gemm uses, for the tests and benchmarks.
func kernelName() string {
	if hasAVX512() {
		return "avx512"
	}
	if hasAVX2FMA() {
		return "avx2-fma"
	}
	return "go"
}
