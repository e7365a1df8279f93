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
// bits of |α| as a float32, and NEG, its sign. Every sum is float32 with fused
// multiply-adds; the products' orders differ from cuBLAS's, so the values match MLX's
// composition to float32 rounding, not bit for bit. A first version gave each row one
// warp: 60–125 µs a launch at the real geometry (384 rows, ~3 warps an SM, each walking
// K and M alone); a block of W warps on ROWS rows spreads that walk over the block.

// LoRAHeader is included before the LoRA kernels: conversions, a warp's and a block's
// all-reduce and the block's rows' products with a. The CPU emulation (testdata/emu_prelude.h) defines the CUDA
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
template <int V>
__device__ __forceinline__ void dg_warp_sum(float (&v)[V]) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
#pragma unroll
    for (int c = 0; c < V; c++) v[c] += __shfl_xor_sync(0xffffffffu, v[c], o);
  }
}
// dg_block_sum sets tot[c] to the sum of v[c] over the block's W warps (each warp's sum,
// then the warps' in order), visible to every thread when it returns; red holds W·V
// floats of shared memory. Every thread of the block must call it.
template <int V, int W>
__device__ __forceinline__ void dg_block_sum(float (&v)[V], float* red, float* tot) {
  dg_warp_sum<V>(v);
  if ((threadIdx.x & 31) == 0) {
#pragma unroll
    for (int c = 0; c < V; c++) red[(threadIdx.x >> 5) * V + c] = v[c];
  }
  __syncthreads();
  for (int c = threadIdx.x; c < V; c += blockDim.x) {
    float s = 0.0f;
    for (int q = 0; q < W; q++) s += red[q * V + c];
    tot[c] = s;
  }
  __syncthreads();
}
// dg_rows_times_a sets t[r·R + k] to x[n0 + r]·a[:, k] for the block's rows r < rows
// (x [N, K], a [K, R]; ROWS·R floats of shared memory), the block's threads striding K.
template <int R, int ROWS, int W, typename T>
__device__ __forceinline__ void dg_rows_times_a(const T* x, const float* a, size_t n0, int rows, int K, float* red, float* t) {
  float acc[ROWS * R];
#pragma unroll
  for (int c = 0; c < ROWS * R; c++) acc[c] = 0.0f;
  for (int i = threadIdx.x; i < K; i += W * 32) {
    float av[R];
#pragma unroll
    for (int k = 0; k < R; k++) av[k] = a[(size_t)i * R + k];
#pragma unroll
    for (int r = 0; r < ROWS; r++) {
      if (r < rows) {
        const float xi = dg_float(x[(n0 + r) * K + i]);
#pragma unroll
        for (int k = 0; k < R; k++) acc[r * R + k] = fmaf(xi, av[k], acc[r * R + k]);
      }
    }
  }
  dg_block_sum<ROWS * R, W>(acc, red, t);
}
`

// LoRAForwardSource is out = base + cast(α·((x·a)·b)), the cast to out's type and the add
// rounded as MLX's composition rounds them (the scaled term to T, then the sum to T). A
// block of W warps takes ROWS rows: t = x[n]·a summed over the block, then each thread's
// columns of t·b. MLX declares base, x, x_shape, a, b, b_shape and out; template
// constants R, ROWS, W, ALPHA, NEG. Launch: grid (⌈N/ROWS⌉·32W, 1, 1) in blocks of 32W.
// K and M are read from the shapes, so one compiled kernel serves every linear of a rank
// (MLX compiles a custom kernel per process, once for each set of template constants).
const LoRAForwardSource = `
  const int N = x_shape[0], K = x_shape[1], M = b_shape[1];
  const size_t n0 = (size_t)blockIdx.x * ROWS;
  const int rows = min(ROWS, N - (int)n0);
  __shared__ float red[W * ROWS * R];
  __shared__ float t[ROWS * R];
  dg_rows_times_a<R, ROWS, W>(x, a, n0, rows, K, red, t);
  const float alpha = dg_alpha<ALPHA, NEG>();
  for (int j = threadIdx.x; j < M; j += W * 32) {
    float bv[R];
#pragma unroll
    for (int k = 0; k < R; k++) bv[k] = b[(size_t)k * M + j];
#pragma unroll
    for (int r = 0; r < ROWS; r++) {
      if (r < rows) {
        float y = 0.0f;
#pragma unroll
        for (int k = 0; k < R; k++) y = fmaf(t[r * R + k], bv[k], y);
        const float term = dg_round(__fmul_rn(y, alpha), out);
        const size_t o = (n0 + r) * M + j;
        dg_store(__fadd_rn(dg_float(base[o]), term), out[o]);
      }
    }
  }
