// The dequantize kernel (emu_kernel.h: kernels.DequantizeHeader and DequantizeSource
// inside a C++ function) run on the CPU emulation for a weight of shape argv[1..] with
// T = T_, BITS = BITS_, GS = GS_, against the go engine's arithmetic written out here:
// q·scale, then + bias, each rounded to float32, then rounded to T. Prints "values V bad
// B"; exits 1 if any value differs in a bit.
#include "emu_kernel.h"
#include <cstdio>
#include <cstdlib>
#include <random>
using T = T_;
static float tof(T v) { return emu_float(v); }
static T fromf(float v) { return emu_to<T>(v); }
int main(int argc, char** argv) {
  Shape sh{};
  int ndim = argc - 1;
  size_t n = 1;
  for (int i = 0; i < ndim; i++) { sh.d[i] = atoi(argv[i + 1]); n *= sh.d[i]; }
  const size_t cols = sh.d[ndim - 1] * (32 / BITS_), values = n * (32 / BITS_);
  // EMU_SHIFT=1 passes w one word into its buffer, off the 16-byte boundary.
  const int shift = getenv("EMU_SHIFT") && atoi(getenv("EMU_SHIFT")) ? 1 : 0;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<uint32_t> wbuf(n + shift);
  for (auto& v : wbuf) v = rng();
  const uint32_t* w = wbuf.data() + shift;
  std::vector<T> sc(values / GS_), bi(values / GS_), out(values, fromf(777));
  for (auto& v : sc) v = fromf(0.37f * u(rng));
  for (auto& v : bi) v = fromf(u(rng));
  const int blocks = (n / 4 + 255) / 256;
  for (int bx = 0; bx < blocks; bx++)
    for (int tx = 0; tx < 256; tx++) {
      threadIdx = {tx, 0, 0};
      blockIdx = {bx, 0, 0};
      blockDim = {256, 1, 1};
      body<T, BITS_, GS_>(w, sh, ndim, sc.data(), bi.data(), out.data());
    }
  int bad = 0;
  for (size_t i = 0; i < values; i++) {
    uint32_t q = (w[i / (32 / BITS_)] >> (BITS_ * (i % (32 / BITS_)))) & ((1u << BITS_) - 1);
    volatile float p = float(q) * tof(sc[i / GS_]);
    volatile float sum = p + tof(bi[i / GS_]);
    T want = fromf(sum);
    if (memcmp(&want, &out[i], sizeof(T)) != 0 && bad++ < 5)
      printf("out[%zu] (row %zu col %zu) = %g, want %g\n", i, i / cols, i % cols, tof(out[i]), tof(want));
  }
  printf("values %zu bad %d\n", values, bad);
  return bad != 0;
}
