// The row kernels (emu_kernel.h: kernels.RowsHeader, GatherRowsSource and
// ScatterRowsSource inside C++ function templates) run on the CPU emulation with data of
// type T = T_ against references written out here, bit for bit: the gather copies rows
// (zeros for an index out of range), the scatter adds each row of g to its row of out,
// rounded to T after each add, in launch order (the emulation runs the threads one at a
// time). Prints "checks C bad B"; exits 1 on any bad value.
#include "emu_kernel.h"
#include <cstdio>
#include <random>
using T = T_;
static float tof(T v) { return emu_float(v); }
static T fromf(float v) { return emu_to<T>(v); }
template <typename F> static void seq(int blocks, int threads, F f) {
  for (int b = 0; b < blocks; b++)
    for (int t = 0; t < threads; t++) {
      blockIdx = {b, 0, 0};
      threadIdx = {t, 0, 0};
      blockDim = {threads, 1, 1};
      f();
    }
}
int checks = 0, bad = 0;
static void same(const char* what, int i, float got, float want) {
  checks++;
  if (memcmp(&got, &want, 4) != 0 && bad++ < 5) printf("%s[%d] = %g, want %g\n", what, i, got, want);
}
int main() {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1, 1);
  constexpr int R = 7, H = 300;  // H longer than a block: the strided loops
  std::vector<T> src(R * H);
  for (auto& v : src) v = fromf(u(rng));
  Shape ss{};
  ss.d[0] = R;
  ss.d[1] = H;
  // −1 is the last row, 7 and −8 are out of range; rows 2 and 6 are picked twice
  std::vector<int32_t> idx = {3, 0, -1, 7, 6, -8, 2, 2, 5};
  const int M = idx.size();
  std::vector<T> out(M * H, fromf(777));
  seq(M, 256, [&] { gather_body(src.data(), ss, idx.data(), out.data()); });
  for (int m = 0; m < M; m++) {
    int r = idx[m] < 0 ? idx[m] + R : idx[m];
    for (int h = 0; h < H; h++) same("gather", m * H + h, tof(out[m * H + h]), r >= 0 && r < R ? tof(src[r * H + h]) : 0.0f);
  }
  std::vector<T> g(M * H);
  for (auto& v : g) v = fromf(u(rng));
  Shape gs{};
  gs.d[0] = M;
  gs.d[1] = H;
  std::vector<T> sc(R * H, fromf(0)), want(R * H, fromf(0));
  seq(M, 128, [&] { scatter_body<R>(g.data(), gs, idx.data(), sc.data()); });
  for (int m = 0; m < M; m++) {
    int r = idx[m] < 0 ? idx[m] + R : idx[m];
    if (r < 0 || r >= R) continue;
    for (int h = 0; h < H; h++) want[r * H + h] = fromf(tof(want[r * H + h]) + tof(g[m * H + h]));
  }
  for (int i = 0; i < R * H; i++) same("scatter", i, tof(sc[i]), tof(want[i]));
  printf("checks %d bad %d\n", checks, bad);
  return bad != 0;
}
