package sgemm

// Matmul sets c[M, N] = a[M, K]·b[K, N], all three contiguous and row-major, through
// Gemm: the tests' plain entry point. It panics if a slice is too short for its shape.
func Matmul(c, a, b []float32, m, k, n int) {
	Gemm(NoTrans, NoTrans, m, n, k, a, k, b, n, c, n, false)
}