`

// LoRARowsBackwardSource is the backward's part by rows, for the cotangent g of out:
// u = (α·g)·bᵀ [N, R] (α·g rounded to float32 first, as MLX's scale of the cotangent),
// dx = u·aᵀ [N, K] in x's type, and ut [N, 2R] = (x·a, u) for LoRAColumnsBackwardSource.
// Blocks as LoRAForwardSource's. MLX declares x, x_shape, g, a, b, b_shape, dx and ut;
// template constants R, ROWS, W, ALPHA, NEG. Launch as LoRAForwardSource.
const LoRARowsBackwardSource = `
  const int N = x_shape[0], K = x_shape[1], M = b_shape[1];
  const size_t n0 = (size_t)blockIdx.x * ROWS;
  const int rows = min(ROWS, N - (int)n0);
  __shared__ float red[W * ROWS * R];
  __shared__ float t[ROWS * R], u[ROWS * R];
  dg_rows_times_a<R, ROWS, W>(x, a, n0, rows, K, red, t);
  const float alpha = dg_alpha<ALPHA, NEG>();
  float acc[ROWS * R];
#pragma unroll
  for (int c = 0; c < ROWS * R; c++) acc[c] = 0.0f;
  for (int j = threadIdx.x; j < M; j += W * 32) {
    float bv[R];
#pragma unroll
    for (int k = 0; k < R; k++) bv[k] = b[(size_t)k * M + j];
#pragma unroll
    for (int r = 0; r < ROWS; r++) {
      if (r < rows) {
        const float gj = __fmul_rn(alpha, dg_float(g[(n0 + r) * M + j]));
#pragma unroll
        for (int k = 0; k < R; k++) acc[r * R + k] = fmaf(gj, bv[k], acc[r * R + k]);
      }
    }
  }
  dg_block_sum<ROWS * R, W>(acc, red, u);
  for (int c = threadIdx.x; c < rows * R; c += W * 32) {
    const size_t o = (n0 + c / R) * 2 * R + c % R;
    ut[o] = t[c];
    ut[o + R] = u[c];
  }
  for (int i = threadIdx.x; i < K; i += W * 32) {
    float av[R];
#pragma unroll
    for (int k = 0; k < R; k++) av[k] = a[(size_t)i * R + k];
#pragma unroll
    for (int r = 0; r < ROWS; r++) {
      if (r < rows) {
        float s = 0.0f;
#pragma unroll
        for (int k = 0; k < R; k++) s = fmaf(u[r * R + k], av[k], s);
        dg_store(s, dx[(n0 + r) * K + i]);
      }
    }
  }
`

// LoRAColumnsBackwardSource is the backward's part by columns, sums over the N rows:
// da = xᵀ·u [K, R] and db = tᵀ·(α·g) [R, M], with t and u from ut. A block of W warps
// per 32 columns: the first ⌈K/32⌉ blocks da's rows, the rest db's columns. Each lane
// sums its column over rows w, w+W, … (w its warp), and the W warps' sums are added in
// warp order, so the result does not depend on timing. MLX declares x, x_shape, g,
// g_shape, ut, da and db; template constants R, W, ALPHA, NEG. Launch: grid
// ((⌈K/32⌉ + ⌈M/32⌉)·32W, 1, 1) in blocks of 32W; W·32·(R+1) floats of shared memory.
const LoRAColumnsBackwardSource = `
  const int N = x_shape[0], K = x_shape[1], M = g_shape[1];
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  const int KB = (K + 31) / 32;
  const bool forA = (int)blockIdx.x < KB;
  const int first = (forA ? blockIdx.x : blockIdx.x - KB) * 32;
  const int width = forA ? K : M;
  const int col = first + lane;
  const float alpha = dg_alpha<ALPHA, NEG>();
  float acc[R];
#pragma unroll
  for (int k = 0; k < R; k++) acc[k] = 0.0f;
  if (col < width) {
#pragma unroll 4
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
