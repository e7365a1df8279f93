package kernels

// The LoRA kernels compute a low-rank adapter's term on a base linear's output for
// bfloat16 activations and float32 factors — out = base + bf16(α·((x·a)·b)) — and its
// gradients, in three launches where MLX-CUDA's ops take ~14 (two casts, four to six
// cuBLAS products with their split-K reductions, a scale, a cast and an add forward;
// a cast, a scale, four products, their reductions and a cast backward). The work is
// small (rank r ≤ 32), so what the fused kernels save is the launches and the host's
// per-product cuBLASLt set-up, which pace the real 26B-A4B geometry's step on the H200.
//
// Arrays: x [N, K] and base, out, g [N, M] of the activations' type; a [K, R] and b
// [R, M] float32 (the adapter's factors); α is given by the template constants ALPHA, the
// bits of |α| as a float32, and NEG, its sign. Every sum is float32 with fused multiply-adds; the products' orders differ from
// cuBLAS's, so the values match MLX's composition to float32 rounding, not bit for bit.

// LoRAHeader is included before the LoRA kernels: conversions, a warp's all-reduce and a
// row's product with a. The CPU emulation (testdata/emu_prelude.h) defines the CUDA
// intrinsics these use.
const LoRAHeader = conversions + `
// dg_round is v rounded to T and back: the cast MLX's composition makes of α·(x·a)·b.
__device__ __forceinline__ float dg_round(float v, float*) { return v; }
__device__ __forceinline__ float dg_round(float v, __nv_bfloat16*) { return __bfloat162float(__float2bfloat16_rn(v)); }
// dg_alpha is α from the template constants: ALPHA the bits of |α| as a float32, NEG its
// sign (MLX names a kernel after its constants, and a name cannot hold a minus sign).
template <int ALPHA, bool NEG>
__device__ __forceinline__ float dg_alpha() { return NEG ? -__int_as_float(ALPHA) : __int_as_float(ALPHA); }
// dg_warp_sum leaves every lane of a warp with the sums of v over the warp. The butterfly
// adds the same two operands in both lanes of each pair, so every lane ends with the same
// bits.
template <int R>
__device__ __forceinline__ void dg_warp_sum(float (&v)[R]) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
#pragma unroll
    for (int k = 0; k < R; k++) v[k] += __shfl_xor_sync(0xffffffffu, v[k], o);
  }
}
// dg_row_times_a sets t = x_row·a (x_row [K], a [K, R]) in every lane of the warp.
template <int R, int K, typename T>
__device__ __forceinline__ void dg_row_times_a(const T* x_row, const float* a, int lane, float (&t)[R]) {
#pragma unroll
  for (int k = 0; k < R; k++) t[k] = 0.0f;
  for (int i = lane; i < K; i += 32) {
    const float xi = dg_float(x_row[i]);
#pragma unroll
    for (int k = 0; k < R; k++) t[k] = fmaf(xi, a[i * R + k], t[k]);
  }
  dg_warp_sum<R>(t);
}
`

// LoRAForwardSource is out = base + cast(α·((x·a)·b)), the cast to out's type and the add
// rounded as MLX's composition rounds them (the scaled term to T, then the sum to T). A
// warp per row: t = x[n]·a summed across the warp, then each lane's columns of t·b. MLX
// declares base, x, x_shape, a, b and out; template constants R, K, M, ALPHA, NEG. Launch:
// grid (⌈N/4⌉·128, 1, 1) in blocks of 128 (4 rows a block).
const LoRAForwardSource = `
  const int N = x_shape[0];
  const int lane = threadIdx.x & 31;
  const size_t n = (size_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  if (n >= (size_t)N) return;  // a whole warp at once
  float t[R];
  dg_row_times_a<R, K>(x + n * K, a, lane, t);
  const float alpha = dg_alpha<ALPHA, NEG>();
  for (int j = lane; j < M; j += 32) {
    float y = 0.0f;
#pragma unroll
    for (int k = 0; k < R; k++) y = fmaf(t[k], b[k * M + j], y);
    const float term = dg_round(__fmul_rn(y, alpha), out);
    dg_store(__fadd_rn(dg_float(base[n * M + j]), term), out[n * M + j]);
  }
`

