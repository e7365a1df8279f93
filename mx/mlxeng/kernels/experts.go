package kernels

// ExpertsHeader is included before ExpertsSource.
const ExpertsHeader = "#include <mma.h>\n"

// ExpertsSource is the fused experts kernel's body: out [rows, NJ] = x [rows, NC] times
// each row's expert weight — TRANS: x·W[e]ᵀ with W [E, NJ, NC] (the forward), else x·W[e]
// with W [E, NC, NJ] (the input gradient) — W 4-bit affine-quantized in groups of 64
// (w uint32 [E, N, K/8], bfloat16 scales and biases [E, N, K/64]), rows sorted by expert
// (idx [rows], non-decreasing). MLX declares x, w, scales, biases, idx, idx_shape and out,
// and the template constants TRANS, NJ and NC. Launch: grid (NJ/64·128, E, 1) threads in
// blocks of 128; NJ and NC multiples of 64.
//
// Each block owns one expert and 64 output columns and walks that expert's rows (found
// by binary search in idx) 32 at a time, 4 warps of 16 columns each: per 64-long slice of
// the contraction it loads the rows' slice and dequantizes the weight's 64×64 tile into
// shared memory — q·scale, then + bias, each rounded to bfloat16, as MLX's
// affine_dequantize does — and multiplies on tensor cores (WMMA, bfloat16 in, float32
// sums). The weight is read once per 32-row tile of its expert's rows and never written
// out.
const ExpertsSource = `
  using namespace nvcuda;
  constexpr int BM = 32, BN = 64, BC = 64, PAD = 8, GS = 64;
  __shared__ __align__(32) __nv_bfloat16 As[BM][BC + PAD];
  __shared__ __align__(32) __nv_bfloat16 Bs[BC][BN + PAD];
  __shared__ __align__(32) float Cs[BM][BN + 4];
  const int R = idx_shape[0];
  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int j0 = blockIdx.x * BN;
  // x may be a row-contiguous view that starts off a 16-byte boundary: 8-wide loads then
  // go element by element.
  const bool x_aligned = (reinterpret_cast<size_t>(x) & 15) == 0;
  const int e = blockIdx.y;
  int lo = 0, hi = R;
  {
    int a = 0, b = R;
    while (a < b) { int m = (a + b) / 2; if ((int)idx[m] < e) a = m + 1; else b = m; }
    lo = a;
    b = R;
    while (a < b) { int m = (a + b) / 2; if ((int)idx[m] <= e) a = m + 1; else b = m; }
    hi = a;
  }
  if (lo >= hi) return;
  constexpr int KLEN = TRANS ? NC : NJ;   // the weight's row length (its K)
  constexpr int NROWS = TRANS ? NJ : NC;  // the weight's rows (its N)
  constexpr int KW = KLEN / 8, KG = KLEN / GS;
  const uint32_t* we = w + (size_t)e * NROWS * KW;
  const __nv_bfloat16* se = scales + (size_t)e * NROWS * KG;
  const __nv_bfloat16* be = biases + (size_t)e * NROWS * KG;
  for (int m0 = lo; m0 < hi; m0 += BM) {
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2];
    wmma::fill_fragment(acc[0], 0.0f);
    wmma::fill_fragment(acc[1], 0.0f);
    for (int c0 = 0; c0 < NC; c0 += BC) {
      for (int v = tid; v < BM * BC / 8; v += 128) {
        int r = v / (BC / 8), c = (v % (BC / 8)) * 8;
        if (m0 + r >= hi) {
          *reinterpret_cast<uint4*>(&As[r][c]) = make_uint4(0, 0, 0, 0);
          continue;
        }
        const __nv_bfloat16* src = x + (size_t)(m0 + r) * NC + c0 + c;
        if (x_aligned) {
          *reinterpret_cast<uint4*>(&As[r][c]) = *reinterpret_cast<const uint4*>(src);
        } else {
          for (int t = 0; t < 8; t++) As[r][c + t] = src[t];
        }
      }
      for (int v = tid; v < BC * BN / 8; v += 128) {
        int c, j, n, word_at, g;
        if (TRANS) {  // Bs[c][j] = W[e, j0 + j, c0 + c]
          j = v / (BC / 8); c = (v % (BC / 8)) * 8;
          n = j0 + j; word_at = (c0 + c) / 8; g = (c0 + c) / GS;
        } else {      // Bs[c][j] = W[e, c0 + c, j0 + j]
          c = v / (BN / 8); j = (v % (BN / 8)) * 8;
          n = c0 + c; word_at = (j0 + j) / 8; g = (j0 + j) / GS;
        }
        uint32_t word = we[(size_t)n * KW + word_at];
        __nv_bfloat16 s = se[(size_t)n * KG + g], b = be[(size_t)n * KG + g];
        #pragma unroll
        for (int t = 0; t < 8; t++) {
          __nv_bfloat16 q = __float2bfloat16((float)((word >> (4 * t)) & 0xFu));
          __nv_bfloat16 d = __hadd(__hmul(q, s), b);
          if (TRANS) Bs[c + t][j] = d; else Bs[c][j + t] = d;
        }
      }
      __syncthreads();
      #pragma unroll
      for (int kk = 0; kk < BC; kk += 16) {
        wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> bf;
        wmma::load_matrix_sync(bf, &Bs[kk][warp * 16], BN + PAD);
        #pragma unroll
        for (int mi = 0; mi < 2; mi++) {
          wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> af;
          wmma::load_matrix_sync(af, &As[mi * 16][kk], BC + PAD);
          wmma::mma_sync(acc[mi], af, bf, acc[mi]);
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
