// CPU emulation of the CUDA subset the engine's kernels use: one block at a time, its
// threads as std::threads, __syncthreads a barrier, WMMA fragments computed whole by
// every thread of a warp (idempotent stores), mma.sync through the block's barrier from
// the warp's registers, asynchronous copies done at once.
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <thread>
#include <type_traits>
#include <vector>
struct __nv_bfloat16 { uint16_t b; };
static inline float __bfloat162float(__nv_bfloat16 h) { uint32_t u = uint32_t(h.b) << 16; float f; memcpy(&f, &u, 4); return f; }
static inline __nv_bfloat16 __float2bfloat16(float f) {
  uint32_t u; memcpy(&u, &f, 4);
  if ((u & 0x7fffffff) > 0x7f800000) return {uint16_t((u >> 16) | 0x40)};
  uint32_t r = 0x7fff + ((u >> 16) & 1); return {uint16_t((u + r) >> 16)};
}
static inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __float2bfloat16(f); }
static inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return h.b; }
static inline __nv_bfloat16 __hmul(__nv_bfloat16 a, __nv_bfloat16 b) { return __float2bfloat16(__bfloat162float(a) * __bfloat162float(b)); }
static inline __nv_bfloat16 __hadd(__nv_bfloat16 a, __nv_bfloat16 b) { return __float2bfloat16(__bfloat162float(a) + __bfloat162float(b)); }
struct __nv_bfloat162 { __nv_bfloat16 x, y; };  // x in the low 16 bits, as in CUDA
static inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b) { return {__float2bfloat16(a), __float2bfloat16(b)}; }
static inline __nv_bfloat162 __float2bfloat162_rn(float f) { return {__float2bfloat16(f), __float2bfloat16(f)}; }
static inline __nv_bfloat162 __bfloat162bfloat162(__nv_bfloat16 h) { return {h, h}; }
static inline __nv_bfloat16 __hsub(__nv_bfloat16 a, __nv_bfloat16 b) { return __float2bfloat16(__bfloat162float(a) - __bfloat162float(b)); }
static inline __nv_bfloat162 __hsub2(__nv_bfloat162 a, __nv_bfloat162 b) { return {__hsub(a.x, b.x), __hsub(a.y, b.y)}; }
static inline __nv_bfloat162 __hmul2(__nv_bfloat162 a, __nv_bfloat162 b) { return {__hmul(a.x, b.x), __hmul(a.y, b.y)}; }
static inline __nv_bfloat162 __hadd2(__nv_bfloat162 a, __nv_bfloat162 b) { return {__hadd(a.x, b.x), __hadd(a.y, b.y)}; }
// Atomic adds: the emulation runs a kernel without barriers one thread at a time, so a
// plain add (rounded as the GPU's add of the type) is atomic.
static inline float atomicAdd(float* p, float v) { float old = *p; *p = old + v; return old; }
static inline __nv_bfloat162 atomicAdd(__nv_bfloat162* p, __nv_bfloat162 v) {
  __nv_bfloat162 old = *p;
  *p = {__hadd(old.x, v.x), __hadd(old.y, v.y)};
  return old;
}
struct alignas(16) uint4 { uint32_t x, y, z, w; };  // aligned as CUDA's: a misaligned access may fault, as on the GPU
static inline uint4 make_uint4(uint32_t a, uint32_t b, uint32_t c, uint32_t d) { return {a, b, c, d}; }
struct alignas(8) uint2 { uint32_t x, y; };
static inline uint2 make_uint2(uint32_t a, uint32_t b) { return {a, b}; }
struct alignas(16) float4 { float x, y, z, w; };
static inline float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }
struct dim3e { int x, y, z; };
thread_local dim3e threadIdx, blockIdx, gridDim, blockDim;
static inline float __fmul_rn(float a, float b) { volatile float p = a * b; return p; }
static inline float __fsub_rn(float a, float b) { volatile float d = a - b; return d; }
static inline float __fdiv_rn(float a, float b) { volatile float q = a / b; return q; }
static inline float __fsqrt_rn(float a) { volatile float r = std::sqrt(a); return r; }
static inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
static inline float rsqrtf(float v) { return 1.0f / std::sqrt(v); }  // CUDA's is within 2 ulp of this
static inline int min(int a, int b) { return a < b ? a : b; }
static inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
static inline float __fadd_rn(float a, float b) { volatile float s = a + b; return s; }
#define __device__
#define __forceinline__ inline
std::barrier<>* emu_bar;
#define __syncthreads() emu_bar->arrive_and_wait()
// A warp's shuffle through a slot a thread: every thread of the block must reach it at
// the same point, as the emulation's barrier is the block's (a harness makes a thread
// that has returned drop from the barrier, as a finished warp leaves the GPU's).
static float emu_shfl[1024];
static inline float __shfl_xor_sync(unsigned, float v, int lane_mask) {
  const int t = threadIdx.x;
  emu_shfl[t] = v;
  emu_bar->arrive_and_wait();
  const float r = emu_shfl[t ^ lane_mask];
  emu_bar->arrive_and_wait();
  return r;
}
#define __shared__ static
// __match_any_sync for the expert order: the same slot-a-thread scheme as the shuffle
// (every thread of the block reaches it together); its integer atomicAdd is a real one,
// as that kernel's threads run at once.
static inline int atomicAdd(int* p, int v) { return std::atomic_ref<int>(*p).fetch_add(v); }
static int emu_match[1024];
static inline unsigned __match_any_sync(unsigned, int v) {
  const int t = threadIdx.x, base = t & ~31;
  emu_match[t] = v;
  emu_bar->arrive_and_wait();
  unsigned m = 0;
  for (int l = 0; l < 32; l++) m |= (emu_match[base + l] == v ? 1u : 0u) << l;
  emu_bar->arrive_and_wait();
  return m;
}
static inline int __popc(unsigned v) { return __builtin_popcount(v); }
static inline int max(int a, int b) { return a > b ? a : b; }
#define __align__(n) __attribute__((aligned(n)))
namespace nvcuda { namespace wmma {
struct matrix_a {}; struct matrix_b {}; struct accumulator {}; struct row_major {}; struct col_major {};
enum layout_t { mem_row_major };
template <class Use, int M, int N, int K, class T, class L = void> struct fragment { float v[16][16]; };
template <class Use, int M, int N, int K, class T, class L> void fill_fragment(fragment<Use, M, N, K, T, L>& f, float x) { for (auto& r : f.v) for (auto& c : r) c = x; }
template <class Use, int M, int N, int K, class L> void load_matrix_sync(fragment<Use, M, N, K, __nv_bfloat16, L>& f, const __nv_bfloat16* p, unsigned ld) {
  constexpr bool col = std::is_same_v<L, col_major>;  // element (i, j) at p[j·ld + i]
  for (int i = 0; i < 16; i++) for (int j = 0; j < 16; j++) f.v[i][j] = __bfloat162float(col ? p[j * ld + i] : p[i * ld + j]); }
template <class LA, class LB> void mma_sync(fragment<accumulator, 16, 16, 16, float>& d, const fragment<matrix_a, 16, 16, 16, __nv_bfloat16, LA>& a,
    const fragment<matrix_b, 16, 16, 16, __nv_bfloat16, LB>& b, const fragment<accumulator, 16, 16, 16, float>& c) {
  float out[16][16];
  for (int i = 0; i < 16; i++) for (int j = 0; j < 16; j++) { float s = c.v[i][j]; for (int k = 0; k < 16; k++) s += a.v[i][k] * b.v[k][j]; out[i][j] = s; }
  memcpy(d.v, out, sizeof out); }
inline void store_matrix_sync(float* p, const fragment<accumulator, 16, 16, 16, float>& f, unsigned ld, layout_t) {
  for (int i = 0; i < 16; i++) for (int j = 0; j < 16; j++) p[i * ld + j] = f.v[i][j]; }
}}
// mma.sync m16n8k16 (kernels.ExpertsMMAHeader) for the warp: every lane leaves its
// registers in a slot, the block's barrier, each lane computes its four sums from its
// warp's slots (lane g·4 + t holds A[g][2t, 2t+1], A[g+8][2t, 2t+1], A[g][2t+8, 2t+9],
// A[g+8][2t+8, 2t+9], B[2t, 2t+1][g], B[2t+8, 2t+9][g]; D[g][2t, 2t+1], D[g+8][2t, 2t+1]),
// the barrier again. Every thread of the block must reach it at the same point.
static uint32_t emu_mma_a[1024][4], emu_mma_b[1024][2];
// __byte_perm(x, y, s): byte k of the result is byte (s >> 4k) & 7 of y:x (without the
// sign-replicating mode, which the kernels do not use).
static inline uint32_t __byte_perm(uint32_t x, uint32_t y, uint32_t s) {
  const uint64_t v = (uint64_t)y << 32 | x;
  uint32_t r = 0;
  for (int k = 0; k < 4; k++) r |= (uint32_t)((v >> (8 * ((s >> (4 * k)) & 7))) & 0xff) << (8 * k);
  return r;
}
static inline float emu_half(uint32_t r, int hi) { return __bfloat162float({uint16_t(hi ? r >> 16 : r & 0xffff)}); }
static inline void dg_mma16816(float* d, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0, uint32_t b1) {
  const int tid = threadIdx.x, base = tid & ~31, lane = tid & 31, g = lane / 4, t = lane % 4;
  emu_mma_a[tid][0] = a0; emu_mma_a[tid][1] = a1; emu_mma_a[tid][2] = a2; emu_mma_a[tid][3] = a3;
  emu_mma_b[tid][0] = b0; emu_mma_b[tid][1] = b1;
  emu_bar->arrive_and_wait();
  auto A = [&](int row, int k) {  // the lane and register that hold A[row][k]
    return emu_half(emu_mma_a[base + (row % 8) * 4 + (k % 8) / 2][(row >= 8 ? 1 : 0) + (k >= 8 ? 2 : 0)], k & 1);
  };
  auto B = [&](int k, int col) { return emu_half(emu_mma_b[base + col * 4 + (k % 8) / 2][k >= 8 ? 1 : 0], k & 1); };
  float out[4];
  for (int i = 0; i < 4; i++) {
    const int row = g + (i >= 2 ? 8 : 0), col = 2 * t + (i & 1);
    float s = d[i];
    for (int k = 0; k < 16; k++) s += A(row, k) * B(k, col);
    out[i] = s;
  }
  emu_bar->arrive_and_wait();
  for (int i = 0; i < 4; i++) d[i] = out[i];
}
struct Shape { int d[8]; const int& operator[](int i) const { return d[i]; } };
// Helpers for the references the tests write out: any element type as float, and a
// float rounded to T (emu_to<T>).
static inline float emu_float(float v) { return v; }
static inline float emu_float(__nv_bfloat16 v) { return __bfloat162float(v); }
static inline void emu_conv(float v, float& r) { r = v; }
static inline void emu_conv(float v, __nv_bfloat16& r) { r = __float2bfloat16(v); }
template <typename T> static inline T emu_to(float v) { T r; emu_conv(v, r); return r; }
