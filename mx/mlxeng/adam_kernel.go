//go:build mlx

package mlxeng

/*
#include <stdio.h>
#include <stdlib.h>
#include "mlx/c/mlx.h"

int mlxeng_kernel_run_n(mlx_array* res, int nres, mlx_fast_cuda_kernel k, mlx_fast_cuda_kernel_config cfg,
	const mlx_array* in, int n, mlx_stream s);

// mlxeng_adam_run launches the multi-tensor AdamW kernel k on in (lr, then n parameters,
// n gradients, n first and n second moments) with the template constants DECAY and WD,
// B1, OMB1, B2, OMB2, EPS = consts, writing res[0..3n): the new parameters, first and
// second moments, each in its parameter's shape (ndims[i] axes at shapes + 8·i). The
// kernel reads the sizes from the parameters' shapes.
int mlxeng_adam_run(mlx_array* res, mlx_fast_cuda_kernel k, const mlx_array* in, const int* shapes, const int* ndims,
		int n, int decay, const int* consts, mlx_stream s) {
	static const char* names[6] = {"WD", "B1", "OMB1", "B2", "OMB2", "EPS"};
	mlx_fast_cuda_kernel_config cfg = mlx_fast_cuda_kernel_config_new();
	long total = 0;
	int rc = 0;
	for (int j = 0; rc == 0 && j < 3 * n; j++) {
		rc = mlx_fast_cuda_kernel_config_add_output_arg(cfg, shapes + 8 * (j % n), ndims[j % n], MLX_FLOAT32);
	}
	for (int i = 0; i < n; i++) {
		long size = 1;
		for (int d = 0; d < ndims[i]; d++) {
			size *= shapes[8 * i + d];
		}
		total += size;
	}
	rc = rc || mlx_fast_cuda_kernel_config_add_template_arg_bool(cfg, "DECAY", decay != 0);
	for (int c = 0; rc == 0 && c < 6; c++) {
		rc = mlx_fast_cuda_kernel_config_add_template_arg_int(cfg, names[c], consts[c]);
	}
	rc = rc || mlx_fast_cuda_kernel_config_set_grid(cfg, (int)((total + 255) / 256 * 256), 1, 1) ||
		mlx_fast_cuda_kernel_config_set_thread_group(cfg, 256, 1, 1) ||
		mlxeng_kernel_run_n(res, 3 * n, k, cfg, in, 1 + 4 * n, s);
	mlx_fast_cuda_kernel_config_free(cfg);
	return rc;
}
*/
import "C"

import (
	"fmt"
	"math"
	"sync"

	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/internal/dims"
	"github.com/dgtune/dgtune/mx/mlxeng/kernels"
)

// The multi-tensor AdamW kernel on MLX-CUDA (MLXENG_ADAM=kernel turns it on; off by
// default). The compiled update (adam.go) fuses each parameter's chain into one kernel
// but still launches once a tensor: 20 launches of 5–8 µs in a real 26B-A4B layer's
// backward, ~600 a step, each with the host's launch cost. kernels.AdamSource updates up
// to adamKernelGroup tensors in one launch, rounding each operation on its own, so it
// gives the uncompiled composition's bits (bit for bit on the H200). Its first version
// made the real step slower, 157.9 ms against 148.0 (means of three alternating runs),
// and doubled the warm-up (bench/results/gpu-s15.txt): the tensors' sizes were template
// constants, one more NVRTC compilation for every distinct group in every process, and
// its flat outputs were reshaped op by op, ~1,300 more ops in the step's graph. Now the
// kernel reads the sizes from the parameters' shapes (one compilation for each group
// size) and writes each output in its parameter's shape; not yet measured on a GPU.

// adamKernelEnv turns the kernel on ("kernel").
const adamKernelEnv = "MLXENG_ADAM"

// adamKernelGroup bounds the tensors of one launch: its parameter list (1 + 7n pointers)
// and one compiled kernel for each group's sizes.
const adamKernelGroup = 16

// adamKernelCache holds the kernel's switch and its compiled forms, one for each group
// size.
type adamKernelCache struct {
	on  bool
	mu  sync.Mutex
	byN map[int]C.mlx_fast_cuda_kernel
}

