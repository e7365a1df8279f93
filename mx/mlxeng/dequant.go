//go:build mlx

package mlxeng

/*
#include <stdlib.h>
#include "mlx/c/mlx.h"

// mlxeng_dq is what a dequantizing linear's closures need: the quantization, whether
// the forward keeps MLX's quantized kernel, and the stream.
typedef struct {
	int gs, bits;
	int gather;        // 1: x [rows, 1, K] by rhs-indexed experts (gather_mm), 0: x·Wᵀ
	int sorted;        // gather: rows come grouped by expert
	int kernel_fwd;    // linear: the forward stays quantized_matmul (bf16/f16 activations)
	int fused;         // gather: both products through the fused experts kernels (experts.go)
	mlx_fast_cuda_kernel experts, experts_bwd;  // the forward's kernel and the input gradient's
	int deq_ok;        // dequantize with the engine's kernel where it takes the weight (dequant_kernel.go)
	mlx_fast_cuda_kernel deq;
	int keep_weight;   // linear, dequantized forward: the weight is a second output the VJP reuses
	                   // (forwardKeep: the tied head; see chooseDenseForward)
	mlx_stream s;
} mlxeng_dq;

int mlxeng_experts_apply(mlx_array* res, mlx_fast_cuda_kernel k, const mlx_array x, const mlx_array w,
	const mlx_array scales, const mlx_array biases, const mlx_array idx, int trans, mlx_stream s);
int mlxeng_dequant_apply(mlx_array* res, mlx_fast_cuda_kernel k, const mlx_array w, const mlx_array scales,
	const mlx_array biases, int bits, int gs, mlx_stream s);
int mlxeng_dequant_takes(const mlx_array w, const mlx_array scales, mlx_dtype dt);
int mlxeng_custom_apply(mlx_array* res, const mlx_vector_array in,
	int (*fwd)(mlx_vector_array*, const mlx_vector_array, void*),
	int (*vjp)(mlx_vector_array*, const mlx_vector_array, const mlx_vector_array, const mlx_vector_array, void*),
	const void* payload, size_t size);

// mlxeng_dq_fused is the fused experts kernel on x (forward: trans 1) or the cotangent
// (input gradient: trans 0), with the weight, its quantization and the indices of in.
static int mlxeng_dq_fused(mlx_array* res, const mlx_array x, const mlx_vector_array in, const mlxeng_dq* q, int trans) {
	mlx_array w = mlx_array_new(), sc = mlx_array_new(), b = mlx_array_new(), rhs = mlx_array_new();
	int rc = mlx_vector_array_get(&w, in, 1) || mlx_vector_array_get(&sc, in, 2) ||
		mlx_vector_array_get(&b, in, 3) || mlx_vector_array_get(&rhs, in, 4) ||
		mlxeng_experts_apply(res, trans ? q->experts : q->experts_bwd, x, w, sc, b, rhs, trans, q->s);
	mlx_array_free(w);
	mlx_array_free(sc);
	mlx_array_free(b);
	mlx_array_free(rhs);
	return rc;
}

static int mlxeng_dq_weight(mlx_array* res, const mlx_vector_array in, const mlxeng_dq* q, mlx_dtype dt) {
	mlx_array w = mlx_array_new(), sc = mlx_array_new(), b = mlx_array_new(), none = {0};
	int rc = mlx_vector_array_get(&w, in, 1) || mlx_vector_array_get(&sc, in, 2) || mlx_vector_array_get(&b, in, 3);
	if (rc == 0 && q->deq_ok && mlxeng_dequant_takes(w, sc, dt)) {
		rc = mlxeng_dequant_apply(res, q->deq, w, sc, b, q->bits, q->gs, q->s);
	} else if (rc == 0) {
		mlx_optional_int gs = {q->gs, true}, bits = {q->bits, true};
		mlx_optional_dtype odt = {dt, true};
		rc = mlx_dequantize(res, w, sc, b, gs, bits, "affine", none, odt, q->s);
	}
	mlx_array_free(w);
	mlx_array_free(sc);
	mlx_array_free(b);
	return rc;
}

// mlxeng_dq_after: a dequantized weight is a transient as large as the weight in the
// activations' dtype (1.5 GB a layer for the real 26B-A4B's experts in bf16), made from
// frozen arrays only. Left so, MLX may evaluate it whenever it likes — every layer's
// before the first product, uncompiled — and mlx_compile merges the backward's
// dequantize with the forward's identical one, keeping every layer's forward copy alive
// until the backward: the real geometry's compiled peak was 62 GiB against 21
// uncompiled. So each dequantize reads its weight through mlx_depends on the array the
// product waits for anyway (x forward, the cotangent backward): it is made just before
// its product, and the two are different nodes.

// mlxeng_dq_forward: inputs [x, w, scales, biases(, rhs)] → [y].
static int mlxeng_dq_forward(mlx_vector_array* res, const mlx_vector_array in, void* payload) {
	const mlxeng_dq* q = (const mlxeng_dq*)payload;
	mlx_array x = mlx_array_new(), wd = mlx_array_new(), wt = mlx_array_new(), y = mlx_array_new();
	mlx_array rhs = mlx_array_new(), none = {0};
	int rc = mlx_vector_array_get(&x, in, 0);
	if (rc == 0 && q->fused) {
		rc = mlxeng_dq_fused(&y, x, in, q, 1);
	} else if (rc == 0 && !q->gather && q->kernel_fwd) {
		mlx_array w = mlx_array_new(), sc = mlx_array_new(), b = mlx_array_new();
		rc = mlx_vector_array_get(&w, in, 1) || mlx_vector_array_get(&sc, in, 2) || mlx_vector_array_get(&b, in, 3);
		mlx_optional_int gs = {q->gs, true}, bits = {q->bits, true};
		if (rc == 0) {
			rc = mlx_quantized_matmul(&y, x, w, sc, b, true, gs, bits, "affine", q->s);
		}
		mlx_array_free(w);
		mlx_array_free(sc);
		mlx_array_free(b);
	} else if (rc == 0) {
		// The weight is dequantized once x exists (see mlxeng_dq_after).
		mlx_vector_array xs = mlx_vector_array_new_value(x), after = mlx_vector_array_new();
		rc = mlx_depends(&after, in, xs) || mlxeng_dq_weight(&wd, after, q, mlx_array_dtype(x)) ||
			mlx_swapaxes(&wt, wd, -1, -2, q->s);
		mlx_vector_array_free(xs);
		mlx_vector_array_free(after);
		if (rc == 0 && q->gather) {
			rc = mlx_vector_array_get(&rhs, in, 4) || mlx_gather_mm(&y, x, wt, none, rhs, q->sorted, q->s);
		} else if (rc == 0) {
			rc = mlx_matmul(&y, x, wt, q->s);
		}
	}
	if (rc == 0 && q->keep_weight && !q->gather && !q->fused && !q->kernel_fwd) {
		const mlx_array both[2] = {y, wd};
		rc = mlx_vector_array_set_data(res, both, 2);
	} else if (rc == 0) {
		rc = mlx_vector_array_set_data(res, &y, 1);
	}
	mlx_array_free(x);
	mlx_array_free(wd);
	mlx_array_free(wt);
	mlx_array_free(y);
	mlx_array_free(rhs);
	return rc;
}

// mlxeng_dq_vjp: the input gradient g·W through the dequantized weight and a float
// matmul (gather_mm for experts); the other inputs (the frozen weight, its quantization,
// the indices) get zeros, which nothing asks for.
static int mlxeng_dq_vjp(mlx_vector_array* res, const mlx_vector_array primals, const mlx_vector_array cots, const mlx_vector_array outs, void* payload) {
	const mlxeng_dq* q = (const mlxeng_dq*)payload;
	size_t n = mlx_vector_array_size(primals);
	mlx_array g = mlx_array_new(), wd = mlx_array_new(), dx = mlx_array_new(), rhs = mlx_array_new(), none = {0};
	int rc = mlx_vector_array_get(&g, cots, 0);
	if (rc == 0 && q->fused) {
		rc = mlxeng_dq_fused(&dx, g, primals, q, 0);
	} else if (rc == 0 && mlx_vector_array_size(outs) == 2) {
		// keep_weight: the forward's dequantized weight is its second output.
		rc = mlx_vector_array_get(&wd, outs, 1) || mlx_matmul(&dx, g, wd, q->s);
	} else if (rc == 0) {
		// The weight is dequantized once the cotangent exists (see mlxeng_dq_after).
		mlx_vector_array after = mlx_vector_array_new();
		rc = mlx_depends(&after, primals, cots) || mlxeng_dq_weight(&wd, after, q, mlx_array_dtype(g));
		mlx_vector_array_free(after);
		if (rc == 0 && q->gather) {
			rc = mlx_vector_array_get(&rhs, primals, 4) || mlx_gather_mm(&dx, g, wd, none, rhs, q->sorted, q->s);
		} else if (rc == 0) {
			rc = mlx_matmul(&dx, g, wd, q->s);
		}
	}
	// res arrives without storage (mlx-c's closure makes it empty): set it in one go.
	mlx_array grads[8];
	size_t made = 0;
	if (rc == 0 && n <= 8) {
		grads[made++] = dx;
		for (size_t i = 1; rc == 0 && i < n; i++) {
			mlx_array p = mlx_array_new();
			grads[made] = mlx_array_new();
			rc = mlx_vector_array_get(&p, primals, i) || mlx_zeros_like(&grads[made], p, q->s);
			made++;
			mlx_array_free(p);
		}
		if (rc == 0) {
			rc = mlx_vector_array_set_data(res, grads, n);
		}
	} else if (rc == 0) {
		rc = 1;
	}
	for (size_t i = 1; i < made; i++) {
		mlx_array_free(grads[i]);
	}
	mlx_array_free(g);
	mlx_array_free(wd);
	mlx_array_free(dx);
	mlx_array_free(rhs);
	return rc;
}

// mlxeng_dq_apply applies the custom-VJP function to inputs, writing its one output.
static int mlxeng_dq_apply(mlx_array* res, const mlx_vector_array in, mlxeng_dq q) {
	return mlxeng_custom_apply(res, in, mlxeng_dq_forward, mlxeng_dq_vjp, &q, sizeof q);
}
*/
import "C"

