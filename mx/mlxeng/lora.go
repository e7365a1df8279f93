//go:build mlx

package mlxeng

/*
#include <stdlib.h>
#include "mlx/c/mlx.h"

int mlxeng_kernel_run_n(mlx_array* res, int nres, mlx_fast_cuda_kernel k, mlx_fast_cuda_kernel_config cfg,
	const mlx_array* in, int n, mlx_stream s);
int mlxeng_custom_apply(mlx_array* res, const mlx_vector_array in,
	int (*fwd)(mlx_vector_array*, const mlx_vector_array, void*),
	int (*vjp)(mlx_vector_array*, const mlx_vector_array, const mlx_vector_array, const mlx_vector_array, void*),
	const void* payload, size_t size);

// mlxeng_lora is what the op's closures need: the three kernels, α's float32 bits and
// the stream. The kernels take |α|'s bits and the sign apart: MLX names a kernel after
// its template constants, and a name cannot hold a minus sign.
typedef struct {
	mlx_fast_cuda_kernel fwd, rows, cols;
	int alpha;
	mlx_stream s;
} mlxeng_lora;

// The launch shapes (kernels.LoRAForwardSource and the others say what they assume):
// the row kernels give a block of 8 warps 4, 2 or 1 rows as the rank grows (the block's
// partial sums stay in registers), the columns kernel a block of 16, 8 or 4 warps (its
// shared memory, W·64·(r+1) floats, under 48 KB).
static int mlxeng_lora_rows_per_block(int r) { return r <= 8 ? 4 : r <= 16 ? 2 : 1; }
static int mlxeng_lora_column_warps(int r) { return r <= 8 ? 16 : r <= 16 ? 8 : 4; }
enum { mlxeng_lora_row_warps = 8 };

// mlxeng_lora_run launches kernel k over threads threads in blocks of w warps with the
// template constants R, ROWS (when rows > 0), W, ALPHA and NEG on in[0..nin), writing the
// outputs res[0..nout) of shapes shapes[i][0..2) and dtypes dts[i].
static int mlxeng_lora_run(mlx_array* res, int nout, int shapes[][2], const mlx_dtype* dts, mlx_fast_cuda_kernel k,
		const mlx_array* in, int nin, int threads, int w, int r, int rows, const mlxeng_lora* p) {
	mlx_fast_cuda_kernel_config cfg = mlx_fast_cuda_kernel_config_new();
	int rc = 0;
	for (int i = 0; rc == 0 && i < nout; i++) {
		rc = mlx_fast_cuda_kernel_config_add_output_arg(cfg, shapes[i], 2, dts[i]);
	}
	rc = rc || mlx_fast_cuda_kernel_config_set_grid(cfg, threads, 1, 1) ||
		mlx_fast_cuda_kernel_config_set_thread_group(cfg, 32 * w, 1, 1) ||
		mlx_fast_cuda_kernel_config_add_template_arg_int(cfg, "R", r) ||
		(rows > 0 && mlx_fast_cuda_kernel_config_add_template_arg_int(cfg, "ROWS", rows)) ||
		mlx_fast_cuda_kernel_config_add_template_arg_int(cfg, "W", w) ||
		mlx_fast_cuda_kernel_config_add_template_arg_int(cfg, "ALPHA", p->alpha & 0x7fffffff) ||
		mlx_fast_cuda_kernel_config_add_template_arg_bool(cfg, "NEG", p->alpha < 0) ||
		mlxeng_kernel_run_n(res, nout, k, cfg, in, nin, p->s);
	mlx_fast_cuda_kernel_config_free(cfg);
	return rc;
}

// mlxeng_lora_forward: inputs [base [N, M], x [N, K], a [K, R], b [R, M]] → [out [N, M]].
static int mlxeng_lora_forward(mlx_vector_array* res, const mlx_vector_array in, void* payload) {
	const mlxeng_lora* p = (const mlxeng_lora*)payload;
	mlx_array v[4] = {mlx_array_new(), mlx_array_new(), mlx_array_new(), mlx_array_new()};
	mlx_array out = mlx_array_new();
	int rc = 0;
	for (int i = 0; rc == 0 && i < 4; i++) {
		rc = mlx_vector_array_get(&v[i], in, i);
	}
	if (rc == 0) {
		int n = mlx_array_dim(v[1], 0), k = mlx_array_dim(v[1], 1), r = mlx_array_dim(v[2], 1), m = mlx_array_dim(v[3], 1);
		int shapes[1][2] = {{n, m}};
		mlx_dtype dts[1] = {mlx_array_dtype(v[1])};
		int rows = mlxeng_lora_rows_per_block(r), w = mlxeng_lora_row_warps;
		rc = mlxeng_lora_run(&out, 1, shapes, dts, p->fwd, v, 4, (n + rows - 1) / rows * 32 * w, w, r, rows, p) ||
			mlx_vector_array_set_data(res, &out, 1);
	}
	for (int i = 0; i < 4; i++) {
		mlx_array_free(v[i]);
	}
	mlx_array_free(out);
	return rc;
}

// mlxeng_lora_vjp: the cotangent g of out → [g (base's), dx, da, db], by the rows kernel
// (dx and ut = (x·a, (α·g)·bᵀ)) and then the columns kernel (da, db).
static int mlxeng_lora_vjp(mlx_vector_array* res, const mlx_vector_array primals, const mlx_vector_array cots,
		const mlx_vector_array outs, void* payload) {
	const mlxeng_lora* p = (const mlxeng_lora*)payload;
	mlx_array x = mlx_array_new(), a = mlx_array_new(), b = mlx_array_new(), g = mlx_array_new();
	mlx_array rows[2] = {mlx_array_new(), mlx_array_new()};  // dx, ut
	mlx_array cols[2] = {mlx_array_new(), mlx_array_new()};  // da, db
	int rc = mlx_vector_array_get(&x, primals, 1) || mlx_vector_array_get(&a, primals, 2) ||
		mlx_vector_array_get(&b, primals, 3) || mlx_vector_array_get(&g, cots, 0);
	if (rc == 0) {
		int n = mlx_array_dim(x, 0), k = mlx_array_dim(x, 1), r = mlx_array_dim(a, 1), m = mlx_array_dim(b, 1);
		int rs[2][2] = {{n, k}, {n, 2 * r}}, cs[2][2] = {{k, r}, {r, m}};
		mlx_dtype rdt[2] = {mlx_array_dtype(x), MLX_FLOAT32}, cdt[2] = {MLX_FLOAT32, MLX_FLOAT32};
		const mlx_array rin[4] = {x, g, a, b};
		int per = mlxeng_lora_rows_per_block(r), w = mlxeng_lora_row_warps, wc = mlxeng_lora_column_warps(r);
		rc = mlxeng_lora_run(rows, 2, rs, rdt, p->rows, rin, 4, (n + per - 1) / per * 32 * w, w, r, per, p);
		if (rc == 0) {
			const mlx_array cin[3] = {x, g, rows[1]};
			rc = mlxeng_lora_run(cols, 2, cs, cdt, p->cols, cin, 3, ((k + 63) / 64 + (m + 63) / 64) * 32 * wc, wc, r, 0, p);
		}
		const mlx_array grads[4] = {g, rows[0], cols[0], cols[1]};
		rc = rc || mlx_vector_array_set_data(res, grads, 4);
	}
	mlx_array_free(x);
	mlx_array_free(a);
	mlx_array_free(b);
	mlx_array_free(g);
	for (int i = 0; i < 2; i++) {
		mlx_array_free(rows[i]);
		mlx_array_free(cols[i]);
	}
	return rc;
}

// mlxeng_lora_apply is base + cast(α·((x·a)·b)) with the kernels' VJP, for the inputs
// [base [N, M], x [N, K], a, b].
static int mlxeng_lora_apply(mlx_array* res, const mlx_vector_array in, mlxeng_lora p) {
	return mlxeng_custom_apply(res, in, mlxeng_lora_forward, mlxeng_lora_vjp, &p, sizeof p);
}
*/
import "C"

