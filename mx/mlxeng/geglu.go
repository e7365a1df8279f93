//go:build mlx

package mlxeng

/*
#include "mlx/c/mlx.h"

int mlxeng_kernel_run(mlx_array* res, mlx_fast_cuda_kernel k, mlx_fast_cuda_kernel_config cfg,
	const mlx_array* in, int n, mlx_stream s);
int mlxeng_kernel_run_n(mlx_array* res, int nres, mlx_fast_cuda_kernel k, mlx_fast_cuda_kernel_config cfg,
	const mlx_array* in, int n, mlx_stream s);
int mlxeng_cast_to(mlx_array* a, mlx_dtype dt, mlx_stream s);
int mlxeng_custom_apply(mlx_array* res, const mlx_vector_array in,
	int (*fwd)(mlx_vector_array*, const mlx_vector_array, void*),
	int (*vjp)(mlx_vector_array*, const mlx_vector_array, const mlx_vector_array, const mlx_vector_array, void*),
	const void* payload, size_t size);

// mlxeng_geglu is what the op's closures need: the three kernels, whether the input is
// one [..., 2I] array (split) or gate and up, and the stream.
typedef struct {
	mlx_fast_cuda_kernel fwd, bwd_split, bwd;
	int split;
	mlx_stream s;
} mlxeng_geglu;

// mlxeng_geglu_config is a config for n outputs of the shapes and dtype given, a thread
// for every 8 values of `values` in blocks of 256, and the template constant T.
static mlx_fast_cuda_kernel_config mlxeng_geglu_config(const int* shape, int nd, mlx_dtype dt, int nout,
		size_t values, int* rc) {
	mlx_fast_cuda_kernel_config cfg = mlx_fast_cuda_kernel_config_new();
	size_t threads = (values / 8 + 255) / 256 * 256;
	for (int i = 0; *rc == 0 && i < nout; i++) {
		*rc = mlx_fast_cuda_kernel_config_add_output_arg(cfg, shape, nd, dt);
	}
	*rc = *rc || mlx_fast_cuda_kernel_config_set_grid(cfg, (int)threads, 1, 1) ||
		mlx_fast_cuda_kernel_config_set_thread_group(cfg, 256, 1, 1) ||
		mlx_fast_cuda_kernel_config_add_template_arg_dtype(cfg, "T", dt);
	return cfg;
}

// mlxeng_geglu_forward: [x [..., 2I]] (split) or [gate, up] → [gelu_tanh(gate)·up] by
// kernels.GeGLUForwardSource.
static int mlxeng_geglu_forward(mlx_vector_array* res, const mlx_vector_array in, void* payload) {
	const mlxeng_geglu* p = (const mlxeng_geglu*)payload;
	mlx_array a = mlx_array_new(), b = mlx_array_new(), y = mlx_array_new();
	int rc = mlx_vector_array_get(&a, in, 0) || mlx_vector_array_get(&b, in, p->split ? 0 : 1);
	int nd = mlx_array_ndim(a), shape[16];
	rc = rc || nd < 1 || nd > 16;
	if (rc == 0) {
		for (int i = 0; i < nd; i++) {
			shape[i] = mlx_array_dim(a, i);
		}
		if (p->split) {
			shape[nd - 1] /= 2;
		}
		size_t values = p->split ? mlx_array_size(a) / 2 : mlx_array_size(a);
		mlx_fast_cuda_kernel_config cfg = mlxeng_geglu_config(shape, nd, mlx_array_dtype(a), 1, values, &rc);
		const mlx_array ins[2] = {a, b};
		rc = rc || mlx_fast_cuda_kernel_config_add_template_arg_bool(cfg, "SPLIT", p->split != 0) ||
			mlxeng_kernel_run(&y, p->fwd, cfg, ins, 2, p->s) || mlx_vector_array_set_data(res, &y, 1);
		mlx_fast_cuda_kernel_config_free(cfg);
	}
	mlx_array_free(a);
	mlx_array_free(b);
	mlx_array_free(y);
	return rc;
}

// mlxeng_geglu_vjp: the cotangent g → [dx] (split, kernels.GeGLUBackwardSplitSource) or
// [d gate, d up] (kernels.GeGLUBackwardSource).
static int mlxeng_geglu_vjp(mlx_vector_array* res, const mlx_vector_array primals, const mlx_vector_array cots,
		const mlx_vector_array outs, void* payload) {
	const mlxeng_geglu* p = (const mlxeng_geglu*)payload;
	int n = p->split ? 1 : 2;
	mlx_array in[3] = {mlx_array_new(), mlx_array_new(), mlx_array_new()};
	mlx_array grads[2] = {mlx_array_new(), mlx_array_new()};
	int rc = mlx_vector_array_get(&in[0], primals, 0) || (!p->split && mlx_vector_array_get(&in[1], primals, 1)) ||
		mlx_vector_array_get(&in[n], cots, 0) || mlxeng_cast_to(&in[n], mlx_array_dtype(in[0]), p->s);
	if (rc == 0) {
		const mlx_array x = in[0];
		mlx_fast_cuda_kernel_config cfg = mlxeng_geglu_config(mlx_array_shape(x), mlx_array_ndim(x),
			mlx_array_dtype(x), n, mlx_array_size(in[n]), &rc);
		rc = rc || mlxeng_kernel_run_n(grads, n, p->split ? p->bwd_split : p->bwd, cfg, in, n + 1, p->s) ||
			mlx_vector_array_set_data(res, grads, n);
		mlx_fast_cuda_kernel_config_free(cfg);
	}
	for (int i = 0; i < 3; i++) {
		mlx_array_free(in[i]);
	}
	mlx_array_free(grads[0]);
	mlx_array_free(grads[1]);
	return rc;
}

// mlxeng_geglu_apply is the kernel's GeGLU of in with the kernels' VJP.
static int mlxeng_geglu_apply(mlx_array* res, const mlx_vector_array in, mlxeng_geglu p) {
	return mlxeng_custom_apply(res, in, mlxeng_geglu_forward, mlxeng_geglu_vjp, &p, sizeof p);
}
*/
import "C"