import (
	"math"
	"os"

	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/internal/dims"
)

// Quantized products on MLX's CUDA backend. Its fast quantized kernels (qmm_sm90,
// qmm_sm80) need transpose=true and bf16/f16 activations, so the input gradient g·W of
// every frozen quantized linear (transpose=false) and every float32 product run in the
// naive kernel, and gather_qmm runs each of its rows as its own one-row problem. The
// engine therefore differentiates quantized linears itself on CUDA: dx is g times the
// weight dequantized on the fly (a transient, freed once used), through cuBLAS or
// gather_mm's grouped GEMM; experts' forward products take the same route. Metal and
// the CPU keep MLX's quantized kernels and MLX's own VJP.

// quantizedRoute is how the engine computes quantized products.
type quantizedRoute int

const (
	routeKernel  quantizedRoute = iota // MLX's quantized kernels and VJPs
	routeDequant                       // dequantize on the fly for the products that lack a fast kernel
)

// quantizedRouteEnv overrides the default route ("kernel" or "dequant"), for measuring
// one against the other.
const quantizedRouteEnv = "MLXENG_QUANTIZED"

// chooseQuantizedRoute is dequant on CUDA (a GPU not on macOS), kernel elsewhere, unless
// the environment names one.
func chooseQuantizedRoute(device string) quantizedRoute {
	switch os.Getenv(quantizedRouteEnv) {
	case "kernel":
		return routeKernel
	case "dequant":
		return routeDequant
	}
	if isCUDA(device) {
		return routeDequant
	}
	return routeKernel
}

