package kernels

// RMSNormBackwardSource is the input gradient of y = x·rsqrt(mean(x²) + eps)·w over the
// last axis: dx = n·w·g − x·n³·mean(w·g·x), n = rsqrt(mean(x²) + eps), for x and g
// [..., D] and w [D] of one type T (bfloat16 or float32), with float32 sums and one
// rounding to T — MLX-CUDA's rms_norm VJP's arithmetic in another summation order. It
// leaves out what MLX's VJP always adds and a LoRA step never uses: the weight's
// gradient, g·x·n for every element and then a column reduction, one more launch for
// each norm (a real 26B-A4B layer has nine of them, ~90 µs; bench/results/gpu-s15.txt).
//
// MLX declares x, x_shape, x_ndim, w, g and dx, and the template constants T and EPS (the
// bits of eps as a float32). D must be a multiple of 8: each thread reads 8 consecutive
// elements at a time (16-byte accesses where aligned: LoRAHeader's dg_load8). Launch:
// blocks of 128 threads; a row of D ≥ 1024 takes a block (grid: rows·128 threads), a
// shorter one a warp (grid: ⌈rows/4⌉·128). Include LoRAHeader before it.
const RMSNormBackwardSource = `
  const int D = x_shape[x_ndim - 1];
  int rows = 1;
  for (int i = 0; i + 1 < x_ndim; i++) rows *= x_shape[i];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  // A long row takes the block's 4 warps; short rows take one warp each (the choice is
  // the block's, so the block-wide sum below is reached by every thread or by none).
  const bool wide = D >= 1024;
  const int row = wide ? (int)blockIdx.x : (int)blockIdx.x * 4 + warp;
  const int t0 = wide ? (int)threadIdx.x : lane, step = wide ? 128 : 32;
  if (row >= rows) return;
  const T* xr = x + (size_t)row * D;
  const T* gr = g + (size_t)row * D;
  T* out = dx + (size_t)row * D;
  float s[2] = {0.0f, 0.0f};  // Σ w·g·x, Σ x²
  for (int c = 8 * t0; c < D; c += 8 * step) {
    float xv[8], gv[8], wv[8];
    dg_load8(xr + c, xv);
    dg_load8(gr + c, gv);
    dg_load8(w + c, wv);
#pragma unroll
    for (int e = 0; e < 8; e++) {
      s[0] += wv[e] * gv[e] * xv[e];
      s[1] += xv[e] * xv[e];
    }
  }
  __shared__ float red[4 * 2], tot[2];
  if (wide) {
    dg_block_sum<2, 4>(s, red, tot);
    s[0] = tot[0];
    s[1] = tot[1];
  } else {
    dg_warp_sum<2>(s);
  }
  const float meangwx = s[0] / D;
  const float n = rsqrtf(s[1] / D + __int_as_float(EPS));
  const float n3 = n * n * n;
  for (int c = 8 * t0; c < D; c += 8 * step) {
    float xv[8], gv[8], wv[8], o[8];
    dg_load8(xr + c, xv);
    dg_load8(gr + c, gv);
    dg_load8(w + c, wv);
#pragma unroll
    for (int e = 0; e < 8; e++) o[e] = n * wv[e] * gv[e] - xv[e] * meangwx * n3;
    dg_store8(o, out + c);
  }
`
