// The expert-order kernel (emu_kernel.h: kernels.ExpertOrderSource inside a C++ function
// template) run on the CPU emulation for N_ ids among E_ experts, drawn skewed (every
// SKIP_th expert left empty, a few experts taking most pairs) and, with OUT_ set, a few
// outside [0, E) (the kernel clamps them): order must be the stable argsort of the
// clamped ids (std::stable_sort) and inverse its inverse, exactly. Prints
// "checks C bad B"; exits 1 on any bad value.
#include "emu_kernel.h"
#include <algorithm>
#include <cstdio>
#include <numeric>
#include <random>
constexpr int N = N_, E = E_;
int main() {
  std::mt19937 rng(17);
  std::vector<int32_t> idx(N), order(N, -7), inverse(N, -7);
  std::uniform_int_distribution<int> any(0, E - 1), hot(0, std::max(E / 8, 1) - 1);
  for (int i = 0; i < N; i++) {
    int e = rng() % 3 == 0 ? any(rng) : hot(rng);
    if (E > 2 && e % 5 == 4) e = (e + 1) % E;  // experts 4, 9, … stay empty
    idx[i] = e;
  }
  if (OUT_)
    for (int i = 0; i < N; i += 13) idx[i] = i % 2 ? E + i : -1 - i;
  Shape s{};
  s.d[0] = N;
  launch(1, 1024, [&] { body<E>(idx.data(), s, order.data(), inverse.data()); });
  std::vector<int32_t> want(N);
  std::iota(want.begin(), want.end(), 0);
  auto clamp = [](int v) { return std::min(std::max(v, 0), E - 1); };
  std::stable_sort(want.begin(), want.end(), [&](int a, int b) { return clamp(idx[a]) < clamp(idx[b]); });
  int checks = 0, bad = 0;
  for (int p = 0; p < N; p++) {
    checks += 2;
    if (order[p] != want[p] && bad++ < 5) printf("order[%d] = %d, want %d\n", p, order[p], want[p]);
    if (inverse[want[p]] != p && bad++ < 5) printf("inverse[%d] = %d, want %d\n", want[p], inverse[want[p]], p);
  }
  printf("checks %d bad %d\n", checks, bad);
  return bad != 0;
}