// dequantLinear is x·Wᵀ for a packed W [N, K] on the dequant route.
func (e *Engine) dequantLinear(x, wq, s, b *array, p mx.QuantParams) *array {
	mode := chooseDenseForward(x, wq, p, e.denseForward)
	q := C.mlxeng_dq{gs: C.int(p.GroupSize), bits: C.int(p.Bits), kernel_fwd: cbool(mode == forwardKernel), keep_weight: cbool(mode == forwardKeep), s: e.stream}
	q.deq_ok, q.deq = cbool(e.fastDequant && dequantKernelParams(p)), e.dequantKernel
	in := vector([]mx.Handle{x, wq, s, b})
	defer C.mlx_vector_array_free(in)
	return e.op("quantized_matmul", func(res *C.mlx_array) C.int { return C.mlxeng_dq_apply(res, in, q) })
}

// dequantGather is gather_qmm(x3 [rows, 1, K], W [E, N, K] packed, rhs [rows]) with
// transpose on the dequant route: [rows, 1, N].
func (e *Engine) dequantGather(x3, wq, s, b, rhs *array, p mx.QuantParams, sorted bool) *array {
	q := C.mlxeng_dq{gs: C.int(p.GroupSize), bits: C.int(p.Bits), gather: 1, sorted: cbool(sorted), s: e.stream}
	q.deq_ok, q.deq = cbool(e.fastDequant && dequantKernelParams(p)), e.dequantKernel
	if e.fusesExperts(x3, wq, s, rhs, p, sorted) {
		q.fused, q.experts, q.experts_bwd = 1, e.expertsKernels[e.experts.forward], e.expertsKernels[e.experts.backward]
	}
	in := vector([]mx.Handle{x3, wq, s, b, rhs})
	defer C.mlx_vector_array_free(in)
	return e.op("gather_qmm", func(res *C.mlx_array) C.int { return C.mlxeng_dq_apply(res, in, q) })
}

// denseForwardMode is how a dense product on the dequant route runs its forward.
type denseForwardMode int

