// The LoRA kernels (emu_kernel.h: kernels.LoRAHeader and the three kernels inside C++
// function templates) on the CPU emulation, for activations of type T = T_, rank R_,
// x [N_, K_], base and g [N_, M_] (K_ and M_ multiples of 8), α = ALPHA_ and the arrays
// SHIFT_ elements off the 16-byte boundary, against float64 references: each
// float32 value within 1e-5 of the sum of its terms' magnitudes, and a value of type
// bfloat16 also within the half-ulps of the roundings the composition makes (the scaled
// term, then the sum). Prints "checks C bad B"; exits 1 on any bad value.
#include "emu_kernel.h"
#include <bit>
#include <cstdio>
#include <random>
#include <span>
using T = T_;
constexpr int R = R_, K = K_, M = M_, N = N_;
constexpr float alpha = ALPHA_;
constexpr int ALPHA = std::bit_cast<int>(alpha < 0 ? -alpha : alpha);  // |α|'s bits and its sign, as the engine passes them
constexpr bool NEG = alpha < 0;
constexpr bool narrow = sizeof(T) == 2;
constexpr double eps = 1e-5, half_ulp = narrow ? 1.0 / 256 : 0;  // float32 sums; bfloat16's 8 bits
int checks = 0, bad = 0;
static void near(const char* what, int i, double got, double want, double bound) {
  checks++;
  if (!(std::abs(got - want) <= bound) && bad++ < 5) printf("%s[%d] = %.9g, want %.9g ± %.3g\n", what, i, got, want, bound);
}
int main() {
  std::mt19937 rng(R * 1000 + K * 10 + M + N);
  std::uniform_real_distribution<float> u(-1, 1);
  // SHIFT_ elements before each input and before out and dx: the kernels' 16-byte accesses
  // must fall back to single elements off the boundary (views into MLX's buffers)
  constexpr int S = SHIFT_;
  std::vector<T> xv(N * K + S), basev(N * M + S), gv(N * M + S);
  std::vector<float> av(K * R + S), bv(R * M + S);
  std::span<T> x(xv.data() + S, N * K), base(basev.data() + S, N * M), g(gv.data() + S, N * M);
  std::span<float> a(av.data() + S, K * R), b(bv.data() + S, R * M);
  for (auto& v : x) v = emu_to<T>(u(rng));
  for (auto& v : base) v = emu_to<T>(u(rng));
  for (auto& v : g) v = emu_to<T>(u(rng));
  for (auto& v : a) v = u(rng);
  for (auto& v : b) v = u(rng);
  Shape xs{}, bs{}, gs{};
  xs.d[0] = N, xs.d[1] = K;
  bs.d[0] = R, bs.d[1] = M;
  gs.d[0] = N, gs.d[1] = M;
  // the engine's launch (mlxeng/lora.go): ROWS rows a block of W warps, W column warps
  constexpr int ROWS = R <= 8 ? 4 : R <= 16 ? 2 : 1, W = 8, WC = R <= 8 ? 16 : R <= 16 ? 8 : 4;
  const int rowBlocks = (N + ROWS - 1) / ROWS;
  std::vector<T> outv(N * M + S, emu_to<T>(777)), dxv(N * K + S, emu_to<T>(777));
  std::span<T> out(outv.data() + S, N * M), dx(dxv.data() + S, N * K);
  std::vector<float> ut(N * 2 * R, 777), da(K * R, 777), db(R * M, 777);
  launch(rowBlocks, 32 * W, [&] { forward_body<R, ROWS, W, ALPHA, NEG>(base.data(), x.data(), xs, a.data(), b.data(), bs, out.data()); });
  launch(rowBlocks, 32 * W, [&] { rows_body<R, ROWS, W, ALPHA, NEG>(x.data(), xs, g.data(), a.data(), b.data(), bs, dx.data(), ut.data()); });
  launch((K + 63) / 64 + (M + 63) / 64, 32 * WC, [&] { columns_body<R, WC, ALPHA, NEG>(x.data(), xs, g.data(), gs, ut.data(), da.data(), db.data()); });

  auto X = [&](int n, int i) { return double(emu_float(x[n * K + i])); };
  auto G = [&](int n, int j) { return double(alpha) * emu_float(g[n * M + j]); };  // the scaled cotangent
  // t = x·a, u = (α·g)·bᵀ, with the sums of their terms' magnitudes
  std::vector<double> t(N * R), ta(N * R), uu(N * R), ua(N * R);
  for (int n = 0; n < N; n++)
    for (int k = 0; k < R; k++) {
      for (int i = 0; i < K; i++) t[n * R + k] += X(n, i) * a[i * R + k], ta[n * R + k] += std::abs(X(n, i) * a[i * R + k]);
      for (int j = 0; j < M; j++) uu[n * R + k] += G(n, j) * b[k * M + j], ua[n * R + k] += std::abs(G(n, j) * b[k * M + j]);
    }
  for (int n = 0; n < N; n++)
    for (int j = 0; j < M; j++) {
      double y = 0, ya = 0;
      for (int k = 0; k < R; k++) y += t[n * R + k] * b[k * M + j], ya += ta[n * R + k] * std::abs(b[k * M + j]);
      const double term = alpha * y, want = emu_float(base[n * M + j]) + term;
      const double bound = eps * (std::abs(emu_float(base[n * M + j])) + std::abs(alpha) * ya) + 1.01 * half_ulp * (std::abs(term) + std::abs(want));
      near("out", n * M + j, emu_float(out[n * M + j]), want, bound);
    }
  for (int n = 0; n < N; n++)
    for (int k = 0; k < R; k++) {
      near("ut.t", n * 2 * R + k, ut[n * 2 * R + k], t[n * R + k], eps * ta[n * R + k]);
      near("ut.u", n * 2 * R + R + k, ut[n * 2 * R + R + k], uu[n * R + k], eps * ua[n * R + k]);
    }
  for (int n = 0; n < N; n++)
    for (int i = 0; i < K; i++) {
      double s = 0, sa = 0;
      for (int k = 0; k < R; k++) s += uu[n * R + k] * a[i * R + k], sa += ua[n * R + k] * std::abs(a[i * R + k]);
      near("dx", n * K + i, emu_float(dx[n * K + i]), s, eps * sa + 1.01 * half_ulp * std::abs(s));
    }
  for (int i = 0; i < K; i++)
    for (int k = 0; k < R; k++) {
      double s = 0, sa = 0;
      for (int n = 0; n < N; n++) s += X(n, i) * uu[n * R + k], sa += std::abs(X(n, i)) * ua[n * R + k];
      near("da", i * R + k, da[i * R + k], s, eps * sa);
    }
  for (int k = 0; k < R; k++)
    for (int j = 0; j < M; j++) {
      double s = 0, sa = 0;
      for (int n = 0; n < N; n++) s += t[n * R + k] * G(n, j), sa += ta[n * R + k] * std::abs(G(n, j));
      near("db", k * M + j, db[k * M + j], s, eps * sa);
    }
  printf("checks %d bad %d\n", checks, bad);
  return bad != 0;
}
