//go:build mlx

package mlxeng

/*
#include "mlx/c/mlx.h"

int mlxeng_kernel_run_n(mlx_array* res, int nres, mlx_fast_cuda_kernel k, mlx_fast_cuda_kernel_config cfg,
	const mlx_array* in, int n, mlx_stream s);

// mlxeng_expert_order runs kernels.ExpertOrderSource on idx [n] among experts: res[0] the
// order, res[1] its inverse, both int32 [n].
static int mlxeng_expert_order(mlx_array* res, mlx_fast_cuda_kernel k, const mlx_array idx, int experts, mlx_stream s) {
	int n = mlx_array_dim(idx, 0);
	mlx_fast_cuda_kernel_config cfg = mlx_fast_cuda_kernel_config_new();
	int rc = mlx_fast_cuda_kernel_config_add_output_arg(cfg, &n, 1, MLX_INT32) ||
		mlx_fast_cuda_kernel_config_add_output_arg(cfg, &n, 1, MLX_INT32) ||
		mlx_fast_cuda_kernel_config_set_grid(cfg, 1024, 1, 1) ||
		mlx_fast_cuda_kernel_config_set_thread_group(cfg, 1024, 1, 1) ||
		mlx_fast_cuda_kernel_config_add_template_arg_int(cfg, "E", experts) ||
		mlxeng_kernel_run_n(res, 2, k, cfg, &idx, 1, s);
	mlx_fast_cuda_kernel_config_free(cfg);
	return rc;
}
*/
import "C"

import (
	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mlxeng/kernels"
)

// The experts' order on MLX-CUDA in one kernel (the default there since session 18;
// MLXENG_EXPERT_ORDER=mlx turns it off). The mixture of experts sorts its (token, slot) pairs
// by expert and puts them back after: two argsorts, which MLX-CUDA ran as one-block merge
// sorts of the real 26B-A4B geometry's 3,072 pairs (~27 µs each, twice a layer) with a
// cast of each result from uint32 (bench/results/gpu-s17.txt). kernels.ExpertOrderSource
// counts the ids per expert and places them in one launch, both permutations at once.
// With NormRoPE's kernels it took the real step from 104.7 to 93.2 ms (medians of three
// alternating rounds with the joined attention and the kept head weight; ncu of real-6:
// the two sorts' ~66 µs a layer became one ~23 µs launch; bench/results/gpu-s18.txt).

// expertOrderEnv turns the kernel off ("mlx").
const expertOrderEnv = "MLXENG_EXPERT_ORDER"

// maxOrderExperts is the most experts the kernel takes (its per-warp counts are E bytes
// each, 32 warps, in 48 KB of shared memory with the E next positions).
const maxOrderExperts = 1024

// newExpertOrderKernel makes the kernel on a CUDA GPU unless env is "mlx".
func newExpertOrderKernel(device, env string) (k C.mlx_fast_cuda_kernel, ok bool) {
	if !isCUDA(device) || env == "mlx" {
		return k, false
	}
	k = newCUDAKernel("dgtune_expert_order", []string{"idx"}, []string{"order", "inverse"}, kernels.ExpertOrderSource, "")
	return k, k.ctx != nil
}

// ExpertOrder implements mx.ExpertOrderer: through the kernel where it is on and takes
// the ids (at most maxOrderExperts experts, at least one id), else nils (mx.ExpertOrder
// composes).
func (e *Engine) ExpertOrder(h mx.Handle, experts int) (order, inverse mx.Handle) {
	idx := get(h)
	if !e.expertOrderOK || experts > maxOrderExperts || idx.shape[0] < 1 {
		return nil, nil
	}
	var res [2]C.mlx_array
	if err := e.try("expert_order", func() C.int {
		return C.mlxeng_expert_order(&res[0], e.expertOrderKernel, idx.c, C.int(experts), e.stream)
	}); err != nil {
		for _, r := range res {
			if r.ctx != nil {
				C.mlx_array_free(r)
			}
		}
		panic(err)
	}
	return e.wrap(res[0]), e.wrap(res[1])
}
