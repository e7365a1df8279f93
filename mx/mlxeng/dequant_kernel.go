//go:build mlx

package mlxeng

/*
#include <stdlib.h>
#include "mlx/c/mlx.h"

int mlxeng_kernel_run(mlx_array* res, mlx_fast_cuda_kernel k, mlx_fast_cuda_kernel_config cfg,
	const mlx_array* in, int n, mlx_stream s);

// mlxeng_dequant_apply is the dequantized w [..., K·bits/32] → [..., K] in the scales'
// dtype (bfloat16 or float32: mlxeng_dequant_takes checked it).
int mlxeng_dequant_apply(mlx_array* res, mlx_fast_cuda_kernel k, const mlx_array w, const mlx_array scales,
		const mlx_array biases, int bits, int gs, mlx_stream s) {
	int nd = (int)mlx_array_ndim(w);
	if (nd < 1 || nd > 8) {
		return 1;
	}
	int shape[8];
	size_t words = 1;
	for (int i = 0; i < nd; i++) {
		shape[i] = mlx_array_dim(w, i);
		words *= (size_t)shape[i];
	}
	shape[nd - 1] = shape[nd - 1] * (32 / bits);
	size_t threads = words / 4; // mlxeng_dequant_takes checked it fits
	mlx_dtype dt = mlx_array_dtype(scales);
	mlx_fast_cuda_kernel_config cfg = mlx_fast_cuda_kernel_config_new();
	const mlx_array in[] = {w, scales, biases};
	int rc = mlx_fast_cuda_kernel_config_add_output_arg(cfg, shape, nd, dt) ||
		mlx_fast_cuda_kernel_config_set_grid(cfg, (int)threads, 1, 1) ||
		mlx_fast_cuda_kernel_config_set_thread_group(cfg, 256, 1, 1) ||
		mlx_fast_cuda_kernel_config_add_template_arg_dtype(cfg, "T", dt) ||
		mlx_fast_cuda_kernel_config_add_template_arg_int(cfg, "BITS", bits) ||
		mlx_fast_cuda_kernel_config_add_template_arg_int(cfg, "GS", gs) ||
		mlxeng_kernel_run(res, k, cfg, in, 3, s);
	mlx_fast_cuda_kernel_config_free(cfg);
	return rc;
}

// mlxeng_dequant_takes reports whether the kernel dequantizes this weight into dtype dt:
// the scales already of dt, bfloat16 or float32 (the kernel's T), the packed last axis a
// multiple of four words (one thread's load), and one thread per four words within MLX's
// int grid. Bits and group size are checked in Go.
int mlxeng_dequant_takes(const mlx_array w, const mlx_array scales, mlx_dtype dt) {
	size_t nd = mlx_array_ndim(w);
	return nd >= 1 && nd <= 8 && mlx_array_dtype(scales) == dt && (dt == MLX_BFLOAT16 || dt == MLX_FLOAT32) &&
		mlx_array_dim(w, (int)nd - 1) % 4 == 0 && mlx_array_size(w) / 4 <= 0x7fffff00;
}
*/
import "C"

import (
	"os"

	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mlxeng/kernels"
)

// The dequantize kernel on MLX-CUDA, the default there (MLXENG_DEQUANTIZE=mlx turns it
// off). The dequant route dequantizes every dense weight twice a step (forward and input
// gradient, 16 launches a layer of the real 26B-A4B geometry) and its tied head once or
// twice; MLX-CUDA v0.32.1's affine_dequantize ran those at ~0.6 TB/s on the H200
// (bench/results/gpu-s13.txt). kernels.DequantizeSource moves 16 bytes of packed words
// per thread and rounds as the go engine does (q·scale, then + bias, in float32, then once
// to the output type), so a weight dequantized on CUDA has the go engine's bits (MLX's
// CPU rounds bfloat16 twice, MLX-CUDA's own kernel once by FMA).

// dequantEnv turns the kernel off ("mlx": MLX's own dequantize; anything else leaves it on).
const dequantEnv = "MLXENG_DEQUANTIZE"

// newDequantKernel returns the dequantize kernel on a CUDA GPU unless the environment
// turns it off.
func newDequantKernel(device string) (k C.mlx_fast_cuda_kernel, ok bool) {
	if !isCUDA(device) || os.Getenv(dequantEnv) == "mlx" {
		return k, false
	}
	k = newCUDAKernel("dgtune_dequantize", []string{"w", "scales", "biases"}, []string{"out"}, kernels.DequantizeSource, kernels.DequantizeHeader)
	return k, k.ctx != nil
}

// dequantKernelParams reports whether the kernel handles quantization p: 4 or 8 bits in
// groups of 32, 64 or 128 (a thread's 128/bits values then lie in one group).
func dequantKernelParams(p mx.QuantParams) bool {
	return (p.Bits == 4 || p.Bits == 8) && (p.GroupSize == 32 || p.GroupSize == 64 || p.GroupSize == 128)
}

// dequantKernelTakes reports whether the engine dequantizes wq with its kernel into dt.
func (e *Engine) dequantKernelTakes(wq, s *array, p mx.QuantParams, dt mx.DType) bool {
	return e.fastDequant && dequantKernelParams(p) && C.mlxeng_dequant_takes(wq.c, s.c, toMLX(dt)) != 0
}

// kernelDequantize is wq dequantized by the kernel, in the scales' dtype
// (dequantKernelTakes said yes).
func (e *Engine) kernelDequantize(wq, s, b *array, p mx.QuantParams) *array {
	return e.op("dequantize", func(res *C.mlx_array) C.int {
		return C.mlxeng_dequant_apply(res, e.dequantKernel, wq.c, s.c, b.c, C.int(p.Bits), C.int(p.GroupSize), e.stream)
	})
}