import (
	"slices"

	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/internal/dims"
	"github.com/dgtune/dgtune/mx/mlxeng/kernels"
)

// The GeGLU activation on MLX-CUDA through dgtune's kernels (the default on CUDA;
// MLXENG_GEGLU=mlx turns them off). mlx-c has no fused GELU, so the engine composes
// gelu_tanh(gate)·up of ten MLX ops (geluTanh); compiled, MLX-CUDA fuses them into three
// kernels forward — the composition's intermediates are outputs its backward keeps — and
// differentiates them in several more, with the split's VJP a concatenate on top. The
// kernels (kernels.GeGLUHeader) give the composition's forward bit for bit in one pass and
// the derivative in float32, rounded once, in one more: for the experts, d gate and d up
// straight into the two halves of one [..., 2I] cotangent.

// gegluEnv turns the kernels off ("mlx").
const gegluEnv = "MLXENG_GEGLU"

// gegluKernels are the forward and the two backward kernels; ok when all were made.
type gegluKernels struct {
	fwd, bwdSplit, bwd C.mlx_fast_cuda_kernel
	ok                 bool
}

// newGeGLUKernels makes the GeGLU kernels on a CUDA GPU unless env is "mlx".
func newGeGLUKernels(device, env string) gegluKernels {
	if !isCUDA(device) || env == "mlx" {
		return gegluKernels{}
	}
	header := kernels.LoRAHeader + kernels.GeGLUHeader
	k := gegluKernels{
		fwd: newCUDAKernel("dgtune_geglu", []string{"a", "b"}, []string{"out"}, kernels.GeGLUForwardSource, header),
		bwdSplit: newCUDAKernel("dgtune_geglu_split_vjp", []string{"x", "g"}, []string{"dx"},
			kernels.GeGLUBackwardSplitSource, header),
		bwd: newCUDAKernel("dgtune_geglu_vjp", []string{"gate", "up", "g"}, []string{"dgate", "dup"},
			kernels.GeGLUBackwardSource, header),
	}
	k.ok = k.fwd.ctx != nil && k.bwdSplit.ctx != nil && k.bwd.ctx != nil
	return k
}

// gegluThroughKernels reports whether the kernels take a GeGLU whose gate is x (split:
// x holds gate and up as the halves of its last axis) and up u: bfloat16, each half a
// multiple of 8 wide, at least one value, and fewer than 2³¹ values.
func (e *Engine) gegluThroughKernels(x, u *array, split bool) bool {
	if !e.geglu.ok || x.dt != mx.BFloat16 || len(x.shape) < 1 {
		return false
	}
	w := x.shape[len(x.shape)-1]
	if split {
		w /= 2
	} else if u.dt != mx.BFloat16 || !slices.Equal(u.shape, x.shape) {
		return false
	}
	n := dims.Numel(x.shape)
	return w > 0 && w%8 == 0 && n > 0 && n < 1<<31
}

// gegluKernel is gelu_tanh(gate)·up through the kernels, of [x] (split) or [gate, up].
func (e *Engine) gegluKernel(in []mx.Handle, split bool) *array {
	p := C.mlxeng_geglu{fwd: e.geglu.fwd, bwd_split: e.geglu.bwdSplit, bwd: e.geglu.bwd, s: e.stream}
	if split {
		p.split = 1
	}
	v := vector(in)
	defer C.mlx_vector_array_free(v)
	return e.op("geglu", func(res *C.mlx_array) C.int { return C.mlxeng_geglu_apply(res, v, p) })
}

// GeGLUSplit implements mx.GeGLUSplitter: through the kernels where they take x, else
// nil (mx.GeGLUSplit composes).
func (e *Engine) GeGLUSplit(hx mx.Handle) mx.Handle {
	x := get(hx)
	if !e.gegluThroughKernels(x, nil, true) {
		return nil
	}
	return e.gegluKernel([]mx.Handle{x}, true)
}
