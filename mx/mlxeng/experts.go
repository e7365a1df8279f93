//go:build mlx

package mlxeng

/*
#include <stdlib.h>
#include "mlx/c/mlx.h"

int mlxeng_kernel_run(mlx_array* res, mlx_fast_cuda_kernel k, mlx_fast_cuda_kernel_config cfg,
	const mlx_array* in, int n, mlx_stream s);

// mlxeng_experts_apply is out [rows, 1, nj] = x [rows, 1, nc] times each row's expert:
// trans 1 is x·W[e]ᵀ (W [E, nj, nc] packed: the forward), trans 0 is x·W[e]
// (W [E, nc, nj]: the input gradient). idx [rows] is non-decreasing.
int mlxeng_experts_apply(mlx_array* res, mlx_fast_cuda_kernel k, const mlx_array x, const mlx_array w,
		const mlx_array scales, const mlx_array biases, const mlx_array idx, int trans, mlx_stream s) {
	int rows = mlx_array_dim(x, 0);
	int nc = mlx_array_dim(x, 2);
	int experts = mlx_array_dim(w, 0);
	int nj = trans ? mlx_array_dim(w, 1) : (int)(mlx_array_dim(w, 2) * 8);
	int shape[3] = {rows, 1, nj};
	// Blocks per expert along the rows (grid z): as many as an expert's 32-row tiles on
	// average, so few experts with many rows each still spread over the GPU.
	int z = (rows + 32 * experts - 1) / (32 * experts);
	if (z < 1) z = 1;
	mlx_fast_cuda_kernel_config cfg = mlx_fast_cuda_kernel_config_new();
	const mlx_array in[] = {x, w, scales, biases, idx};
	int rc = mlx_fast_cuda_kernel_config_add_output_arg(cfg, shape, 3, MLX_BFLOAT16) ||
		mlx_fast_cuda_kernel_config_set_grid(cfg, (nj / 64) * 128, experts, z) ||
		mlx_fast_cuda_kernel_config_set_thread_group(cfg, 128, 1, 1) ||
		mlx_fast_cuda_kernel_config_add_template_arg_bool(cfg, "TRANS", trans != 0) ||
		mlx_fast_cuda_kernel_config_add_template_arg_int(cfg, "NJ", nj) ||
		mlx_fast_cuda_kernel_config_add_template_arg_int(cfg, "NC", nc) ||
		mlxeng_kernel_run(res, k, cfg, in, 5, s);
	mlx_fast_cuda_kernel_config_free(cfg);
	return rc;
}
*/
import "C"

import (
	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mlxeng/kernels"
)

// Fused experts on MLX-CUDA, the default there (MLXENG_EXPERTS=dequant turns them off). On
// the dequant route each expert product dequantizes the layer's experts — all of them,
// 1.5 GB of bfloat16 for the real 26B-A4B geometry — and multiplies through CUTLASS's
// grouped GEMM, whose 256-row tiles hold ~24 rows an expert and load with alignment 1:
// together ~60 % of the real geometry's step on the H200
// (bench/results/gpu-profile-real2-tf32.txt). kernels.ExpertsSource multiplies each
// expert's sorted rows by its 4-bit weight dequantized tile by tile in shared memory, on
// tensor cores, forward x·Wᵀ and backward g·W, without writing the weight out;
// kernels.ExpertsMMASource does the same with the operands dequantized in registers and
// no shared-memory tile, and takes the forward by default (chooseExpertsRoute). Their
// indexing is tested on a CPU emulation (package kernels), their results on a GPU by
// TestFusedExpertsMatchExact, their speed by BenchmarkFusedExperts and bench/gpu_run.sh
// ITEMS=experts. Dense linears do not use them (dequant.go): through the first as one expert
// (grid z over the rows) the real geometry's dense products took ~0.85 ms a layer
// against ~0.45, and its tied 262144-row head 8.9 ms against 3.0 (lease 5).

// expertsEnv picks the experts' products: "dequant" turns the fused kernels off, "wmma"
// and "mma" put both directions on one kernel, anything else takes the default route.
const expertsEnv = "MLXENG_EXPERTS"

// expertsKind is one fused experts kernel, or none.
type expertsKind int

