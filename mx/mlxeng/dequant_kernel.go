//go:build mlx

package mlxeng

/*
#include <stdlib.h>
#include "mlx/c/mlx.h"

// mlxeng_dequant_kernel_new makes the dequantize kernel (kernels.DequantizeSource) as an
// MLX custom CUDA kernel: inputs w, scales, biases; output out. Nothing compiles until its
// first use.
mlx_fast_cuda_kernel mlxeng_dequant_kernel_new(const char* source, const char* header) {
	const char* in[] = {"w", "scales", "biases"};
	mlx_vector_string ins = mlx_vector_string_new(), outs = mlx_vector_string_new();
	for (int i = 0; i < 3; i++) {
		mlx_vector_string_append_value(ins, in[i]);
	}
	mlx_vector_string_append_value(outs, "out");
	mlx_fast_cuda_kernel k = mlx_fast_cuda_kernel_new("dgtune_dequantize", ins, outs, source, header, true, 0);
	mlx_vector_string_free(ins);
	mlx_vector_string_free(outs);
	return k;
}

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
	mlx_vector_array ins = mlx_vector_array_new(), outs = mlx_vector_array_new();
	int rc = mlx_fast_cuda_kernel_config_add_output_arg(cfg, shape, nd, dt) ||
		mlx_fast_cuda_kernel_config_set_grid(cfg, (int)threads, 1, 1) ||
		mlx_fast_cuda_kernel_config_set_thread_group(cfg, 256, 1, 1) ||
		mlx_fast_cuda_kernel_config_add_template_arg_dtype(cfg, "T", dt) ||
		mlx_fast_cuda_kernel_config_add_template_arg_int(cfg, "BITS", bits) ||
		mlx_fast_cuda_kernel_config_add_template_arg_int(cfg, "GS", gs) ||
		mlx_vector_array_append_value(ins, w) || mlx_vector_array_append_value(ins, scales) ||
		mlx_vector_array_append_value(ins, biases) ||
		mlx_fast_cuda_kernel_apply(&outs, k, ins, cfg, s) ||
		mlx_vector_array_get(res, outs, 0);
	mlx_vector_array_free(ins);
	mlx_vector_array_free(outs);
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
	"unsafe"

	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mlxeng/kernels"
)

// The dequantize kernel on MLX-CUDA, the default there (MLXENG_DEQUANTIZE=mlx turns it
// off). The dequant route dequantizes every dense weight twice a step (forward and input
// gradient, 16 launches a layer of the real 26B-A4B geometry) and its tied head once or
// twice; MLX-CUDA v0.32.1's affine_dequantize ran those at ~0.6 TB/s on the H200
// (bench/results/gpu-s13.txt). kernels.DequantizeSource moves 16 bytes of packed words
// per thread and rounds as MLX's CPU backend and the go engine do (q·scale, then + bias),
// so a dequantized weight is the same bits on every device.

// dequantEnv turns the kernel off ("mlx": MLX's own dequantize; anything else leaves it on).
const dequantEnv = "MLXENG_DEQUANTIZE"

// newDequantKernel returns the dequantize kernel on a CUDA GPU unless the environment
// turns it off.
func newDequantKernel(device string) (k C.mlx_fast_cuda_kernel, ok bool) {
	if !isCUDA(device) || os.Getenv(dequantEnv) == "mlx" {
		return k, false
	}
	src, hdr := C.CString(kernels.DequantizeSource), C.CString(kernels.DequantizeHeader)
	defer C.free(unsafe.Pointer(src))
	defer C.free(unsafe.Pointer(hdr))
	k = C.mlxeng_dequant_kernel_new(src, hdr)
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
