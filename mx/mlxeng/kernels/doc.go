// Package kernels holds the CUDA C sources of the mlx engine's custom kernels (MLX's
// fast.cuda_kernel: MLX writes each kernel's signature and template constants around
// the body and compiles it with NVRTC on first use). The sources are plain strings so that
// CI, which has neither MLX nor a GPU, can still run them: the package's tests compile each
// body as C++ against a CPU emulation of the CUDA subset it uses (testdata/emu_prelude.h:
// a block's threads as std::threads, __syncthreads a barrier, WMMA fragments computed
// whole) and compare the results with float64 products.
package kernels
