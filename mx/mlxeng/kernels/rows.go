package kernels

// conversions begins the headers of the kernels that read bfloat16 or float32 arrays:
// dg_float reads an element as float32, dg_store rounds a float32 to the element's type.
const conversions = `
__device__ __forceinline__ float dg_float(float v) { return v; }
__device__ __forceinline__ float dg_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ void dg_store(float v, float& out) { out = v; }
__device__ __forceinline__ void dg_store(float v, __nv_bfloat16& out) { out = __float2bfloat16_rn(v); }
`

// RowsHeader is included before GatherRowsSource and ScatterRowsSource: conversions
// between the arrays' element types and float32, and atomic adds into bfloat16 pairs and
// floats. The CPU emulation (testdata/emu_prelude.h) defines the CUDA intrinsics these use.
const RowsHeader = conversions + `
// dg_add2 adds a and b to the adjacent elements p[0] and p[1] (p 4-byte aligned).
__device__ __forceinline__ void dg_add2(float* p, float a, float b) { atomicAdd(p, a); atomicAdd(p + 1, b); }
__device__ __forceinline__ void dg_add2(__nv_bfloat16* p, float a, float b) {
  atomicAdd(reinterpret_cast<__nv_bfloat162*>(p), __floats2bfloat162_rn(a, b));
}
`

// GatherRowsSource is a take of rows: out [M, H] with out[m] = src[idx[m]] for src
// [R, H]. An index below zero counts from the end, as MLX's take does; one outside
// [−R, R) gives a row of zeros. MLX declares src, src_shape, idx and out. Launch: grid
// (M·256, 1, 1) threads in blocks of 256, a block per output row.
//
// MLX-CUDA v0.32.1's gather gives each thread one element and recomputes its index from
// the shapes: ~57 µs for the real 26B-A4B geometry's experts dispatch (3,072 rows of
// 2,816 bfloat16) on the H200.
const GatherRowsSource = `
  const int R = src_shape[0], H = src_shape[1];
  const size_t m = blockIdx.x;
  int r = idx[m];
  if (r < 0) r += R;
  const bool ok = r >= 0 && r < R;
  for (int h = threadIdx.x; h < H; h += blockDim.x) {
    if (ok) {
      out[m * H + h] = src[(size_t)r * H + h];
    } else {
      dg_store(0.0f, out[m * H + h]);
    }
  }
`

// ScatterRowsSource is GatherRowsSource's input gradient: out [R, H], zero-filled by MLX
// before the launch, gets row g[m] added to row idx[m] for every m (indices as the
// gather reads them). The adds are atomic (bfloat16 in pairs, the native bfloat162 add of
// sm_80 and later), so a row picked once is written exactly once, and a row picked
// several times — a mixture of experts' k copies of a token — sums in the order the adds
// land, as MLX's own scatter-add does. MLX declares g, g_shape, idx and out, and the
// template constant R (out's rows). H is even. Launch: grid (M·128, 1, 1) threads in
// blocks of 128, a block per row of g.
//
// MLX-CUDA v0.32.1's scatter-add gives each thread one element, and adds bfloat16 by a
// compare-and-swap loop on the 32-bit word it shares with its neighbour: ~117 µs for
// the dispatch's gradient (3,072 rows of 2,816 into 384) on the H200.
const ScatterRowsSource = `
  const int H = g_shape[1];
  const size_t m = blockIdx.x;
  int r = idx[m];
  if (r < 0) r += R;
  if (r < 0 || r >= R) return;
  for (int h = 2 * threadIdx.x; h < H; h += 2 * blockDim.x) {
    dg_add2(&out[(size_t)r * H + h], dg_float(g[m * H + h]), dg_float(g[m * H + h + 1]));
  }
`
