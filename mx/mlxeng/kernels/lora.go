package kernels

// The LoRA kernels compute a low-rank adapter's term on a base linear's output for
// bfloat16 activations and float32 factors — out = base + bf16(α·((x·a)·b)) — and its
// gradients, in three launches where MLX-CUDA's ops took ~12 (casts, cuBLAS products
// with their split-K reductions, a scale and an add; a real-geometry layer's 310
// launches became 245, 24 of them these kernels). The work is small (rank r ≤ 32), so
// what the fused kernels save is the launches and the host's per-product cuBLASLt
// set-up, which pace the real 26B-A4B geometry's step on the H200.
//
// Arrays: x [N, K] and base, out, g [N, M] of the activations' type; a [K, R] and b
// [R, M] float32 (the adapter's factors); α is given by the template constants ALPHA,
// the bits of |α| as a float32, and NEG, its sign. Every sum is float32 with fused
// multiply-adds; the products' orders differ from cuBLAS's, so the values match MLX's
// composition to float32 rounding, not bit for bit.
//
// Measured at the real geometry (384 rows; bench/results/gpu-s14.txt): a first version
// gave each row one warp, 60–125 µs a launch (~3 warps an SM, each walking K and M
// alone); a block of W warps on ROWS rows, one element a load, 11–48 µs (still waiting
// on memory); 16-byte accesses, 8 columns a thread, took the real step from 152 to 145
// ms. The alignment checks that guard those accesses came after and were not measured.

