package kernels

// DequantizeHeader is included before DequantizeSource: the affine map of one packed
// value as the go engine computes it — q·scale, then + bias, each rounded to float32,
// then rounded once to the output type. (MLX's CPU backend rounds bfloat16 after each
// operation; MLX-CUDA's affine_dequantize writes T's operators, which the compiler
// contracts into one FMA: for bfloat16 the go engine's single rounding of an exact
// product plus the bias agrees with that almost always, for float32 with neither.)
// __fmul_rn and __fadd_rn are never contracted. The CPU emulation
// (testdata/emu_prelude.h) defines the CUDA intrinsics these use.
const DequantizeHeader = `
__device__ __forceinline__ float dg_affine(uint32_t q, float s, float b) {
  return __fadd_rn(__fmul_rn(static_cast<float>(q), s), b);
}
__device__ __forceinline__ float dg_float(float v) { return v; }
__device__ __forceinline__ float dg_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ void dg_store(float v, float& out) { out = v; }
__device__ __forceinline__ void dg_store(float v, __nv_bfloat16& out) { out = __float2bfloat16_rn(v); }
`

// DequantizeSource is the dequantize kernel's body: out [..., K] of T from an MLX
// affine-quantized w (uint32 [..., K·BITS/32]) with scales and biases of T
// ([..., K/GS]). MLX declares w, w_shape, w_ndim, scales, biases and out, and the
// template constants T (bfloat16 or float32), BITS (4 or 8) and GS (32, 64 or 128).
// Launch: one thread per four packed words (16 bytes in, 128/BITS values out), in blocks
// of 256; the last axis holds a multiple of four words, so a thread's values lie in one
// row and, since 128/BITS ≤ 32 ≤ GS, in one group.
//
// MLX-CUDA v0.32.1's affine_dequantize gives each thread one byte and stores its values
// one by one: ~27 µs for the real 26B-A4B geometry's average dense weight on the H200
// (~0.6 TB/s), 16 launches a layer. Here each thread loads 16 bytes and stores 32 or 64.
const DequantizeSource = `
  constexpr int PER = 32 / BITS;  // values a word
  constexpr int NV = 4 * PER;     // values a thread
  constexpr uint32_t MASK = (1u << BITS) - 1;
  size_t words = 1;
  for (int i = 0; i < w_ndim; i++) words *= (size_t)w_shape[i];
  const size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (4 * t >= words) return;
  uint32_t q[4];
  if ((reinterpret_cast<size_t>(w) & 15) == 0) {
    const uint4 v = reinterpret_cast<const uint4*>(w)[t];
    q[0] = v.x; q[1] = v.y; q[2] = v.z; q[3] = v.w;
  } else {
    for (int i = 0; i < 4; i++) q[i] = w[4 * t + i];
  }
  const size_t e0 = 4 * t * PER;  // the thread's first value
  const float s = dg_float(scales[e0 / GS]), b = dg_float(biases[e0 / GS]);
  __align__(16) T v[NV];
  #pragma unroll
  for (int i = 0; i < 4; i++) {
    #pragma unroll
    for (int j = 0; j < PER; j++) dg_store(dg_affine((q[i] >> (BITS * j)) & MASK, s, b), v[i * PER + j]);
  }
  uint4* o = reinterpret_cast<uint4*>(out + e0);
  #pragma unroll
  for (int i = 0; i < (int)(NV * sizeof(T) / 16); i++) o[i] = reinterpret_cast<const uint4*>(v)[i];
`
