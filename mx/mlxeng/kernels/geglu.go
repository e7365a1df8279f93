package kernels

// GeGLUHeader is included after LoRAHeader (for dg_load8 and dg_store8) and before the
// GeGLU kernels: the activation gelu_tanh(gate)·up of 8 values, forward and backward.
//
// The forward is MLX's composition op for op — mlxeng's geluTanh, then the product with
// up — each operation rounded to bfloat16 as MLX-CUDA's bfloat16 kernels round it:
// sq = x·x, (sq·x)·a, x + that, times c, tanh, x·0.5, tanh + 1, the two multiplied, times
// up, with a = bf16(0.044715) and c = bf16(√(2/π)) rounded from float32 as the engine's
// scalars are. Each step runs in float32 on bfloat16 values and is rounded at once: a
// float32 product of two bfloat16 values is exact, and float32's 24 bits are more than
// twice bfloat16's 8 plus two, so rounding a float32 sum, quotient or root to bfloat16
// gives the correctly rounded bfloat16 result (double rounding is innocuous there);
// MLX's bfloat16 tanh is tanhf of the float, rounded. So the output is the composition's,
// bit for bit, in one pass over gate and up where MLX-CUDA's compiled step ran three
// fused kernels (the composition's intermediates are outputs its backward keeps).
//
// The backward is not the composition's autodiff (whose every step rounds to bfloat16)
// but the derivative in float32, rounded once, as the go engine computes it (goeng's
// gegluGradRows): with s = σ(2c·(x + a·x³)) = (1 + tanh(c·(x + a·x³)))/2,
// d gate = g·up·(s + x·s·(1 − s)·2c·(1 + 3a·x²)) and d up = g·x·s.
const GeGLUHeader = `
__device__ __forceinline__ float dg_round_bf16(float v) { return __bfloat162float(__float2bfloat16_rn(v)); }
// dg_geglu8: out = gelu_tanh(x)·u of 8 bfloat16 values held as floats, rounded as MLX's composition is.
__device__ __forceinline__ void dg_geglu8(const float (&x)[8], const float (&u)[8], float (&out)[8]) {
  const float a = dg_round_bf16(0.044715f), c = dg_round_bf16(0.7978845608028654f);
#pragma unroll
  for (int e = 0; e < 8; e++) {
    const float v = x[e];
    const float sq = dg_round_bf16(v * v);
    const float cube = dg_round_bf16(sq * v);
    const float ac = dg_round_bf16(cube * a);
    const float sum = dg_round_bf16(v + ac);
    const float inner = dg_round_bf16(sum * c);
    const float th = dg_round_bf16(tanhf(inner));
    const float half = dg_round_bf16(v * 0.5f);
    const float one = dg_round_bf16(th + 1.0f);
    const float gelu = dg_round_bf16(half * one);
    out[e] = dg_round_bf16(gelu * u[e]);
  }
}
// dg_geglu_grad8: d gate and d up of 8 values from x (gate), u (up) and the cotangent g, in float32.
__device__ __forceinline__ void dg_geglu_grad8(const float (&x)[8], const float (&u)[8], const float (&g)[8],
                                               float (&dgate)[8], float (&dup)[8]) {
  const float a = 0.044715f, c = 0.7978845608028654f;
#pragma unroll
  for (int e = 0; e < 8; e++) {
    const float v = x[e];
    const float z = -2.0f * c * (v + a * (v * v * v));
    // σ(−z): expf overflows to +inf past z ≈ 88, giving s = 0 as the limit.
    const float s = 1.0f / (1.0f + expf(z));
    const float q = 2.0f * c * (1.0f + 3.0f * a * (v * v));
    dgate[e] = g[e] * u[e] * (s + v * s * (1.0f - s) * q);
    dup[e] = g[e] * (v * s);
  }
}
`

// GeGLUForwardSource is out [..., I] = gelu_tanh(gate)·up (GeGLUHeader's dg_geglu8) for
// bfloat16 T. SPLIT: gate and up are the two halves of each row of a [..., 2I] (b is
// the same array, unused); else a is gate and b is up, both [..., I]. MLX declares a,
// a_shape, a_ndim, b and out, and the template constants T and SPLIT. I must be a
// multiple of 8: a thread takes 8 consecutive values of a row. Launch: blocks of 256,
// one thread for every 8 outputs.
const GeGLUForwardSource = `
  const int nd = a_ndim;
  const int I = SPLIT ? a_shape[nd - 1] / 2 : a_shape[nd - 1];
  size_t rows = 1;
  for (int i = 0; i + 1 < nd; i++) rows *= a_shape[i];
  const size_t at = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * 8;
  if (at >= rows * I) return;
  const size_t row = at / I, col = at % I;
  const T* gp = SPLIT ? a + row * 2 * I + col : a + at;
  const T* up = SPLIT ? gp + I : b + at;
  float x[8], u[8], o[8];
  dg_load8(gp, x);
  dg_load8(up, u);
  dg_geglu8(x, u, o);
  dg_store8(o, out + at);
`

// GeGLUBackwardSplitSource is the input gradient of GeGLUForwardSource with SPLIT: from
// x [..., 2I] and the cotangent g [..., I], dx [..., 2I] with d gate in each row's first
// half and d up in its second (GeGLUHeader's dg_geglu_grad8), for bfloat16 T. MLX
// declares x, x_shape, x_ndim, g and dx, and T. Launch as the forward: one thread for
// every 8 values of g.
const GeGLUBackwardSplitSource = `
  const int nd = x_ndim;
  const int I = x_shape[nd - 1] / 2;
  size_t rows = 1;
  for (int i = 0; i + 1 < nd; i++) rows *= x_shape[i];
  const size_t at = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * 8;
  if (at >= rows * I) return;
  const size_t row = at / I, col = at % I, base = row * 2 * I + col;
  float xv[8], uv[8], gv[8], dg[8], du[8];
  dg_load8(x + base, xv);
  dg_load8(x + base + I, uv);
  dg_load8(g + at, gv);
  dg_geglu_grad8(xv, uv, gv, dg, du);
  dg_store8(dg, dx + base);
  dg_store8(du, dx + base + I);
`

// GeGLUBackwardSource is the input gradient of GeGLUForwardSource without SPLIT: from
// gate, up and the cotangent g, all [..., I], d gate and d up (GeGLUHeader's
// dg_geglu_grad8), for bfloat16 T. MLX declares gate, gate_shape, gate_ndim, up, g, dgate
// and dup, and T. Launch as the forward.
const GeGLUBackwardSource = `
  size_t n = 1;
  for (int i = 0; i < gate_ndim; i++) n *= gate_shape[i];
  const size_t at = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * 8;
  if (at >= n) return;
  float xv[8], uv[8], gv[8], dg[8], du[8];
  dg_load8(gate + at, xv);
  dg_load8(up + at, uv);
  dg_load8(g + at, gv);
  dg_geglu_grad8(xv, uv, gv, dg, du);
  dg_store8(dg, dgate + at);
  dg_store8(du, dup + at);
`
