package kernels

import (
	"fmt"
	"strings"
)

// AdamHeader is included before an AdamSource kernel: one element's AdamW update, each
// operation rounded to float32 on its own (__fmul_rn and the others are never contracted
// into fused multiply-adds), in the order of mx.AdamCompose — MLX's apply_single op by op:
//
//	p ← p·(1 − lr·wd)            (with weight decay)
//	m ← m·β1 + g·(1−β1)
//	v ← v·β2 + (g·g)·(1−β2)
//	p ← p − (lr·m) / (√v + ε)
//
// so the kernel gives the uncompiled composition's bits (MLX-CUDA's compiled update may
// contract a product and a sum into one FMA). The constants are template constants, the
// bits of float32 values that are never negative (a kernel's name holds its constants).
const AdamHeader = `
template <bool DECAY, int WD, int B1, int OMB1, int B2, int OMB2, int EPS>
__device__ __forceinline__ void dg_adam(const float* p, const float* g, const float* m, const float* v,
                                        float* op, float* om, float* ov, size_t j, float lr) {
  float pj = p[j];
  if (DECAY) pj = __fmul_rn(pj, __fsub_rn(1.0f, __fmul_rn(lr, __int_as_float(WD))));
  const float gj = g[j];
  const float mj = __fadd_rn(__fmul_rn(m[j], __int_as_float(B1)), __fmul_rn(gj, __int_as_float(OMB1)));
  const float vj = __fadd_rn(__fmul_rn(v[j], __int_as_float(B2)), __fmul_rn(__fmul_rn(gj, gj), __int_as_float(OMB2)));
  const float step = __fdiv_rn(__fmul_rn(lr, mj), __fadd_rn(__fsqrt_rn(vj), __int_as_float(EPS)));
  op[j] = __fsub_rn(pj, step);
  om[j] = mj;
  ov[j] = vj;
}
`

// AdamInputs and AdamOutputs name an AdamSource kernel's arrays for n tensors: the
// learning rate (a float32 scalar) and each tensor's parameter, gradient and moments;
// each tensor's new parameter and moments.
func AdamInputs(n int) []string {
	names := []string{"lr"}
	for _, k := range []string{"p", "g", "m", "v"} {
		for i := range n {
			names = append(names, fmt.Sprintf("%s%d", k, i))
		}
	}
	return names
}

// AdamOutputs: see AdamInputs.
func AdamOutputs(n int) []string {
	var names []string
	for _, k := range []string{"op", "om", "ov"} {
		for i := range n {
			names = append(names, fmt.Sprintf("%s%d", k, i))
		}
	}
	return names
}

// AdamSource is a multi-tensor AdamW update of n float32 tensors in one launch (MLX-CUDA's
// compiled update fuses each tensor's chain but still launches once a tensor: ~20 launches
// a real-geometry layer). Thread i updates element i of the tensors laid end to end, each
// tensor's size read from its parameter's shape (MLX declares p0_shape, p0_ndim, …), so
// one compiled kernel serves every group of n tensors; the template constants are
// AdamHeader's DECAY, WD, B1, OMB1, B2, OMB2 and EPS. Every parameter has at least one
// axis. Launch: grid (the total size rounded up to the block, 1, 1) in blocks of 256.
//
// A first version took the sizes as template constants: each group's sizes made one more
// NVRTC compilation in every process (the real step's warm-up doubled), and its flat
// outputs, reshaped op by op, added ~1,300 ops to the step's graph; with both the real
// step ran 157.9 ms against 148.0 (bench/results/gpu-s15.txt).
func AdamSource(n int) string {
	var b strings.Builder
	b.WriteString("  const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;\n")
	b.WriteString("  const float rate = lr[0];\n")
	b.WriteString("  size_t end = 0, size;\n")
	for t := range n {
		fmt.Fprintf(&b, "  size = 1;\n  for (int d = 0; d < p%[1]d_ndim; d++) size *= (size_t)p%[1]d_shape[d];\n", t)
		b.WriteString("  if (i < (end += size)) {\n")
		fmt.Fprintf(&b, "    dg_adam<DECAY, WD, B1, OMB1, B2, OMB2, EPS>(p%[1]d, g%[1]d, m%[1]d, v%[1]d, op%[1]d, om%[1]d, ov%[1]d, i - (end - size), rate);\n", t)
		b.WriteString("    return;\n  }\n")
	}
	return b.String()
}
