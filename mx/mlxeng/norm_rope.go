//go:build mlx

package mlxeng

/*
#include "mlx/c/mlx.h"

int mlxeng_kernel_run(mlx_array* res, mlx_fast_cuda_kernel k, mlx_fast_cuda_kernel_config cfg,
	const mlx_array* in, int n, mlx_stream s);
int mlxeng_custom_apply(mlx_array* res, const mlx_vector_array in,
	int (*fwd)(mlx_vector_array*, const mlx_vector_array, void*),
	int (*vjp)(mlx_vector_array*, const mlx_vector_array, const mlx_vector_array, const mlx_vector_array, void*),
	const void* payload, size_t size);
int mlxeng_cast_to(mlx_array* a, mlx_dtype dt, mlx_stream s);
int mlxeng_norm_weight_grad(mlx_array* res, const mlx_array x, const mlx_array g, float eps_value, mlx_stream s);

// mlxeng_norm_rope is what the op's closures need: the two kernels, eps, the rotation's
// scale and first position, their float32 bits for the kernels' template constants, and
// the stream.
typedef struct {
	mlx_fast_cuda_kernel fwd, bwd;
	float eps, scale;
	int eps_bits, scale_bits, offset;
	mlx_stream s;
} mlxeng_norm_rope;

// mlxeng_norm_rope_run runs k on in[0..n) with one output of shape [B, L, H, D]
// (transposed: [B, H, L, D]) of x's dtype, a warp a row of x.
static int mlxeng_norm_rope_run(mlx_array* res, mlx_fast_cuda_kernel k, const mlx_array* in, int n, int transposed,
		const mlxeng_norm_rope* p) {
	const mlx_array x = in[0];
	int shape[4] = {mlx_array_dim(x, 0), mlx_array_dim(x, 1), mlx_array_dim(x, 2), mlx_array_dim(x, 3)};
	if (transposed) {
		shape[1] = mlx_array_dim(x, 2);
		shape[2] = mlx_array_dim(x, 1);
	}
	int rows = shape[0] * shape[1] * shape[2];
	mlx_fast_cuda_kernel_config cfg = mlx_fast_cuda_kernel_config_new();
	int rc = mlx_fast_cuda_kernel_config_add_output_arg(cfg, shape, 4, mlx_array_dtype(x)) ||
		mlx_fast_cuda_kernel_config_set_grid(cfg, (rows + 3) / 4 * 128, 1, 1) ||
		mlx_fast_cuda_kernel_config_set_thread_group(cfg, 128, 1, 1) ||
		mlx_fast_cuda_kernel_config_add_template_arg_dtype(cfg, "T", mlx_array_dtype(x)) ||
		mlx_fast_cuda_kernel_config_add_template_arg_int(cfg, "EPS", p->eps_bits) ||
		mlx_fast_cuda_kernel_config_add_template_arg_int(cfg, "OFFSET", p->offset) ||
		mlx_fast_cuda_kernel_config_add_template_arg_int(cfg, "SCALE", p->scale_bits) ||
		mlxeng_kernel_run(res, k, cfg, in, n, p->s);
	mlx_fast_cuda_kernel_config_free(cfg);
	return rc;
}

// mlxeng_norm_rope_forward: inputs [x [B, L, H, D], w [D], freqs [D/2]] → [the normed,
// transposed, rotated x [B, H, L, D]] by kernels.NormRoPEForwardSource.
static int mlxeng_norm_rope_forward(mlx_vector_array* res, const mlx_vector_array in, void* payload) {
	const mlxeng_norm_rope* p = (const mlxeng_norm_rope*)payload;
	mlx_array ins[3] = {mlx_array_new(), mlx_array_new(), mlx_array_new()}, y = mlx_array_new();
	int rc = mlx_vector_array_get(&ins[0], in, 0) || mlx_vector_array_get(&ins[1], in, 1) ||
		mlx_vector_array_get(&ins[2], in, 2) || mlxeng_norm_rope_run(&y, p->fwd, ins, 3, 1, p) ||
		mlx_vector_array_set_data(res, &y, 1);
	for (int i = 0; i < 3; i++) {
		mlx_array_free(ins[i]);
	}
	mlx_array_free(y);
	return rc;
}

// mlxeng_norm_rope_weight_grad is w's gradient, composed of MLX ops and returned lazily
// (a LoRA step never asks for a frozen norm's): the cotangent turned back by MLX's rope
// with the scale negated, moved to x's layout, then mlxeng_norm_weight_grad.
static int mlxeng_norm_rope_weight_grad(mlx_array* res, const mlx_array x, const mlx_array g, const mlx_array freqs,
		const mlxeng_norm_rope* p) {
	mlx_array back = mlx_array_new(), moved = mlx_array_new();
	mlx_optional_float base = {0, false};
	int axes[4] = {0, 2, 1, 3};
	int rc = mlx_fast_rope(&back, g, mlx_array_dim(x, 3), false, base, -p->scale, p->offset, freqs, p->s) ||
		mlx_transpose_axes(&moved, back, axes, 4, p->s) || mlxeng_norm_weight_grad(res, x, moved, p->eps, p->s);
	mlx_array_free(back);
	mlx_array_free(moved);
	return rc;
}

// mlxeng_norm_rope_vjp: the cotangent g [B, H, L, D] → [dx by
// kernels.NormRoPEBackwardSource, w's gradient (lazily), zeros for freqs].
static int mlxeng_norm_rope_vjp(mlx_vector_array* res, const mlx_vector_array primals, const mlx_vector_array cots,
		const mlx_vector_array outs, void* payload) {
	const mlxeng_norm_rope* p = (const mlxeng_norm_rope*)payload;
	mlx_array ins[4] = {mlx_array_new(), mlx_array_new(), mlx_array_new(), mlx_array_new()};
	mlx_array grads[3] = {mlx_array_new(), mlx_array_new(), mlx_array_new()};
	int rc = mlx_vector_array_get(&ins[0], primals, 0) || mlx_vector_array_get(&ins[1], primals, 1) ||
		mlx_vector_array_get(&ins[2], primals, 2) || mlx_vector_array_get(&ins[3], cots, 0) ||
		mlxeng_cast_to(&ins[3], mlx_array_dtype(ins[0]), p->s) || mlxeng_norm_rope_run(&grads[0], p->bwd, ins, 4, 0, p) ||
		mlxeng_norm_rope_weight_grad(&grads[1], ins[0], ins[3], ins[2], p) ||
		mlx_zeros_like(&grads[2], ins[2], p->s) || mlx_vector_array_set_data(res, grads, 3);
	for (int i = 0; i < 4; i++) {
		mlx_array_free(ins[i]);
	}
	for (int i = 0; i < 3; i++) {
		mlx_array_free(grads[i]);
	}
	return rc;
}

// mlxeng_norm_rope_apply is the kernels' NormRoPE of [x, w, freqs] with their VJP.
static int mlxeng_norm_rope_apply(mlx_array* res, const mlx_vector_array in, mlxeng_norm_rope p) {
	return mlxeng_custom_apply(res, in, mlxeng_norm_rope_forward, mlxeng_norm_rope_vjp, &p, sizeof p);
}
*/
import "C"

