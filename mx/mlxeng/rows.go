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

// mlxeng_rows is what the take's closures need: the two kernels and the stream.
typedef struct {
	mlx_fast_cuda_kernel gather, scatter;
	mlx_stream s;
} mlxeng_rows;

// mlxeng_rows_run applies kernel k (threads a block per row of m rows) to a [?, h] and
// the flat indices idx: out [rows, h] of dtype dt, zero-filled first when zero is set,
// with template constant R = rows when r is set.
static int mlxeng_rows_run(mlx_array* res, mlx_fast_cuda_kernel k, const mlx_array a, const mlx_array idx,
		int m, int threads, int rows, int h, mlx_dtype dt, int zero, int r, mlx_stream s) {
	int shape[2] = {rows, h};
	const mlx_array in[] = {a, idx};
	mlx_fast_cuda_kernel_config cfg = mlx_fast_cuda_kernel_config_new();
	int rc = mlx_fast_cuda_kernel_config_add_output_arg(cfg, shape, 2, dt) ||
		mlx_fast_cuda_kernel_config_set_grid(cfg, m * threads, 1, 1) ||
		mlx_fast_cuda_kernel_config_set_thread_group(cfg, threads, 1, 1) ||
		(zero && mlx_fast_cuda_kernel_config_set_init_value(cfg, 0)) ||
		(r && mlx_fast_cuda_kernel_config_add_template_arg_int(cfg, "R", rows)) ||
		mlxeng_kernel_run(res, k, cfg, in, 2, s);
	mlx_fast_cuda_kernel_config_free(cfg);
	return rc;
}

// mlxeng_rows_forward: inputs [x [R, H], idx (flat, m)] → [x[idx]] as [m, H].
static int mlxeng_rows_forward(mlx_vector_array* res, const mlx_vector_array in, void* payload) {
	const mlxeng_rows* k = (const mlxeng_rows*)payload;
	mlx_array x = mlx_array_new(), idx = mlx_array_new(), y = mlx_array_new();
	int rc = mlx_vector_array_get(&x, in, 0) || mlx_vector_array_get(&idx, in, 1);
	if (rc == 0) {
		int m = (int)mlx_array_size(idx), h = mlx_array_dim(x, 1);
		rc = mlxeng_rows_run(&y, k->gather, x, idx, m, 256, m, h, mlx_array_dtype(x), 0, 0, k->s) ||
			mlx_vector_array_set_data(res, &y, 1);
	}
	mlx_array_free(x);
	mlx_array_free(idx);
	mlx_array_free(y);
	return rc;
}

// mlxeng_rows_vjp: the cotangent's rows added back to the rows they were taken from
// (zeros for the indices, which nothing asks for).
static int mlxeng_rows_vjp(mlx_vector_array* res, const mlx_vector_array primals, const mlx_vector_array cots,
		const mlx_vector_array outs, void* payload) {
	const mlxeng_rows* k = (const mlxeng_rows*)payload;
	mlx_array x = mlx_array_new(), idx = mlx_array_new(), g = mlx_array_new();
	mlx_array grads[2] = {mlx_array_new(), mlx_array_new()};
	int rc = mlx_vector_array_get(&x, primals, 0) || mlx_vector_array_get(&idx, primals, 1) ||
		mlx_vector_array_get(&g, cots, 0);
	if (rc == 0) {
		int m = (int)mlx_array_size(idx), rows = mlx_array_dim(x, 0), h = mlx_array_dim(x, 1);
		rc = mlxeng_rows_run(&grads[0], k->scatter, g, idx, m, 128, rows, h, mlx_array_dtype(x), 1, 1, k->s) ||
			mlx_zeros_like(&grads[1], idx, k->s) || mlx_vector_array_set_data(res, grads, 2);
	}
	mlx_array_free(x);
	mlx_array_free(idx);
	mlx_array_free(g);
	mlx_array_free(grads[0]);
	mlx_array_free(grads[1]);
	return rc;
}