import (
	"math"
	"os"

	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/internal/dims"
	"github.com/dgtune/dgtune/mx/mlxeng/kernels"
)

// LoRA adapters' terms on MLX-CUDA (the default there; MLXENG_LORA=mlx turns it off).
// With bfloat16 activations and float32 factors a LoRA linear adds
// cast(α·((x·a)·b)) to its base's output; MLX-CUDA composes that from ~12 kernels
// forward and backward — casts, cuBLAS products of rank r with their split-K reductions,
// a scale, an add — each a launch, and each product a cuBLASLt set-up on the host, which
// paces the real 26B-A4B geometry's step. kernels.LoRAForwardSource does the forward in
// one launch, LoRARowsBackwardSource and LoRAColumnsBackwardSource the backward in two.
// Their sums are float32 with fused multiply-adds in their own order, so the values are
// the composition's up to float32 rounding of those sums (and of the bfloat16 results
// that follow from them).

// loraEnv turns the LoRA kernels off ("mlx": MLX's composition).
const loraEnv = "MLXENG_LORA"

// maxLoRARank bounds the kernels' rank: a thread's partial sums (ROWS·r floats) and the
// columns kernel's W·64·(r+1) floats of shared memory.
const maxLoRARank = 32

// loraKernels holds the three kernels; ok false leaves adapters to the composition.
type loraKernels struct {
	fwd, rows, cols C.mlx_fast_cuda_kernel
	ok              bool
}