// adamKernelOn reports whether the engine on device updates through the kernel with the
// environment's setting env.
func adamKernelOn(device, env string) bool { return isCUDA(device) && env == "kernel" }

// adamKernelTakes reports whether the kernel takes this update: every tensor of 1 to 8
// axes (the kernel reads its size from its shape, which MLX passes for arrays with axes)
// and 1 to 2³¹−1 elements, their total below 2³¹, and constants that are not negative (a
// kernel's name holds its constants' bits).
func adamKernelTakes(ps []*array, c mx.AdamConstants) bool {
	total := 0
	for _, p := range ps {
		n := dims.Numel(p.shape)
		if len(p.shape) < 1 || len(p.shape) > 8 || n < 1 || n >= 1<<31 {
			return false
		}
		total += n
	}
	if total >= 1<<31 {
		return false
	}
	for _, v := range []float32{c.WeightDecay, c.B1, c.OneMinusB1, c.B2, c.OneMinusB2, c.Eps} {
		if !(v >= 0) || math.Signbit(float64(v)) {
			return false
		}
	}
	return true
}

// adamKernel returns the compiled-on-first-use kernel for groups of n tensors.
func (e *Engine) adamKernel(n int) C.mlx_fast_cuda_kernel {
	a := &e.adamKernels
	a.mu.Lock()
	defer a.mu.Unlock()
	if k, ok := a.byN[n]; ok {
		return k
	}
	if a.byN == nil {
		a.byN = map[int]C.mlx_fast_cuda_kernel{}
	}
	k := newCUDAKernel(fmt.Sprintf("dgtune_adam_%d", n), kernels.AdamInputs(n), kernels.AdamOutputs(n),
		kernels.AdamSource(n), kernels.AdamHeader)
	a.byN[n] = k
	return k
}

// adamStepKernel is AdamStepAll through the kernel, adamKernelGroup tensors a launch.
func (e *Engine) adamStepKernel(ps, gs, ms, vs []*array, c mx.AdamConstants) (newP, newM, newV []mx.Handle) {
	lr := e.scalar(float64(c.LR), mx.Float32)
	defer e.free(lr)
	decay := 0
	if c.HasDecay {
		decay = 1
	}
	var consts [6]C.int
	for i, v := range []float32{c.WeightDecay, c.B1, c.OneMinusB1, c.B2, c.OneMinusB2, c.Eps} {
		consts[i] = C.int(int32(math.Float32bits(v)))
	}
	n := len(ps)
	newP, newM, newV = make([]mx.Handle, n), make([]mx.Handle, n), make([]mx.Handle, n)
	for lo := 0; lo < n; lo += adamKernelGroup {
		hi := min(lo+adamKernelGroup, n)
		g := hi - lo
		k := e.adamKernel(g)
		in := make([]C.mlx_array, 0, 1+4*g)
		in = append(in, lr.c)
		for _, group := range [][]*array{ps, gs, ms, vs} {
			for i := lo; i < hi; i++ {
				in = append(in, group[i].c)
			}
		}
		shapes, ndims := make([]C.int, 8*g), make([]C.int, g)
		for i := range g {
			sh := ps[lo+i].shape
			ndims[i] = C.int(len(sh))
			for d, v := range sh {
				shapes[8*i+d] = C.int(v)
			}
		}
		out := make([]C.mlx_array, 3*g)
		if err := e.try("adam_step_all", func() C.int {
			return C.mlxeng_adam_run(&out[0], k, &in[0], &shapes[0], &ndims[0], C.int(g), C.int(decay), &consts[0], e.stream)
		}); err != nil {
			for _, o := range out {
				if o.ctx != nil {
					C.mlx_array_free(o)
				}
			}
			panic(err)
		}
		for j, o := range out {
			switch t := lo + j%g; j / g {
			case 0:
				newP[t] = e.wrap(o)
			case 1:
				newM[t] = e.wrap(o)
			default:
				newV[t] = e.wrap(o)
			}
		}
	}
	return newP, newM, newV
}