// mlxeng_rows_apply is the take x[idx] with the kernels' VJP, for the inputs [x, idx (flat)].
static int mlxeng_rows_apply(mlx_array* res, const mlx_vector_array in, mlxeng_rows k) {
	return mlxeng_custom_apply(res, in, mlxeng_rows_forward, mlxeng_rows_vjp, &k, sizeof k);
}
*/
import "C"

import (
	"os"

	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/internal/dims"
	"github.com/dgtune/dgtune/mx/mlxeng/kernels"
)

// Takes of rows on MLX-CUDA (the default there; MLXENG_ROWS=mlx turns it off). The
// mixture of experts dispatches each token's row to its k experts' sorted order with a
// take and sums the k copies back in the backward with its VJP, a scatter-add; MLX-CUDA
// v0.32.1 ran those at ~57 and ~117 µs a layer of the real 26B-A4B geometry on the H200
// (plus the combine's take and its scatter-add, as much again). kernels.GatherRowsSource
// copies a row a block and kernels.ScatterRowsSource adds the cotangent's rows back with
// atomic adds of bfloat16 pairs. The values are MLX's: a take copies, and the adds of a
// row picked several times round as MLX's scatter-add does (in an order that may vary).

// rowsEnv turns the row kernels off ("mlx": MLX's take and its VJP).
const rowsEnv = "MLXENG_ROWS"

// rowKernels holds the two kernels; ok false leaves takes to MLX.
type rowKernels struct {
	gather, scatter C.mlx_fast_cuda_kernel
	ok              bool
}

// newRowKernels makes the row kernels on a CUDA GPU unless the environment turns them off.
func newRowKernels(device string) rowKernels {
	if !isCUDA(device) || os.Getenv(rowsEnv) == "mlx" {
		return rowKernels{}
	}
	k := rowKernels{
		gather:  newCUDAKernel("dgtune_gather_rows", []string{"src", "idx"}, []string{"out"}, kernels.GatherRowsSource, kernels.RowsHeader),
		scatter: newCUDAKernel("dgtune_scatter_rows", []string{"g", "idx"}, []string{"out"}, kernels.ScatterRowsSource, kernels.RowsHeader),
	}
	k.ok = k.gather.ctx != nil && k.scatter.ctx != nil
	return k
}

// takesRows reports whether a take goes through the row kernels: rows (axis 0) of a 2-D
// bfloat16 or float32 x with an even row length, by 32- or 8-bit integer indices (the
// kernels read them as int), fewer than 2³¹ of them.
func (e *Engine) takesRows(x, idx *array, axis int) bool {
	if !e.rows.ok || len(x.shape) != 2 || (axis != 0 && axis != -2) || x.shape[1]%2 != 0 || x.shape[1] == 0 {
		return false
	}
	if x.dt != mx.BFloat16 && x.dt != mx.Float32 {
		return false
	}
	switch idx.dt {
	case mx.Int32, mx.Uint32, mx.Uint8:
	default:
		return false
	}
	n := dims.Numel(idx.shape)
	return n > 0 && n < 1<<31 && x.shape[0] < 1<<31
}

// takeRows is x[idx] along axis 0 through the row kernels: [idx.shape..., H].
func (e *Engine) takeRows(x, idx *array) *array {
	flat := e.reshape(idx, []int{dims.Numel(idx.shape)})
	defer e.free(flat)
	k := C.mlxeng_rows{gather: e.rows.gather, scatter: e.rows.scatter, s: e.stream}
	in := vector([]mx.Handle{x, flat})
	defer C.mlx_vector_array_free(in)
	out := e.op("take", func(res *C.mlx_array) C.int { return C.mlxeng_rows_apply(res, in, k) })
	if len(idx.shape) == 1 {
		return out
	}
	defer e.free(out)
	return e.reshape(out, append(append([]int(nil), idx.shape...), x.shape[1]))
}
