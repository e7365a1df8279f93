//go:build mlx

package mlxeng

/*
#include <stdlib.h>
#include "mlx/c/mlx.h"

int mlxeng_kernel_run(mlx_array* res, mlx_fast_cuda_kernel k, mlx_fast_cuda_kernel_config cfg,
	const mlx_array* in, int n, mlx_stream s);
int mlxeng_custom_apply(mlx_array* res, const mlx_vector_array in,
	int (*fwd)(mlx_vector_array*, const mlx_vector_array, void*),
	int (*vjp)(mlx_vector_array*, const mlx_vector_array, const mlx_vector_array, const mlx_vector_array, void*),
	const void* payload, size_t size);

// mlxeng_norm is what the op's closures need: the input-gradient kernel, eps and its
// float32 bits, and the stream.
typedef struct {
	mlx_fast_cuda_kernel dx;
	float eps;
	int eps_bits;
	mlx_stream s;
} mlxeng_norm;

// mlxeng_norm_forward: inputs [x [..., D], w [D]] → [MLX's fast rms_norm of them]: the
// forward is MLX's own kernel, bit for bit.
static int mlxeng_norm_forward(mlx_vector_array* res, const mlx_vector_array in, void* payload) {
	const mlxeng_norm* p = (const mlxeng_norm*)payload;
	mlx_array x = mlx_array_new(), w = mlx_array_new(), y = mlx_array_new();
	int rc = mlx_vector_array_get(&x, in, 0) || mlx_vector_array_get(&w, in, 1) ||
		mlx_fast_rms_norm(&y, x, w, p->eps, p->s) || mlx_vector_array_set_data(res, &y, 1);
	mlx_array_free(x);
	mlx_array_free(w);
	mlx_array_free(y);
	return rc;
}

// mlxeng_norm_weight_grad is Σ over the rows of g·x·rsqrt(mean(x²) + eps), w's gradient,
// composed of MLX ops in float32 and rounded once to x's dtype: MLX's own VJP rounds
// each row's term to x's dtype before its float32 column sum, so this one is the more
// precise of the two (rounding each product in bfloat16 put a real-geometry column
// 8 units off MLX's). The VJP returns it lazily: MLX keeps only the cotangents asked
// for, and a LoRA step never asks for a frozen norm's, so it never runs. (MLX tells a
// custom VJP nothing of which cotangents are wanted, so its ops are still built each
// time the backward is; a compiled step builds them once, in its trace, and drops
// them there.)
int mlxeng_norm_weight_grad(mlx_array* res, const mlx_array x, const mlx_array g, float eps_value, mlx_stream s) {
	int nd = mlx_array_ndim(x);
	int* axes = malloc(sizeof(int) * (nd > 1 ? nd - 1 : 1));
	for (int i = 0; i + 1 < nd; i++) {
		axes[i] = i;
	}
	mlx_array xf = mlx_array_new(), gf = mlx_array_new(), sq = mlx_array_new(), ms = mlx_array_new(),
		eps = mlx_array_new_float(eps_value), se = mlx_array_new(), n = mlx_array_new(), xn = mlx_array_new(),
		gxn = mlx_array_new(), sum = mlx_array_new();
	int rc = mlx_astype(&xf, x, MLX_FLOAT32, s) || mlx_astype(&gf, g, MLX_FLOAT32, s) ||
		mlx_square(&sq, xf, s) || mlx_mean_axis(&ms, sq, -1, true, s) || mlx_add(&se, ms, eps, s) ||
		mlx_rsqrt(&n, se, s) || mlx_multiply(&xn, xf, n, s) || mlx_multiply(&gxn, gf, xn, s) ||
		mlx_sum_axes(&sum, gxn, axes, nd - 1, false, s) || mlx_astype(res, sum, mlx_array_dtype(x), s);
	free(axes);
	mlx_array_free(xf);
	mlx_array_free(gf);
	mlx_array_free(sq);
	mlx_array_free(ms);
	mlx_array_free(eps);
	mlx_array_free(se);
	mlx_array_free(n);
	mlx_array_free(xn);
	mlx_array_free(gxn);
	mlx_array_free(sum);
	return rc;
}

// mlxeng_norm_vjp: the cotangent g → [dx by kernels.RMSNormBackwardSource, w's gradient
// (mlxeng_norm_weight_grad)].
static int mlxeng_norm_vjp(mlx_vector_array* res, const mlx_vector_array primals, const mlx_vector_array cots,
		const mlx_vector_array outs, void* payload) {
	const mlxeng_norm* p = (const mlxeng_norm*)payload;
	mlx_array x = mlx_array_new(), w = mlx_array_new(), g = mlx_array_new();
	mlx_array grads[2] = {mlx_array_new(), mlx_array_new()};
	int rc = mlx_vector_array_get(&x, primals, 0) || mlx_vector_array_get(&w, primals, 1) ||
		mlx_vector_array_get(&g, cots, 0);
	if (rc == 0) {
		int nd = mlx_array_ndim(x), d = mlx_array_dim(x, nd - 1);
		int rows = (int)(mlx_array_size(x) / (size_t)d);
		// kernels.RMSNormBackwardSource: a block a row from 1024 wide, else a warp a row.
		int blocks = d >= 1024 ? rows : (rows + 3) / 4;
		const mlx_array in[3] = {x, w, g};
		mlx_fast_cuda_kernel_config cfg = mlx_fast_cuda_kernel_config_new();
		rc = mlx_fast_cuda_kernel_config_add_output_arg(cfg, mlx_array_shape(x), nd, mlx_array_dtype(x)) ||
			mlx_fast_cuda_kernel_config_set_grid(cfg, blocks * 128, 1, 1) ||
			mlx_fast_cuda_kernel_config_set_thread_group(cfg, 128, 1, 1) ||
			mlx_fast_cuda_kernel_config_add_template_arg_dtype(cfg, "T", mlx_array_dtype(x)) ||
			mlx_fast_cuda_kernel_config_add_template_arg_int(cfg, "EPS", p->eps_bits) ||
			mlxeng_kernel_run(&grads[0], p->dx, cfg, in, 3, p->s) ||
			mlxeng_norm_weight_grad(&grads[1], x, g, p->eps, p->s) || mlx_vector_array_set_data(res, grads, 2);
		mlx_fast_cuda_kernel_config_free(cfg);
	}
	mlx_array_free(x);
	mlx_array_free(w);
	mlx_array_free(g);
	mlx_array_free(grads[0]);
	mlx_array_free(grads[1]);
	return rc;
}

// mlxeng_norm_apply is MLX's fast rms_norm of [x, w] with the kernel's VJP.
static int mlxeng_norm_apply(mlx_array* res, const mlx_vector_array in, mlxeng_norm p) {
	return mlxeng_custom_apply(res, in, mlxeng_norm_forward, mlxeng_norm_vjp, &p, sizeof p);
}
*/
import "C"

