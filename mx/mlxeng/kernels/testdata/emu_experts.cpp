// The fused experts kernel (emu_kernel.h: kernels.ExpertsSource inside a C++ function)
// run on the CPU emulation for E experts, weights [E, N, K], the rows of each expert given
// as arguments: the forward y = x·W[e]ᵀ and the input gradient dx = g·W[e] against float64
// products of the same bfloat16 values. Prints "rows R bad B maxrel M"; exits 1 if any
// element is off by more than bfloat16's rounding (1/256 relative) plus 1e-3.
#include "emu_kernel.h"
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
constexpr int E = E_, N = N_, K = K_;
int main(int argc, char** argv) {
  std::vector<int32_t> idx;
  for (int e = 0; e < E && e + 1 < argc; e++)
    for (int i = 0; i < atoi(argv[e + 1]); i++) idx.push_back(e);
  int R = idx.size();
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1, 1);
  auto bf = [](float f) { return __float2bfloat16(f); };
  // EMU_SHIFT=1 passes x and g one element into their buffers, off the 16-byte boundary.
  const int shift = getenv("EMU_SHIFT") && atoi(getenv("EMU_SHIFT")) ? 1 : 0;
  std::vector<__nv_bfloat16> xbuf(R * K + shift), gbuf(R * N + shift), sc(E * N * (K / 64)), bi(E * N * (K / 64));
  __nv_bfloat16* x = xbuf.data() + shift;
  __nv_bfloat16* g = gbuf.data() + shift;
  for (int i = 0; i < R * K; i++) x[i] = bf(u(rng));
  for (int i = 0; i < R * N; i++) g[i] = bf(u(rng));
  for (auto& v : sc) v = bf(0.05f * u(rng));
  for (auto& v : bi) v = bf(0.1f * u(rng));
  std::vector<uint32_t> w(size_t(E) * N * K / 8);
  for (auto& v : w) v = rng();
  auto W = [&](int e, int n, int k) {  // MLX's affine_dequantize: q·scale, then + bias, in bfloat16
    uint32_t word = w[(size_t(e) * N + n) * (K / 8) + k / 8];
    int q = (word >> (4 * (k % 8))) & 0xF;
    size_t gi = (size_t(e) * N + n) * (K / 64) + k / 64;
    return __bfloat162float(__hadd(__hmul(__float2bfloat16(float(q)), sc[gi]), bi[gi]));
  };
  std::vector<__nv_bfloat16> y(R * N, bf(777)), dx(R * K, bf(777));
  // EMU_Z splits each expert's 32-row tiles over that many blocks (grid z).
  const int z = getenv("EMU_Z") ? atoi(getenv("EMU_Z")) : 1;
  launch<true, N, K>(E, z, x, w.data(), sc.data(), bi.data(), idx.data(), R, y.data());
  launch<false, K, N>(E, z, g, w.data(), sc.data(), bi.data(), idx.data(), R, dx.data());
  int bad = 0;
  double maxrel = 0;
  auto check = [&](const char* what, int r, int j, double got, double want) {
    double d = fabs(got - want);
    maxrel = std::max(maxrel, d / (fabs(want) + 1e-3));
    if (d > fabs(want) / 256 + 1e-3 && bad++ < 5) printf("%s[%d,%d] = %g, want %g\n", what, r, j, got, want);
  };
  for (int r = 0; r < R; r++) {
    int e = idx[r];
    for (int n = 0; n < N; n++) {
      double s = 0;
      for (int k = 0; k < K; k++) s += double(__bfloat162float(x[r * K + k])) * W(e, n, k);
      check("y", r, n, __bfloat162float(y[r * N + n]), s);
    }
    for (int k = 0; k < K; k++) {
      double s = 0;
      for (int n = 0; n < N; n++) s += double(__bfloat162float(g[r * N + n])) * W(e, n, k);
      check("dx", r, k, __bfloat162float(dx[r * K + k]), s);
    }
  }
  printf("rows %d bad %d maxrel %g\n", R, bad, maxrel);
  return bad != 0;
}
