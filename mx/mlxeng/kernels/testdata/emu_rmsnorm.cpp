// The rms_norm input-gradient kernel (emu_kernel.h: kernels.LoRAHeader and
// RMSNormBackwardSource inside a C++ function template) run on the CPU emulation for
// ROWS_ rows of D_ values of type T_, x, w and g SHIFT_ elements off the 16-byte
// boundary, against float64: dx = n·w·g − x·n³·mean(w·g·x), n = rsqrt(mean(x²) + eps), of
// the same T values. Each value may be off by T's rounding of the result (bfloat16 2⁻⁸,
// float32 2⁻²³ relative) plus float32 rounding of the sums' magnitudes
// (n·|w·g| + |x|·n³·mean|w·g·x|, times 2⁻¹⁸). Prints "checks C bad B"; exits 1 on any bad value.
#include "emu_kernel.h"
#include <cmath>
#include <cstdio>
#include <random>
using T = T_;
constexpr int ROWS = ROWS_, D = D_, SHIFT = SHIFT_;
int main() {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<T> xb(ROWS * D + SHIFT), gb(ROWS * D + SHIFT), wb(D + SHIFT), db(ROWS * D + SHIFT);
  T *x = xb.data() + SHIFT, *g = gb.data() + SHIFT, *w = wb.data() + SHIFT, *dx = db.data() + SHIFT;
  // Rows of different scales, so the normalizer matters.
  for (int r = 0; r < ROWS; r++)
    for (int c = 0; c < D; c++) x[r * D + c] = emu_to<T>((r % 3 + 1) * 0.7f * u(rng));
  for (int i = 0; i < ROWS * D; i++) g[i] = emu_to<T>(u(rng));
  for (int c = 0; c < D; c++) w[c] = emu_to<T>(1.0f + 0.5f * u(rng));
  for (int i = 0; i < ROWS * D; i++) dx[i] = emu_to<T>(777.0f);
  const float eps = 1e-6f;
  Shape xs{};
  xs.d[0] = ROWS;
  xs.d[1] = D;
  const bool wide = D >= 1024;
  launch(wide ? ROWS : (ROWS + 3) / 4, 128, [&] { body<T, EPS_>(x, xs, 2, w, g, dx); });
  const double tol = sizeof(T) == 2 ? 1.0 / 256 : 1.0 / (1 << 23);
  int checks = 0, bad = 0;
  for (int r = 0; r < ROWS; r++) {
    double sxx = 0, sgwx = 0, sabs = 0;
    for (int c = 0; c < D; c++) {
      double xv = emu_float(x[r * D + c]), gv = emu_float(g[r * D + c]), wv = emu_float(w[c]);
      sxx += xv * xv;
      sgwx += wv * gv * xv;
      sabs += fabs(wv * gv * xv);
    }
    const double n = 1 / std::sqrt(sxx / D + eps), n3 = n * n * n;
    for (int c = 0; c < D; c++) {
      double xv = emu_float(x[r * D + c]), gv = emu_float(g[r * D + c]), wv = emu_float(w[c]);
      double want = n * wv * gv - xv * n3 * sgwx / D;
      double got = emu_float(dx[r * D + c]);
      double mag = n * fabs(wv * gv) + fabs(xv) * n3 * sabs / D;
      checks++;
      if (fabs(got - want) > fabs(want) * tol + mag / (1 << 18) && bad++ < 5)
        printf("dx[%d,%d] = %.9g, want %.9g (mag %g)\n", r, c, got, want, mag);
    }
  }
  printf("checks %d bad %d\n", checks, bad);
  return bad != 0;
}