// LoRAHeader is included before the LoRA kernels: conversions, a warp's and a block's
// all-reduce, vector loads and stores, and the block's rows' products with a. The CPU
// emulation (testdata/emu_prelude.h) defines the CUDA intrinsics these use.
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
// dg_aligned16 reports whether p is 16-byte aligned. MLX allocates aligned buffers, but an
// input may be a view into one at any element offset (a row-contiguous slice of one row),
// so the vector loads and stores below check and fall back to one element at a time.
__device__ __forceinline__ bool dg_aligned16(const void* p) { return (reinterpret_cast<unsigned long long>(p) & 15ull) == 0; }
// dg_load8 reads 8 consecutive elements as floats; dg_store8 writes 8 floats rounded to
// the element type. Both use 16-byte accesses where p is aligned.
__device__ __forceinline__ void dg_load8(const __nv_bfloat16* p, float (&v)[8]) {
  if (!dg_aligned16(p)) {
#pragma unroll
    for (int e = 0; e < 8; e++) v[e] = __bfloat162float(p[e]);
    return;
  }
  const uint4 q = *reinterpret_cast<const uint4*>(p);
  const unsigned w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
  for (int e = 0; e < 4; e++) {
    v[2 * e] = __uint_as_float(w[e] << 16);
    v[2 * e + 1] = __uint_as_float(w[e] & 0xffff0000u);
  }
}
__device__ __forceinline__ void dg_load8(const float* p, float (&v)[8]) {
  if (!dg_aligned16(p)) {
#pragma unroll
    for (int e = 0; e < 8; e++) v[e] = p[e];
    return;
  }
  const float4 a = reinterpret_cast<const float4*>(p)[0], b = reinterpret_cast<const float4*>(p)[1];
  v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
}
__device__ __forceinline__ void dg_store8(const float (&v)[8], __nv_bfloat16* p) {
  if (!dg_aligned16(p)) {
#pragma unroll
    for (int e = 0; e < 8; e++) p[e] = __float2bfloat16_rn(v[e]);
    return;
  }
  unsigned w[4];
#pragma unroll
  for (int e = 0; e < 4; e++) {
    w[e] = (unsigned)__bfloat16_as_ushort(__float2bfloat16_rn(v[2 * e])) |
           ((unsigned)__bfloat16_as_ushort(__float2bfloat16_rn(v[2 * e + 1])) << 16);
  }
  *reinterpret_cast<uint4*>(p) = make_uint4(w[0], w[1], w[2], w[3]);
}
__device__ __forceinline__ void dg_store8(const float (&v)[8], float* p) {
  if (!dg_aligned16(p)) {
#pragma unroll
    for (int e = 0; e < 8; e++) p[e] = v[e];
    return;
  }
  reinterpret_cast<float4*>(p)[0] = make_float4(v[0], v[1], v[2], v[3]);
  reinterpret_cast<float4*>(p)[1] = make_float4(v[4], v[5], v[6], v[7]);
}
// dg_load_floats reads R consecutive floats, with 16-byte loads when R is a multiple of
// 4 and p is aligned (a's rows, ut's halves).
template <int R>
__device__ __forceinline__ void dg_load_floats(const float* p, float (&v)[R]) {
  if constexpr (R % 4 == 0) {
    if (dg_aligned16(p)) {
      const float4* q = reinterpret_cast<const float4*>(p);
#pragma unroll
      for (int k = 0; k < R / 4; k++) {
        const float4 f = q[k];
        v[4 * k] = f.x, v[4 * k + 1] = f.y, v[4 * k + 2] = f.z, v[4 * k + 3] = f.w;
      }
      return;
    }
  }
#pragma unroll
  for (int k = 0; k < R; k++) v[k] = p[k];
}
// dg_rows_times_a sets t[r·R + k] to x[n0 + r]·a[:, k] for the block's rows r < rows
// (x [N, K], K a multiple of 8; a [K, R]; ROWS·R floats of shared memory), each thread
// taking 8 consecutive columns of x at a time.
template <int R, int ROWS, int W, typename T>
__device__ __forceinline__ void dg_rows_times_a(const T* x, const float* a, size_t n0, int rows, int K, float* red, float* t) {
  float acc[ROWS * R];
#pragma unroll
  for (int c = 0; c < ROWS * R; c++) acc[c] = 0.0f;
  for (int i0 = 8 * threadIdx.x; i0 < K; i0 += 8 * W * 32) {
    float xs[ROWS][8];
#pragma unroll
    for (int r = 0; r < ROWS; r++) {
      if (r < rows) dg_load8(x + (n0 + r) * K + i0, xs[r]);
    }
#pragma unroll
    for (int e = 0; e < 8; e++) {
      float av[R];
      dg_load_floats<R>(a + (size_t)(i0 + e) * R, av);
#pragma unroll
      for (int r = 0; r < ROWS; r++) {
#pragma unroll
        for (int k = 0; k < R; k++) acc[r * R + k] = fmaf(r < rows ? xs[r][e] : 0.0f, av[k], acc[r * R + k]);
      }
    }
  }
  dg_block_sum<ROWS * R, W>(acc, red, t);
}
`

// LoRAForwardSource is out = base + cast(α·((x·a)·b)), the cast to out's type and the add
// rounded as MLX's composition rounds them (the scaled term to T, then the sum to T). A
// block of W warps takes ROWS rows: t = x[n]·a summed over the block, then each thread's
// columns of t·b, 8 at a time. K and M are multiples of 8 (the vector loads). MLX
// declares base, x, x_shape, a, b, b_shape and out; template constants R, ROWS, W, ALPHA,
// NEG. Launch: grid (⌈N/ROWS⌉·32W, 1, 1) in blocks of 32W. K and M are read from the
// shapes, so one compiled kernel serves every linear of a rank (MLX compiles a custom
// kernel in each process, once for each set of template constants).
const LoRAForwardSource = `
  const int N = x_shape[0], K = x_shape[1], M = b_shape[1];
  const size_t n0 = (size_t)blockIdx.x * ROWS;
  const int rows = min(ROWS, N - (int)n0);
  __shared__ float red[W * ROWS * R];
  __shared__ float t[ROWS * R];
  dg_rows_times_a<R, ROWS, W>(x, a, n0, rows, K, red, t);
  const float alpha = dg_alpha<ALPHA, NEG>();
  for (int j0 = 8 * threadIdx.x; j0 < M; j0 += 8 * W * 32) {
    float y[ROWS][8];
#pragma unroll
    for (int r = 0; r < ROWS; r++) {
#pragma unroll
      for (int e = 0; e < 8; e++) y[r][e] = 0.0f;
    }
#pragma unroll
    for (int k = 0; k < R; k++) {
      float bk[8];
      dg_load8(b + (size_t)k * M + j0, bk);
#pragma unroll
      for (int r = 0; r < ROWS; r++) {
#pragma unroll
        for (int e = 0; e < 8; e++) y[r][e] = fmaf(t[r * R + k], bk[e], y[r][e]);
      }
    }
#pragma unroll
    for (int r = 0; r < ROWS; r++) {
      if (r < rows) {
        const size_t o = (n0 + r) * M + j0;
        float v[8];
        dg_load8(base + o, v);
#pragma unroll
        for (int e = 0; e < 8; e++) v[e] = __fadd_rn(v[e], dg_round(__fmul_rn(y[r][e], alpha), out));
        dg_store8(v, out + o);
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
  for (int j0 = 8 * threadIdx.x; j0 < M; j0 += 8 * W * 32) {
    float gs[ROWS][8];
#pragma unroll
    for (int r = 0; r < ROWS; r++) {
      if (r < rows) {
        dg_load8(g + (n0 + r) * M + j0, gs[r]);
#pragma unroll
        for (int e = 0; e < 8; e++) gs[r][e] = __fmul_rn(alpha, gs[r][e]);
      } else {
#pragma unroll
        for (int e = 0; e < 8; e++) gs[r][e] = 0.0f;
      }
    }
#pragma unroll
    for (int k = 0; k < R; k++) {
      float bk[8];
      dg_load8(b + (size_t)k * M + j0, bk);
#pragma unroll
      for (int r = 0; r < ROWS; r++) {
#pragma unroll
        for (int e = 0; e < 8; e++) acc[r * R + k] = fmaf(gs[r][e], bk[e], acc[r * R + k]);
      }
    }
  }
  dg_block_sum<ROWS * R, W>(acc, red, u);
  for (int c = threadIdx.x; c < rows * R; c += W * 32) {
    const size_t o = (n0 + c / R) * 2 * R + c % R;
    ut[o] = t[c];
    ut[o + R] = u[c];
  }
  for (int i0 = 8 * threadIdx.x; i0 < K; i0 += 8 * W * 32) {
    float s[ROWS][8];
#pragma unroll
    for (int e = 0; e < 8; e++) {
      float av[R];
      dg_load_floats<R>(a + (size_t)(i0 + e) * R, av);
#pragma unroll
      for (int r = 0; r < ROWS; r++) {
        float v = 0.0f;
#pragma unroll
        for (int k = 0; k < R; k++) v = fmaf(u[r * R + k], av[k], v);
        s[r][e] = v;
      }
    }
#pragma unroll
    for (int r = 0; r < ROWS; r++) {
      if (r < rows) dg_store8(s[r], dx + (n0 + r) * K + i0);
    }
  }
`

// LoRAColumnsBackwardSource is the backward's part by columns, sums over the N rows:
// da = xᵀ·u [K, R] and db = tᵀ·(α·g) [R, M], with t and u from ut. A block of W warps
// per 64 columns, two a lane: the first ⌈K/64⌉ blocks da's rows, the rest db's columns.
// Each lane sums its columns over rows w, w+W, … (w its warp), and the W warps' sums are
// added in warp order, so the result does not depend on timing. K and M are even. MLX
// declares x, x_shape, g, g_shape, ut, da and db; template constants R, W, ALPHA, NEG.
// Launch: grid ((⌈K/64⌉ + ⌈M/64⌉)·32W, 1, 1) in blocks of 32W; W·64·(R+1) floats of
// shared memory.
const LoRAColumnsBackwardSource = `
  const int N = x_shape[0], K = x_shape[1], M = g_shape[1];
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  const int KB = (K + 63) / 64;
  const bool forA = (int)blockIdx.x < KB;
  const int first = (forA ? blockIdx.x : blockIdx.x - KB) * 64;
  const int width = forA ? K : M;
  const int col = first + 2 * lane;
  const float alpha = dg_alpha<ALPHA, NEG>();
  float acc[2][R];
#pragma unroll
  for (int k = 0; k < R; k++) acc[0][k] = acc[1][k] = 0.0f;
  if (col < width) {
#pragma unroll 4
    for (int n = w; n < N; n += W) {
      // da takes x's columns and u (ut's second half); db takes α·g's columns and t
      float v0, v1;
      if (forA) {
        v0 = dg_float(x[(size_t)n * K + col]), v1 = dg_float(x[(size_t)n * K + col + 1]);
      } else {
        v0 = __fmul_rn(alpha, dg_float(g[(size_t)n * M + col])), v1 = __fmul_rn(alpha, dg_float(g[(size_t)n * M + col + 1]));
      }
      float f[R];
      dg_load_floats<R>(ut + (size_t)n * 2 * R + (forA ? R : 0), f);
#pragma unroll
      for (int k = 0; k < R; k++) {
        acc[0][k] = fmaf(v0, f[k], acc[0][k]);
        acc[1][k] = fmaf(v1, f[k], acc[1][k]);
      }
    }
  }
  __shared__ float part[W][64][R + 1];
#pragma unroll
  for (int k = 0; k < R; k++) part[w][2 * lane][k] = acc[0][k], part[w][2 * lane + 1][k] = acc[1][k];
  __syncthreads();
  for (int o = threadIdx.x; o < 64 * R; o += blockDim.x) {
    // da [K, R] is written row by row, db [R, M] along its rows' columns
    const int c = forA ? o / R : o % 64, k = forA ? o % R : o / 64;
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
