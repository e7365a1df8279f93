package kernels

// NormRoPEHeader is included after LoRAHeader (for dg_warp_sum and dg_round) and before the two
// NormRoPE kernels: the rotation of one pair of a row.
//
// The attention's queries and keys are each a projection x [B, L, H, D] normed over D
// with a weight (RMSNorm), moved to [B, H, L, D] and rotated (RoPE, not traditional: pair
// i is (i, i + D/2), turned by (offset + l)·scale/freqs[i]). As MLX ops that is rms_norm,
// then rope on the transposed view: two launches forward and two backward (rope's VJP
// and the norm's input gradient) for each of q and k, and MLX-CUDA's rope recomputes each
// pair's sine and cosine for every head. The kernels take a row (b, l, h) a warp, both
// ways.
//
// Forward, as MLX computes it: n = rsqrt(Σx²/D + eps) in float32 (summed in another
// order than MLX's block reduction, so n may differ in its last bit), the normed value
// rounded to T and multiplied by w in T (MLX's rms_norm: w·T(x·n)), then the rotation in
// float32 of those values with θ = (scale·(offset + l))·(1/freqs[i]) (1/freqs in double,
// as MLX's rope_freqs), cosine and sine of θ, rounded once to T.
//
// Backward: the cotangent g [B, H, L, D] turned back by −θ (MLX's rope VJP) and the
// norm's input gradient of that, dx = n·w·g′ − x·n³·mean(w·g′·x) (RMSNormBackwardSource's
// arithmetic), all in float32 with one rounding at the end — where the composition rounds
// g′ to T in between.
const NormRoPEHeader = `
__device__ __forceinline__ float dg_val(float v) { return v; }
__device__ __forceinline__ float dg_val(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ void dg_put(float v, float* p) { *p = v; }
__device__ __forceinline__ void dg_put(float v, __nv_bfloat16* p) { *p = __float2bfloat16_rn(v); }
__device__ __forceinline__ void dg_rope_angle(const float* freqs, int i, float pos, float& c, float& s) {
  const float inv = 1.0 / freqs[i];
  const float theta = pos * inv;
  c = cos(theta);
  s = sin(theta);
}
`

// NormRoPEForwardSource is out [B, H, L, D] = RoPE(Transpose(RMSNorm(x, w, eps))) for x
// [B, L, H, D] and w [D] of type T (bfloat16 or float32) and freqs [D/2] float32
// (NormRoPEHeader). MLX declares x, x_shape, w, freqs and out, and the template
// constants T, EPS (eps's float32 bits), OFFSET (the first position) and SCALE (the
// positions' scale's float32 bits). D must be a multiple of 64 (a lane takes D/64 values
// of each half). Launch: blocks of 128 threads, a warp a row: grid ⌈B·L·H/4⌉·128.
const NormRoPEForwardSource = `
  const int B = x_shape[0], L = x_shape[1], H = x_shape[2], D = x_shape[3];
  const int half = D / 2, per = half / 32;  // values of each half a lane takes
  const int row = (int)blockIdx.x * 4 + (int)threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row >= B * L * H) return;
  const int h = row % H, l = (row / H) % L, b = row / (H * L);
  const T* xr = x + (size_t)row * D;
  T* o = out + (((size_t)b * H + h) * L + l) * D;
  float a[16], c2[16];  // this lane's values of the first half, then of the second (per ≤ 16)
  float ss[1] = {0.0f};
  for (int j = 0; j < per; j++) {
    a[j] = dg_val(xr[lane * per + j]);
    c2[j] = dg_val(xr[half + lane * per + j]);
    ss[0] += a[j] * a[j] + c2[j] * c2[j];
  }
  dg_warp_sum<1>(ss);
  const float n = rsqrtf(ss[0] / D + __int_as_float(EPS));
  const float pos = __int_as_float(SCALE) * (float)(OFFSET + l);
  for (int j = 0; j < per; j++) {
    const int i = lane * per + j;
    T* const rt = nullptr;  // dg_round's type tag
    const float x1 = dg_round(dg_val(w[i]) * dg_round(a[j] * n, rt), rt);
    const float x2 = dg_round(dg_val(w[half + i]) * dg_round(c2[j] * n, rt), rt);
    float c, s;
    dg_rope_angle(freqs, i, pos, c, s);
    dg_put(x1 * c - x2 * s, o + i);
    dg_put(x1 * s + x2 * c, o + half + i);
  }
`

// NormRoPEBackwardSource is the input gradient of NormRoPEForwardSource: from x, w,
// freqs and the cotangent g [B, H, L, D], dx [B, L, H, D] (NormRoPEHeader's backward).
// MLX declares x, x_shape, w, freqs, g and dx, and T, EPS, OFFSET and SCALE as the
// forward's. Launch as the forward.
const NormRoPEBackwardSource = `
  const int B = x_shape[0], L = x_shape[1], H = x_shape[2], D = x_shape[3];
  const int half = D / 2, per = half / 32;
  const int row = (int)blockIdx.x * 4 + (int)threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row >= B * L * H) return;
  const int h = row % H, l = (row / H) % L, b = row / (H * L);
  const T* xr = x + (size_t)row * D;
  const T* gr = g + (((size_t)b * H + h) * L + l) * D;
  T* o = dx + (size_t)row * D;
  const float pos = __int_as_float(SCALE) * (float)(OFFSET + l);
  float a[16], c2[16], g1[16], g2[16];
  float s2[2] = {0.0f, 0.0f};  // Σ w·g′·x, Σ x²
  for (int j = 0; j < per; j++) {
    const int i = lane * per + j;
    a[j] = dg_val(xr[i]);
    c2[j] = dg_val(xr[half + i]);
    float c, s;
    dg_rope_angle(freqs, i, pos, c, s);
    const float u1 = dg_val(gr[i]), u2 = dg_val(gr[half + i]);
    g1[j] = u2 * s + u1 * c;  // turned back by −θ, as MLX's rope VJP
    g2[j] = u2 * c - u1 * s;
    s2[0] += dg_val(w[i]) * g1[j] * a[j] + dg_val(w[half + i]) * g2[j] * c2[j];
    s2[1] += a[j] * a[j] + c2[j] * c2[j];
  }
  dg_warp_sum<2>(s2);
  const float meangwx = s2[0] / D;
  const float n = rsqrtf(s2[1] / D + __int_as_float(EPS));
  const float n3 = n * n * n;
  for (int j = 0; j < per; j++) {
    const int i = lane * per + j;
    dg_put(n * dg_val(w[i]) * g1[j] - a[j] * meangwx * n3, o + i);
    dg_put(n * dg_val(w[half + i]) * g2[j] - c2[j] * meangwx * n3, o + half + i);
  }
`
