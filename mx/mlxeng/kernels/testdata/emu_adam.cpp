// The multi-tensor AdamW kernel (emu_kernel.h: kernels.AdamHeader and AdamSource inside a
// C++ function the test writes, with launch_all running its threads one by one) on the
// CPU emulation: reads the learning rate and each tensor's p, g, m, v (float32, little
// endian) from argv[1] and writes each tensor's new p, m, v to argv[2], for the test to
// compare with the go engine's composition.
#include "emu_kernel.h"
#include <cstdio>
int main(int argc, char** argv) {
  if (argc != 3) return 2;
  FILE* in = fopen(argv[1], "rb");
  if (!in) return 2;
  size_t total = 0;
  for (size_t n : sizes) total += n;
  std::vector<float> data(1 + 4 * total), out(3 * total);
  if (fread(data.data(), 4, data.size(), in) != data.size()) return 2;
  fclose(in);
  // inputs: lr, then p, g, m, v of every tensor in turn; outputs: p, m, v of every tensor
  std::vector<const float*> ins;
  std::vector<float*> outs;
  size_t off = 1, o = 0;
  for (size_t n : sizes) {
    for (int k = 0; k < 4; k++) ins.push_back(data.data() + off + k * n);
    for (int k = 0; k < 3; k++) outs.push_back(out.data() + o + k * n);
    off += 4 * n, o += 3 * n;
  }
  launch_all(data.data(), ins.data(), outs.data(), (total + 255) / 256);
  FILE* f = fopen(argv[2], "wb");
  if (!f || fwrite(out.data(), 4, out.size(), f) != out.size()) return 2;
  fclose(f);
  return 0;
}