// LoRARowsBackwardSource is the backward's part by rows, for the cotangent g of out:
// u = (α·g)·bᵀ [N, R] (α·g rounded to float32 first, as MLX's scale of the cotangent),
// dx = u·aᵀ [N, K] in x's type, and ut [N, 2R] = (x·a, u) for LoRAColumnsBackwardSource.
// A warp per row, as the forward. MLX declares x, x_shape, g, a, b, dx and ut; template
// constants R, K, M, ALPHA, NEG. Launch as LoRAForwardSource.
const LoRARowsBackwardSource = `
  const int N = x_shape[0];
  const int lane = threadIdx.x & 31;
  const size_t n = (size_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  if (n >= (size_t)N) return;
  float t[R], u[R];
  dg_row_times_a<R, K>(x + n * K, a, lane, t);
  const float alpha = dg_alpha<ALPHA, NEG>();
#pragma unroll
  for (int k = 0; k < R; k++) u[k] = 0.0f;
  for (int j = lane; j < M; j += 32) {
    const float gj = __fmul_rn(alpha, dg_float(g[n * M + j]));
#pragma unroll
    for (int k = 0; k < R; k++) u[k] = fmaf(gj, b[k * M + j], u[k]);
  }
  dg_warp_sum<R>(u);
  if (lane == 0) {
#pragma unroll
    for (int k = 0; k < R; k++) {
      ut[n * 2 * R + k] = t[k];
      ut[n * 2 * R + R + k] = u[k];
    }
  }
  for (int i = lane; i < K; i += 32) {
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < R; k++) s = fmaf(u[k], a[i * R + k], s);
    dg_store(s, dx[n * K + i]);
  }
`

// LoRAColumnsBackwardSource is the backward's part by columns, sums over the N rows:
// da = xᵀ·u [K, R] and db = tᵀ·(α·g) [R, M], with t and u from ut. A block of 8 warps
// per 32 columns: the first ⌈K/32⌉ blocks da's rows, the rest db's columns. Each lane
// sums its column over rows w, w+8, … (w its warp), and the 8 warps' sums are added in
// warp order, so the result does not depend on timing. MLX declares x, x_shape, g, ut,
// da and db; template constants R, K, M, ALPHA, NEG. Launch: grid ((⌈K/32⌉ + ⌈M/32⌉)·256, 1,
// 1) in blocks of 256.
const LoRAColumnsBackwardSource = `
  constexpr int W = 8;  // warps a block
  const int N = x_shape[0];
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  constexpr int KB = (K + 31) / 32;
  const bool forA = blockIdx.x < KB;
  const int first = (forA ? blockIdx.x : blockIdx.x - KB) * 32;
  const int width = forA ? K : M;
  const int col = first + lane;
  const float alpha = dg_alpha<ALPHA, NEG>();
  float acc[R];
#pragma unroll
  for (int k = 0; k < R; k++) acc[k] = 0.0f;
  if (col < width) {
    for (int n = w; n < N; n += W) {
      // da takes x's column and u (ut's second half); db takes α·g's column and t
      const float v = forA ? dg_float(x[(size_t)n * K + col]) : __fmul_rn(alpha, dg_float(g[(size_t)n * M + col]));
      const float* f = ut + (size_t)n * 2 * R + (forA ? R : 0);
#pragma unroll
      for (int k = 0; k < R; k++) acc[k] = fmaf(v, f[k], acc[k]);
    }
  }
  __shared__ float part[W][32][R + 1];
#pragma unroll
  for (int k = 0; k < R; k++) part[w][lane][k] = acc[k];
  __syncthreads();
  for (int o = threadIdx.x; o < 32 * R; o += blockDim.x) {
    // da [K, R] is written row by row, db [R, M] along its rows' columns
    const int c = forA ? o / R : o % 32, k = forA ? o % R : o / 32;
    float s = 0.0f;
    for (int q = 0; q < W; q++) s += part[q][c][k];
    if (first + c < width) {
      if (forA) {
        da[(size_t)(first + c) * R + k] = s;
      } else {
        db[(size_t)k * M + first + c] = s;
      }
    }
  }
`