import (
	"math"

	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/internal/dims"
	"github.com/dgtune/dgtune/mx/mlxeng/kernels"
)

// The queries' and keys' prologue on MLX-CUDA in one kernel each way
// (the default there since session 18; MLXENG_NORM_ROPE=mlx turns them off). As MLX ops each of q
// and k is rms_norm, then rope on the transposed view — two launches forward, two
// backward (rope's VJP, the norm's input gradient), and MLX-CUDA's rope recomputes each
// pair's sine and cosine for every head: ~100 µs and 8 launches a real 26B-A4B layer
// (bench/results/gpu-s17.txt). kernels.NormRoPEForwardSource and NormRoPEBackwardSource
// take a row a warp, the forward with MLX's roundings (the normed value rounded to the
// rows' type before the rotation), the backward in float32 throughout. On the H200
// (ncu of real-6, session 18) rope's four launches went from ~81 to ~31 µs a layer and
// the q/k norms' MLX VJP fallbacks left the step (see ExpertOrder for the step time).

// normRoPEEnv turns the kernels off ("mlx").
const normRoPEEnv = "MLXENG_NORM_ROPE"

// normRoPEKernels are the forward and backward kernels; ok when both were made.
type normRoPEKernels struct {
	fwd, bwd C.mlx_fast_cuda_kernel
	ok       bool
}

// newNormRoPEKernels makes the kernels on a CUDA GPU unless env is "mlx".
func newNormRoPEKernels(device, env string) normRoPEKernels {
	if !isCUDA(device) || env == "mlx" {
		return normRoPEKernels{}
	}
	header := kernels.LoRAHeader + kernels.NormRoPEHeader
	k := normRoPEKernels{
		fwd: newCUDAKernel("dgtune_norm_rope", []string{"x", "w", "freqs"}, []string{"out"}, kernels.NormRoPEForwardSource, header),
		bwd: newCUDAKernel("dgtune_norm_rope_vjp", []string{"x", "w", "freqs", "g"}, []string{"dx"},
			kernels.NormRoPEBackwardSource, header),
	}
	k.ok = k.fwd.ctx != nil && k.bwd.ctx != nil
	return k
}

// normRoPEThroughKernels reports whether NormRoPE takes the kernels: bfloat16 x [B, L, H,
// D] and w (float32 compute keeps MLX's ops, as for the norm kernel), float32 freqs, D a
// multiple of 64 up to 1024, all rotated, a first position ≥ 0, and fewer than 2³¹ values.
func (e *Engine) normRoPEThroughKernels(x, w, freqs *array, p mx.RoPEParams) bool {
	if !e.normRoPE.ok || x.dt != mx.BFloat16 || w.dt != mx.BFloat16 || freqs == nil || freqs.dt != mx.Float32 || len(x.shape) != 4 {
		return false
	}
	d := x.shape[3]
	n := dims.Numel(x.shape)
	return p.Dims == d && !p.Traditional && d%64 == 0 && d <= 1024 && p.Offset >= 0 && n > 0 && n < 1<<31
}

// NormRoPE implements mx.NormRoPEr: through the kernels where they take x, else nil
// (mx.NormRoPE composes).
func (e *Engine) NormRoPE(hx, hw mx.Handle, eps float64, p mx.RoPEParams) mx.Handle {
	x, w := get(hx), get(hw)
	if p.Scale == 0 {
		p.Scale = 1
	}
	if !e.normRoPEThroughKernels(x, w, get(p.Freqs), p) {
		return nil
	}
	c := C.mlxeng_norm_rope{fwd: e.normRoPE.fwd, bwd: e.normRoPE.bwd, eps: C.float(eps), scale: C.float(p.Scale),
		eps_bits:   C.int(int32(math.Float32bits(float32(eps)))),
		scale_bits: C.int(int32(math.Float32bits(float32(p.Scale)))), offset: C.int(p.Offset), s: e.stream}
	in := vector([]mx.Handle{x, w, p.Freqs})
	defer C.mlx_vector_array_free(in)
	return e.op("norm_rope", func(res *C.mlx_array) C.int { return C.mlxeng_norm_rope_apply(res, in, c) })
}