const (
	// forwardDequant: the weight is dequantized and multiplied by cuBLAS, as the input
	// gradient does again: on the H200 the real geometry's dense products took 43–182 µs
	// each in qmm_sm80 at 384 rows, against 3–42 µs of dequantize and 5–20 µs of GEMM
	// for the same shapes' input gradients (bench/results/gpu-lease5.txt). Keeping each
	// layer's dequantized weights for its backward instead (session 17's
	// MLXENG_KEEP_DENSE) cost 2.8 GiB and was not faster.
	forwardDequant denseForwardMode = iota
	// forwardKernel: MLX's quantized_matmul, for few bf16/f16 rows (decoding: the kernel
	// reads the packed weight once).
	forwardKernel
	// forwardKeep: dequantized as forwardDequant, and the dequantized weight is a second
	// output of the op that its input gradient multiplies by instead of dequantizing
	// again. For weights above the bound — the tied 262,144-row head, 1.5 GB in bf16 —
	// whose dequantize (~1.4 ms on the H200) the backward needs anyway: the forward was
	// qmm_sm80, 2.6 ms for the real geometry's canvas rows (ncu, session 18), where a
	// GEMM on the dequantized weight takes a fraction of that. The weight lives from the
	// forward's head to the backward's, which comes first in the backward, so the peak
	// grows by at most its size.
	forwardKeep
)

// denseForwardPolicy is chooseDenseForward's setting: the weight bound above which a
// forward keeps its dequantized weight (or, with largeKernel, stays on MLX's kernel).
type denseForwardPolicy struct {
	maxWeight   int
	largeKernel bool
}

// chooseDenseForward is the forward of x·Wᵀ on the dequant route: MLX's kernel for
// bf16/f16 rows that are few; for a weight above the policy's bound, dequantized and kept
// (or MLX's kernel, with largeKernel); otherwise dequantized. Float32 rows (MLX's fast
// kernels want half precision) and weights whose rows are one quantization group are
// always dequantized, never kept.
func chooseDenseForward(x, wq *array, p mx.QuantParams, pol denseForwardPolicy) denseForwardMode {
	if x.dt != mx.BFloat16 && x.dt != mx.Float16 {
		return forwardDequant
	}
	if oneGroupRows(wq, p) {
		return forwardDequant
	}
	n, k := wq.shape[0], wq.shape[1]*32/p.Bits
	rows := dims.Numel(x.shape[:len(x.shape)-1])
	switch {
	case rows < dequantForwardMinRows:
		return forwardKernel
	case n*k <= pol.maxWeight:
		return forwardDequant
	case pol.largeKernel:
		return forwardKernel
	}
	return forwardKeep
}

// oneGroupRows: each row of the packed weight is one quantization group (K ≤ group
// size). MLX-CUDA v0.32.1 multiplies such weights on Hopper with its qmm_sm90 kernel,
// which on the H200 gave wrong values (and left later kernels wrong or hanging) for
// both such shapes tried, N = 8 and 24 with K = 64, partial tiles of it
// (TestQuantizedKernelsMatchDequantized). Only small models have such rows (the tiny
// preset's hidden size is 64; its router has N = 4), and dequantizing K ≤ 128 columns
// costs nothing, so the engine never gives them to MLX's kernel on CUDA.
func oneGroupRows(wq *array, p mx.QuantParams) bool {
	return wq.shape[len(wq.shape)-1]*32/p.Bits <= p.GroupSize
}

// Bounds of the dense forward's modes (chooseDenseForward).
const (
	dequantForwardMinRows   = 64
	dequantForwardMaxWeight = 1 << 26 // elements: ~23.1M for the real geometry's largest decoder linear, 738M for its head
)

// denseForwardEnv sets the policy for measuring it: "dequant" dequantizes every dense
// forward of 64 rows or more, the head's too, and keeps none; "kernel" keeps every
// bf16/f16 dense forward on MLX's quantized kernel (one launch a product instead of a
// dequantize and a GEMM); "large-kernel" keeps only the weights above the bound — the
// head — on MLX's kernel (the default before session 18). Anything else is the default.
const denseForwardEnv = "MLXENG_DENSE_FORWARD"

// chooseDenseForwardPolicy is the default policy, or the environment's.
func chooseDenseForwardPolicy() denseForwardPolicy {
	switch os.Getenv(denseForwardEnv) {
	case "dequant":
		return denseForwardPolicy{maxWeight: math.MaxInt}
	case "kernel":
		return denseForwardPolicy{maxWeight: 0, largeKernel: true}
	case "large-kernel":
		return denseForwardPolicy{maxWeight: dequantForwardMaxWeight, largeKernel: true}
	}
	return denseForwardPolicy{maxWeight: dequantForwardMaxWeight}
}

func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}
