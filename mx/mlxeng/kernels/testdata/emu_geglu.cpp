// The GeGLU kernels (emu_kernel.h: kernels.LoRAHeader, GeGLUHeader and the three kernel
// bodies inside C++ function templates) run on the CPU emulation for ROWS_ rows of I_
// outputs in bfloat16, every input SHIFT_ elements off the 16-byte boundary:
//   - the forward, split (one [ROWS, 2I] input) and not (gate and up), against
//     MLX's composition rounded op by op from double arithmetic (tanh from tanhf, as
//     MLX's bfloat16 tanh is): every value must be equal, bit for bit;
//   - both backwards against the float64 derivative: each value may be off by
//     bfloat16's rounding of the result (2⁻⁸ relative) plus float32 rounding of the
//     terms' magnitudes (times 2⁻¹⁸).
// Prints "checks C bad B"; exits 1 on any bad value.
#include "emu_kernel.h"
#include <cmath>
#include <cstdio>
#include <random>
using T = __nv_bfloat16;
constexpr int ROWS = ROWS_, I = I_, SHIFT = SHIFT_;
static float rb(double v) { return __bfloat162float(__float2bfloat16((float)v)); }
// composition is mlxeng's geluTanh(x)·u, each op rounded to bfloat16.
static float composition(float x, float u) {
  const float a = rb(0.044715f), c = rb(0.7978845608028654f);
  const float sq = rb((double)x * x), cube = rb((double)sq * x), ac = rb((double)cube * a);
  const float sum = rb((double)x + ac), inner = rb((double)sum * c);
  const float th = rb(tanhf(inner)), half = rb((double)x * 0.5), one = rb((double)th + 1.0);
  return rb((double)rb((double)half * one) * u);
}
int main() {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> un(-1, 1);
  const int n = ROWS * I;
  std::vector<T> xb(2 * n + SHIFT), gateb(n + SHIFT), upb(n + SHIFT), gb(n + SHIFT), outs(n + SHIFT), outp(n + SHIFT),
      dxb(2 * n + SHIFT), dgb(n + SHIFT), dub(n + SHIFT);
  T *x = xb.data() + SHIFT, *gate = gateb.data() + SHIFT, *up = upb.data() + SHIFT, *g = gb.data() + SHIFT;
  T *out_split = outs.data() + SHIFT, *out_pair = outp.data() + SHIFT, *dx = dxb.data() + SHIFT;
  T *dgate = dgb.data() + SHIFT, *dup = dub.data() + SHIFT;
  // Gates from −6 to 6 (both tails of the tanh), ups and cotangents in [−1, 1].
  for (int r = 0; r < ROWS; r++)
    for (int c = 0; c < I; c++) {
      const int i = r * I + c;
      gate[i] = x[r * 2 * I + c] = emu_to<T>(6.0f * un(rng));
      up[i] = x[r * 2 * I + I + c] = emu_to<T>(un(rng));
      g[i] = emu_to<T>(un(rng));
    }
  for (int i = 0; i < n; i++) out_split[i] = out_pair[i] = dgate[i] = dup[i] = emu_to<T>(777.0f);
  for (int i = 0; i < 2 * n; i++) dx[i] = emu_to<T>(777.0f);
  Shape s2{}, s1{};
  s2.d[0] = s1.d[0] = ROWS;
  s2.d[1] = 2 * I;
  s1.d[1] = I;
  const int blocks = (n / 8 + 255) / 256;
  launch(blocks, 256, [&] { fwd_body<T, true>(x, s2, 2, x, out_split); });
  launch(blocks, 256, [&] { fwd_body<T, false>(gate, s1, 2, up, out_pair); });
  launch(blocks, 256, [&] { bwd_split_body<T>(x, s2, 2, g, dx); });
  launch(blocks, 256, [&] { bwd_body<T>(gate, s1, 2, up, g, dgate, dup); });
  int checks = 0, bad = 0;
  auto check = [&](const char* what, int i, double got, double want, double tol) {
    checks++;
    if (!(fabs(got - want) <= tol) && bad++ < 5) printf("%s[%d] = %.9g, want %.9g (tol %g)\n", what, i, got, want, tol);
  };
  const double c = 0.7978845608028654, a = 0.044715;
  for (int r = 0; r < ROWS; r++)
    for (int col = 0; col < I; col++) {
      const int i = r * I + col;
      const double xv = emu_float(gate[i]), uv = emu_float(up[i]), gv = emu_float(g[i]);
      const double want = composition(xv, uv);
      check("out_split", i, emu_float(out_split[i]), want, 0);
      check("out_pair", i, emu_float(out_pair[i]), want, 0);
      const double s = 1 / (1 + exp(-2 * c * (xv + a * xv * xv * xv))), q = 2 * c * (1 + 3 * a * xv * xv);
      const double wg = gv * uv * (s + xv * s * (1 - s) * q), wu = gv * xv * s;
      const double mg = fabs(gv * uv) * (s + fabs(xv * s * (1 - s) * q)), mu = fabs(gv * xv * s);
      check("dx_gate", i, emu_float(dx[r * 2 * I + col]), wg, fabs(wg) / 256 + mg / (1 << 18));
      check("dx_up", i, emu_float(dx[r * 2 * I + I + col]), wu, fabs(wu) / 256 + mu / (1 << 18));
      check("dgate", i, emu_float(dgate[i]), wg, fabs(wg) / 256 + mg / (1 << 18));
      check("dup", i, emu_float(dup[i]), wu, fabs(wu) / 256 + mu / (1 << 18));
    }
  printf("checks %d bad %d\n", checks, bad);
  return bad != 0;
}