// newLoRAKernels makes the LoRA kernels on a CUDA GPU unless the environment turns them off.
func newLoRAKernels(device string) loraKernels {
	if !isCUDA(device) || os.Getenv(loraEnv) == "mlx" {
		return loraKernels{}
	}
	k := loraKernels{
		fwd: newCUDAKernel("dgtune_lora_forward", []string{"base", "x", "a", "b"}, []string{"out"},
			kernels.LoRAForwardSource, kernels.LoRAHeader),
		rows: newCUDAKernel("dgtune_lora_rows", []string{"x", "g", "a", "b"}, []string{"dx", "ut"},
			kernels.LoRARowsBackwardSource, kernels.LoRAHeader),
		cols: newCUDAKernel("dgtune_lora_columns", []string{"x", "g", "ut"}, []string{"da", "db"},
			kernels.LoRAColumnsBackwardSource, kernels.LoRAHeader),
	}
	k.ok = k.fwd.ctx != nil && k.rows.ctx != nil && k.cols.ctx != nil
	return k
}

// addsLoRA reports whether LoRAAdd goes through the kernels: bfloat16 x [..., K] and
// base [..., M] with K and M multiples of 8 (the kernels take 8 columns at a time),
// float32 a [K, r] and b [r, M] with 1 ≤ r ≤ maxLoRARank, at least one row, and every
// array's elements indexable by int.
func (e *Engine) addsLoRA(base, x, a, b *array) bool {
	if !e.lora.ok || x.dt != mx.BFloat16 || base.dt != mx.BFloat16 || a.dt != mx.Float32 || b.dt != mx.Float32 {
		return false
	}
	if len(x.shape) < 1 || len(a.shape) != 2 || len(b.shape) != 2 {
		return false
	}
	k, r, m := x.shape[len(x.shape)-1], a.shape[1], b.shape[1]
	if k == 0 || m == 0 || k%8 != 0 || m%8 != 0 || r < 1 || r > maxLoRARank {
		return false
	}
	n := dims.Numel(x.shape) / k
	return n > 0 && n*max(k, m, 2*r) < 1<<31 && k*r < 1<<31 && r*m < 1<<31
}

// LoRAAdd implements mx.LoRAAdder: base + cast(α·((x·a)·b)) through the LoRA kernels,
// where addsLoRA takes the arrays.
func (e *Engine) LoRAAdd(hbase, hx, ha, hb mx.Handle, alpha float64) (mx.Handle, bool) {
	base, x, a, b := get(hbase), get(hx), get(ha), get(hb)
	if !e.addsLoRA(base, x, a, b) {
		return nil, false
	}
	k, m := x.shape[len(x.shape)-1], b.shape[1]
	n, shape := dims.Numel(x.shape)/k, base.shape
	if len(x.shape) != 2 {
		x = e.reshape(x, []int{n, k})
		defer e.free(x)
		base = e.reshape(base, []int{n, m})
		defer e.free(base)
	}
	p := C.mlxeng_lora{fwd: e.lora.fwd, rows: e.lora.rows, cols: e.lora.cols,
		alpha: C.int(int32(math.Float32bits(float32(alpha)))), s: e.stream}
	in := vector([]mx.Handle{base, x, a, b})
	defer C.mlx_vector_array_free(in)
	out := e.op("lora_add", func(res *C.mlx_array) C.int { return C.mlxeng_lora_apply(res, in, p) })
	if len(shape) == 2 {
		return out, true
	}
	defer e.free(out)
	return e.reshape(out, shape), true
}
