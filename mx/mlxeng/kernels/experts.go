package kernels

// ExpertsHeader is included before ExpertsSource.
const ExpertsHeader = "#include <mma.h>\n"

// expertRowRange is the experts kernels' first step: the rows [lo, hi) of the block's
// expert e among the R rows sorted by expert (idx), by two binary searches.
const expertRowRange = `  int lo = 0, hi = R;
  {
    int a = 0, b = R;
    while (a < b) { int m = (a + b) / 2; if ((int)idx[m] < e) a = m + 1; else b = m; }
    lo = a;
    b = R;
    while (a < b) { int m = (a + b) / 2; if ((int)idx[m] <= e) a = m + 1; else b = m; }
    hi = a;
  }
`

// ExpertsSource is the fused experts kernel's body: out [rows, NJ] = x [rows, NC] times
// each row's expert weight — TRANS: x·W[e]ᵀ with W [E, NJ, NC] (the forward), else x·W[e]
// with W [E, NC, NJ] (the input gradient) — W 4-bit affine-quantized in groups of 64
// (w uint32 [E, N, K/8], bfloat16 scales and biases [E, N, K/64]), rows sorted by expert
// (idx [rows], non-decreasing). MLX declares x, w, scales, biases, idx, idx_shape and out,
// and the template constants TRANS, NJ and NC. Launch: grid (NJ/64·128, E, Z) threads in
// blocks of 128; NJ and NC multiples of 64; any Z ≥ 1 (block z takes every Z-th 32-row
// tile of its expert's rows).
//
// Each block owns one expert and 64 output columns and walks that expert's rows (found
// by binary search in idx) 32 at a time, 4 warps of 16 columns each: per 64-long slice of
// the contraction it stores the rows' slice and the weight's 64×64 tile, dequantized —
// q·scale, then + bias, each rounded to bfloat16, as MLX's affine_dequantize does — into
// shared memory and multiplies on tensor cores (WMMA, bfloat16 in, float32 sums). The
// weight is read once per 32-row tile of its expert's rows and never written out.
//
// The next slice's rows, words, scales and biases are loaded into registers while the
// tensor cores work on this one: loaded straight into shared memory, each load waited
// for the store before it (the compiler cannot prove a generic pointer misses shared
// memory), and the first version ran at ~30 TFLOP/s. The tile sits in shared memory as
// the weight lies — [n][k] rows of 8-element words, one 16-byte store per word — and the
// forward reads it as a column-major B.
const ExpertsSource = `
  using namespace nvcuda;
  constexpr int BM = 32, BN = 64, BC = 64, PAD = 8, GS = 64;
  __shared__ __align__(32) __nv_bfloat16 As[BM][BC + PAD];
  __shared__ __align__(32) __nv_bfloat16 Bt[64][64 + PAD];  // TRANS: [j][c], else [c][j]
  // The block's float sums reuse the tile's memory once the last slice is multiplied:
  // 13.8 KB of shared memory a block instead of 22.5, so more blocks fit on an SM.
  static_assert(sizeof(float) * BM * (BN + 4) <= sizeof(Bt), "the sums must fit in the tile");
  float (*Cs)[BN + 4] = reinterpret_cast<float (*)[BN + 4]>(&Bt[0][0]);
  const int R = idx_shape[0];
  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int j0 = blockIdx.x * BN;
  // x may be a row-contiguous view that starts off a 16-byte boundary: 8-wide loads then
  // go element by element.
  const bool x_aligned = (reinterpret_cast<size_t>(x) & 15) == 0;
  const int e = blockIdx.y;
` + expertRowRange + `  if (lo + (int)blockIdx.z * BM >= hi) return;
  constexpr int KLEN = TRANS ? NC : NJ;   // the weight's row length (its K)
  constexpr int NROWS = TRANS ? NJ : NC;  // the weight's rows (its N)
  constexpr int KW = KLEN / 8, KG = KLEN / GS;
  const uint32_t* we = w + (size_t)e * NROWS * KW;
  const __nv_bfloat16* se = scales + (size_t)e * NROWS * KG;
  const __nv_bfloat16* be = biases + (size_t)e * NROWS * KG;
  // This thread's share of a slice: rows' chunks v = tid + 128·i (row v/8, columns
  // (v%8)·8 …+7) and weight words v = tid + 128·i (tile row v/8, word v%8).
  uint4 ra[2];
  uint32_t rw[4];
  __nv_bfloat16 rs[4], rb[4];
  auto load = [&](int m0, int c0) {
    #pragma unroll
    for (int i = 0; i < 2; i++) {
      const int v = tid + 128 * i, r = v / 8, c = (v % 8) * 8;
      if (m0 + r >= hi) { ra[i] = make_uint4(0, 0, 0, 0); continue; }
      const __nv_bfloat16* src = x + (size_t)(m0 + r) * NC + c0 + c;
      if (x_aligned) {
        ra[i] = *reinterpret_cast<const uint4*>(src);
      } else {
        uint32_t h[8];
        #pragma unroll
        for (int t = 0; t < 8; t++) h[t] = __bfloat16_as_ushort(src[t]);
        ra[i] = make_uint4(h[0] | h[1] << 16, h[2] | h[3] << 16, h[4] | h[5] << 16, h[6] | h[7] << 16);
      }
    }
    // The tile's rows are the weight's rows n: the block's columns (TRANS) or the slice.
    const int nbase = TRANS ? j0 : c0, kbase = TRANS ? c0 : j0;
    #pragma unroll
    for (int i = 0; i < 4; i++) {
      const int v = tid + 128 * i, n = nbase + v / 8;
      rw[i] = we[(size_t)n * KW + kbase / 8 + v % 8];
      rs[i] = se[(size_t)n * KG + kbase / GS];
      rb[i] = be[(size_t)n * KG + kbase / GS];
    }
  };
  auto stash = [&]() {
    #pragma unroll
    for (int i = 0; i < 2; i++) {
      const int v = tid + 128 * i;
      *reinterpret_cast<uint4*>(&As[v / 8][(v % 8) * 8]) = ra[i];
    }
    // Two nibbles at a time: 0x4300 | q is the bfloat16 128 + q (exact for q < 16), so
    // one subtraction of 128 gives both q exactly, then q·scale and + bias round per lane
    // as the scalar __hmul/__hadd (and MLX's affine_dequantize) do.
    const __nv_bfloat162 k128 = __float2bfloat162_rn(128.0f);
    #pragma unroll
    for (int i = 0; i < 4; i++) {
      const int v = tid + 128 * i;
      const __nv_bfloat162 s2 = __bfloat162bfloat162(rs[i]), b2 = __bfloat162bfloat162(rb[i]);
      uint32_t h[4];
      #pragma unroll
      for (int t = 0; t < 4; t++) {
        uint32_t pair = rw[i] >> (8 * t);
        pair = (pair & 0xFu) | ((pair & 0xF0u) << 12) | 0x43004300u;
        __nv_bfloat162 q = __hsub2(*reinterpret_cast<const __nv_bfloat162*>(&pair), k128);
        __nv_bfloat162 d = __hadd2(__hmul2(q, s2), b2);
        h[t] = *reinterpret_cast<const uint32_t*>(&d);
      }
      *reinterpret_cast<uint4*>(&Bt[v / 8][(v % 8) * 8]) = make_uint4(h[0], h[1], h[2], h[3]);
    }
  };
  for (int m0 = lo + (int)blockIdx.z * BM; m0 < hi; m0 += (int)gridDim.z * BM) {
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2];
    wmma::fill_fragment(acc[0], 0.0f);
    wmma::fill_fragment(acc[1], 0.0f);
    load(m0, 0);
    for (int c0 = 0; c0 < NC; c0 += BC) {
      stash();
      __syncthreads();
      if (c0 + BC < NC) load(m0, c0 + BC);
      #pragma unroll
      for (int kk = 0; kk < BC; kk += 16) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> af[2];
        wmma::load_matrix_sync(af[0], &As[0][kk], BC + PAD);
        wmma::load_matrix_sync(af[1], &As[16][kk], BC + PAD);
        if (TRANS) {  // B (k, j) = Bt[j][k]
          wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> bf;
          wmma::load_matrix_sync(bf, &Bt[warp * 16][kk], 64 + PAD);
          wmma::mma_sync(acc[0], af[0], bf, acc[0]);
          wmma::mma_sync(acc[1], af[1], bf, acc[1]);
        } else {      // B (k, j) = Bt[k][j]
          wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> bf;
          wmma::load_matrix_sync(bf, &Bt[kk][warp * 16], 64 + PAD);
          wmma::mma_sync(acc[0], af[0], bf, acc[0]);
          wmma::mma_sync(acc[1], af[1], bf, acc[1]);
        }
      }
      __syncthreads();
    }
    wmma::store_matrix_sync(&Cs[0][warp * 16], acc[0], BN + 4, wmma::mem_row_major);
    wmma::store_matrix_sync(&Cs[16][warp * 16], acc[1], BN + 4, wmma::mem_row_major);
    __syncthreads();
    for (int v = tid; v < BM * BN; v += 128) {
      int r = v / BN, j = v % BN;
      if (m0 + r < hi) out[(size_t)(m0 + r) * NJ + j0 + j] = __float2bfloat16(Cs[r][j]);
    }
    __syncthreads();
  }
`