const (
	expertsOff  expertsKind = iota // the dequant route's grouped GEMM
	expertsWMMA                    // kernels.ExpertsSource: WMMA through a shared-memory tile
	expertsMMA                     // kernels.ExpertsMMASource: mma.sync on operands built in registers
	expertsKinds
)

// expertsRoute is the kernel each direction of an expert product takes: the forward
// x·W[e]ᵀ and the input gradient g·W[e].
type expertsRoute struct{ forward, backward expertsKind }

// chooseExpertsRoute is the route on device with the environment's setting env. The
// default on CUDA is mma.sync forward and WMMA backward, the faster of the two each way
// on the H200 (warm ncu over a real-geometry step, mean µs a launch, session 15): the
// forward's gate/up 308.5 against 351.1 and down 168.9 against 191.3, but the input
// gradient's 606.1 against 378.3 and 335.2 against 214.6 — there the mma kernel's
// per-value unpacking (two rows a register, each its own scale) and 118 registers a
// thread (25 % occupancy) leave it bound by L1 (bench/results/gpu-s15.txt).
func chooseExpertsRoute(device, env string) expertsRoute {
	if !isCUDA(device) {
		return expertsRoute{}
	}
	switch env {
	case "dequant":
		return expertsRoute{}
	case "wmma":
		return expertsRoute{expertsWMMA, expertsWMMA}
	case "mma":
		return expertsRoute{expertsMMA, expertsMMA}
	}
	return expertsRoute{expertsMMA, expertsWMMA}
}

// mmaExpertsMaxContraction bounds the contraction ExpertsMMASource takes: it keeps NC
// scales and NC biases (bfloat16) in static shared memory, at most 48 KB a block.
const mmaExpertsMaxContraction = 8192

// newExpertsKernel makes kind's kernel; ok is false where MLX refuses it (no CUDA).
// Making a kernel compiles nothing: MLX compiles it for each shape on first use.
func newExpertsKernel(kind expertsKind) (k C.mlx_fast_cuda_kernel, ok bool) {
	name, source, header := "dgtune_mma_experts", kernels.ExpertsMMASource, kernels.ExpertsMMAHeader
	if kind == expertsWMMA {
		name, source, header = "dgtune_experts", kernels.ExpertsSource, kernels.ExpertsHeader
	}
	k = newCUDAKernel(name, []string{"x", "w", "scales", "biases", "idx"}, []string{"out"}, source, header)
	return k, k.ctx != nil
}

// openExperts sets the engine's experts route and makes its kernels; a kernel MLX
// refuses leaves the experts on the dequant route.
func (e *Engine) openExperts(env string) {
	r := chooseExpertsRoute(e.device, env)
	for _, kind := range []expertsKind{r.forward, r.backward} {
		if kind == expertsOff || e.expertsKernels[kind].ctx != nil {
			continue
		}
		k, ok := newExpertsKernel(kind)
		if !ok {
			r = expertsRoute{}
			break
		}
		e.expertsKernels[kind] = k
	}
	e.experts = r
}

// fusesExperts reports whether the fused kernels take this gather: bfloat16 rows
// x3 [rows, 1, K] sorted by expert, 4-bit weights [E, N, K/8] in groups of 64 with
// bfloat16 scales, every width a multiple of the kernels' 64-wide tiles and, for a
// direction on the mma.sync kernel, its contraction (K forward, N backward) within that
// kernel's bound.
func (e *Engine) fusesExperts(x3, wq, s, rhs *array, p mx.QuantParams, sorted bool) bool {
	r := e.experts
	if r.forward == expertsOff || r.backward == expertsOff || !sorted || p.Bits != 4 || p.GroupSize != 64 {
		return false
	}
	if x3.dt != mx.BFloat16 || s.dt != mx.BFloat16 || len(x3.shape) != 3 || len(rhs.shape) != 1 || len(wq.shape) != 3 {
		return false
	}
	k, n, experts := x3.shape[2], wq.shape[1], wq.shape[0]
	if r.forward == expertsMMA && k > mmaExpertsMaxContraction || r.backward == expertsMMA && n > mmaExpertsMaxContraction {
		return false
	}
	return k%64 == 0 && n%64 == 0 && wq.shape[2]*8 == k && experts <= 65535
}
