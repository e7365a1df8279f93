// The NormRoPE kernels (emu_kernel.h: kernels.LoRAHeader, NormRoPEHeader and both
// bodies inside C++ function templates) run on the CPU emulation for x [1, L_, H_, D_] of
// type T_ (OFFSET_ the first position, some pairs with freqs +Inf: not turned), against
// float64 with the angle θ = float(scale·(offset + l))·float(1/freqs[i]) taken in float32
// as the kernels (and MLX) take it:
//   - forward: the normed value w·T(x·n) as MLX rounds it, turned and rounded once; each
//     value within T's rounding of the result plus one rounding of each normed input
//     (bfloat16 2⁻⁸, float32 2⁻²² relative to |x1| + |x2|), plus float32's rounding of n;
//   - backward: dx = n·w·g′ − x·n³·mean(w·g′·x) with g′ the cotangent turned back, within
//     T's rounding of the result plus float32 rounding of the terms' magnitudes (2⁻¹⁸).
// Prints "checks C bad B"; exits 1 on any bad value.
#include "emu_kernel.h"
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
using T = T_;
constexpr int L = L_, H = H_, D = D_, OFFSET = OFFSET_, HALF = D / 2;
int main() {
  std::mt19937 rng(23);
  std::uniform_real_distribution<float> u(-1, 1);
  const int rows = L * H, n = rows * D;
  std::vector<T> x(n), w(D), g(n), out(n), dx(n);
  std::vector<float> freqs(HALF);
  for (int r = 0; r < rows; r++)
    for (int c = 0; c < D; c++) x[r * D + c] = emu_to<T>((r % 3 + 1) * 0.8f * u(rng));
  for (int c = 0; c < D; c++) w[c] = emu_to<T>(1.0f + 0.5f * u(rng));
  for (int i = 0; i < n; i++) g[i] = emu_to<T>(u(rng)), out[i] = dx[i] = emu_to<T>(777.0f);
  for (int i = 0; i < HALF; i++)  // periods 1 … 10⁴ as the real geometry's, the last quarter not turned
    freqs[i] = i >= HALF * 3 / 4 ? std::numeric_limits<float>::infinity() : std::pow(10000.0f, 2.0f * i / D);
  const float eps = 1e-6f, scale = 1.0f;
  Shape xs{};
  xs.d[0] = 1, xs.d[1] = L, xs.d[2] = H, xs.d[3] = D;
  const int blocks = (rows + 3) / 4;
  launch(blocks, 128, [&] { fwd_body<T, EPS_, OFFSET, SCALE_>(x.data(), xs, w.data(), freqs.data(), out.data()); });
  launch(blocks, 128, [&] { bwd_body<T, EPS_, OFFSET, SCALE_>(x.data(), xs, w.data(), freqs.data(), g.data(), dx.data()); });
  const bool bf = sizeof(T) == 2;
  const double tol = bf ? 1.0 / 256 : 1.0 / (1 << 22);
  auto round = [&](double v) { return bf ? (double)emu_float(emu_to<T>((float)v)) : (double)(float)v; };
  int checks = 0, bad = 0;
  for (int l = 0; l < L; l++)
    for (int h = 0; h < H; h++) {
      const int row = l * H + h;
      double ss = 0;
      for (int c = 0; c < D; c++) ss += (double)emu_float(x[row * D + c]) * emu_float(x[row * D + c]);
      const double nn = 1 / std::sqrt(ss / D + eps);
      const float pos = scale * (float)(OFFSET + l);
      // Forward.
      for (int i = 0; i < HALF; i++) {
        const double x1 = round(emu_float(w[i]) * round(emu_float(x[row * D + i]) * nn));
        const double x2 = round(emu_float(w[HALF + i]) * round(emu_float(x[row * D + HALF + i]) * nn));
        const float theta = pos * (float)(1.0 / freqs[i]);
        const double c = std::cos((double)theta), s = std::sin((double)theta);
        const double want[2] = {x1 * c - x2 * s, x1 * s + x2 * c};
        const int at[2] = {(h * L + l) * D + i, (h * L + l) * D + HALF + i};
        for (int k = 0; k < 2; k++) {
          checks++;
          const double got = emu_float(out[at[k]]);
          if (std::fabs(got - want[k]) > std::fabs(want[k]) * tol + (std::fabs(x1) + std::fabs(x2)) * (tol + 1e-6) && bad++ < 5)
            printf("out[%d] = %.9g, want %.9g\n", at[k], got, want[k]);
        }
      }
      // Backward.
      std::vector<double> g1(HALF), g2(HALF);
      double swgx = 0, sabs = 0;
      for (int i = 0; i < HALF; i++) {
        const float theta = pos * (float)(1.0 / freqs[i]);
        const double c = std::cos((double)theta), s = std::sin((double)theta);
        const double u1 = emu_float(g[(h * L + l) * D + i]), u2 = emu_float(g[(h * L + l) * D + HALF + i]);
        g1[i] = u2 * s + u1 * c;
        g2[i] = u2 * c - u1 * s;
        const double t1 = emu_float(w[i]) * g1[i] * emu_float(x[row * D + i]);
        const double t2 = emu_float(w[HALF + i]) * g2[i] * emu_float(x[row * D + HALF + i]);
        swgx += t1 + t2;
        sabs += std::fabs(t1) + std::fabs(t2);
      }
      const double n3 = nn * nn * nn;
      for (int c = 0; c < D; c++) {
        const double gp = c < HALF ? g1[c] : g2[c - HALF], xv = emu_float(x[row * D + c]), wv = emu_float(w[c]);
        const double want = nn * wv * gp - xv * n3 * swgx / D;
        const double mag = nn * std::fabs(wv * gp) + std::fabs(xv) * n3 * sabs / D;
        checks++;
        const double got = emu_float(dx[row * D + c]);
        if (std::fabs(got - want) > std::fabs(want) * tol + mag / (1 << 18) && bad++ < 5)
          printf("dx[%d] = %.9g, want %.9g (mag %g)\n", row * D + c, got, want, mag);
      }
    }
  printf("checks %d bad %d\n", checks, bad);
  return bad != 0;
}