import (
	"math"

	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/internal/dims"
	"github.com/dgtune/dgtune/mx/mlxeng/kernels"
)

// The rms_norm input gradient on MLX-CUDA through dgtune's kernel (the default on CUDA;
// MLXENG_NORM=mlx turns it off). MLX's rms_norm VJP always
// computes the weight's gradient too — g·x·n for every element, then a column reduction,
// one more launch a norm — which a LoRA step never uses: the norms are frozen. The
// forward stays MLX's fast rms_norm, bit for bit; kernels.RMSNormBackwardSource gives dx
// alone, with MLX's arithmetic in another summation order. A real 26B-A4B layer has nine
// weighted norms, so the launches a layer fall by nine; the real step measured 109–128
// ms against 113–120 without it (medians 112.0 and 117.5, alternating in one lease,
// bench/results/gpu-s16.txt).

// normEnv turns the kernel off ("mlx").
const normEnv = "MLXENG_NORM"

// newNormKernel makes the rms_norm input-gradient kernel on a CUDA GPU unless env is
// "mlx"; ok false leaves the VJP to MLX.
func newNormKernel(device, env string) (k C.mlx_fast_cuda_kernel, ok bool) {
	if !isCUDA(device) || env == "mlx" {
		return k, false
	}
	k = newCUDAKernel("dgtune_rms_norm_dx", []string{"x", "w", "g"}, []string{"dx"},
		kernels.RMSNormBackwardSource, kernels.LoRAHeader)
	return k, k.ctx != nil
}

// normsThroughKernel reports whether RMSNorm takes the kernel's VJP: x [..., D] and w
// [D] both bfloat16, D a multiple of 8, at least one row, and x's elements indexable by
// int. The kernel computes float32 too (kernels.RMSNormBackwardSource; tested in CI on
// the emulation), but float32 compute keeps MLX's own VJP, as it keeps MLX's ops for
// GeGLU and LoRA: float32 is the mode for checking numbers, where a step should be MLX's
// arithmetic, and the kernels are for the bfloat16 step's speed. (Session 17: with the
// kernel on float32 too, the tiny demo trained on the H200 along another path — its
// float32 training is sensitive to rounding — and reached exact match 0.969 three times
// in three runs, against 1.000 with MLX's VJP; seed 1 reached 1.000 either way.)
func (e *Engine) normsThroughKernel(x, w *array) bool {
	if !e.normKernelOK || w == nil || x.dt != mx.BFloat16 || w.dt != mx.BFloat16 {
		return false
	}
	if len(x.shape) < 1 || len(w.shape) != 1 {
		return false
	}
	d := x.shape[len(x.shape)-1]
	n := dims.Numel(x.shape)
	return d > 0 && d%8 == 0 && w.shape[0] == d && n >= d && n < 1<<31
}

// rmsNormKernelVJP is MLX's fast rms_norm of x and w with the kernel's VJP.
func (e *Engine) rmsNormKernelVJP(x, w *array, eps float64) *array {
	p := C.mlxeng_norm{dx: e.normKernel, eps: C.float(eps), eps_bits: C.int(int32(math.Float32bits(float32(eps)))), s: e.stream}
	in := vector([]mx.Handle{x, w})
	defer C.mlx_vector_array_free(in)
	return e.op("rms_norm", func(res *C.mlx_array) C.int { return C.mlxeng_norm_apply(res, in, p) })
}
