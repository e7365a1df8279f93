package kernels

// ExpertsMMAHeader is included before ExpertsMMASource: one tensor-core instruction,
// D += A·B for a 16×16 bfloat16 A, a 16×8 bfloat16 B and float32 sums (PTX mma.sync
// m16n8k16, sm_80 and later). Each of a warp's 32 lanes (g = lane/4, t = lane%4) holds
// a0 = A[g][2t, 2t+1], a1 = A[g+8][2t, 2t+1], a2 = A[g][2t+8, 2t+9], a3 = A[g+8][2t+8, 2t+9],
// b0 = B[2t, 2t+1][g], b1 = B[2t+8, 2t+9][g] (two bfloat16 a register, the lower index in
// the low half) and d = D[g][2t, 2t+1], D[g+8][2t, 2t+1]. The CPU emulation
// (testdata/emu_prelude.h) defines the same function from that description.
const ExpertsMMAHeader = `
__device__ __forceinline__ void dg_mma16816(float* d, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                            uint32_t b0, uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
`

// ExpertsMMASource computes what ExpertsSource does — out [rows, NJ] = x [rows, NC] times
// each row's expert weight, TRANS x·W[e]ᵀ (W [E, NJ, NC]) or else x·W[e] (W [E, NC, NJ]),
// W 4-bit affine in groups of 64, rows sorted by expert (idx) — with the same inputs,
// template constants, launch (grid (NJ/64·128, E, Z), blocks of 128) and dequantized
// weight values, but without a shared-memory tile or a barrier in its loop: on the H200
// the first kernel was bound by shared-memory traffic (the rows' slice read by each of
// 4 warps, the dequantized tile written and read again; ncu: L1/TEX 76 %) and by its two
// barriers a slice, and a cp.async pipeline in front of it did not help
// (bench/results/gpu-s13.txt).
//
// Each warp owns 16 of the block's 64 columns and a 32-row tile, and walks the
// contraction 32 at a time through mma.sync (ExpertsMMAHeader), its operands built in
// registers:
//   - the sum's order is free, so a lane's logical k (2t, 2t+1, 2t+8, 2t+9 of a 16-step)
//     is mapped to 4 contiguous physical k: of the 32, lane t takes 8t … 8t+7, the first
//     four in step 0 and the last four in step 1. A row's 8 values are then one 16-byte
//     load, and in the forward the same 8 k of a weight row are one packed word;
//   - the weight is dequantized in registers, two values a 32-bit register, as the first
//     kernel does (0x4300 | q is the bfloat16 128 + q; minus 128, times the scale, plus
//     the bias, each rounded to bfloat16): the same weight values, summed in float32 in
//     another order;
//   - in the forward a register's two values are neighbours in one packed word; in the
//     input gradient (W's rows are the contraction, packed along the output) they are
//     one column of two rows, each with its own scale and bias. There the order of the
//     output columns is free too: tile n's column g is the warp's physical column
//     8·(g/4) + 2·(g%4) + n, so a lane reads one word a weight row (not two) and finds
//     its two columns in one byte of it, and one byte permute pairs two rows' bytes
//     (session 17; it read both words of the warp's columns and unpacked each value on
//     its own);
//   - the next 32-slice's rows and words are loaded into registers while this one's
//     products run.
//
// The scales and biases the block needs (NC of each) are copied to shared memory once,
// the only barrier: x's rows, read by the block's 4 warps, come through L1.
//
// Measured on the H200 (bench/results/gpu-s15.txt): the forward is 12 % faster than the
// first kernel; the input gradient 1.6× slower — 118 registers a thread (25 %
// occupancy), bound by L1 — so the engine's default route takes this kernel forward
// only (mlxeng's chooseExpertsRoute). Session 17's column order (one word and one permute
// for two rows) left it where it was (BenchmarkFusedExperts, gate_up: forward + input
// gradient 1224 µs against 1205 before; WMMA's 1020; bench/results/gpu-s17.txt), so
// its unpacking was not what bounds it.
const ExpertsMMASource = `
  constexpr int GS = 64;
  constexpr int KLEN = TRANS ? NC : NJ;   // the weight's row length (its K)
  constexpr int KW = KLEN / 8, KG = KLEN / GS;
  constexpr int NROWS = TRANS ? NJ : NC;  // the weight's rows (its N)
  // TRANS: the block's 64 weight rows' groups, [n][group]; else one group of each of the NC rows.
  __shared__ __align__(16) __nv_bfloat16 Ss[NC], Bs[NC];
  const int R = idx_shape[0];
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int g = lane / 4, t4 = lane % 4;
  const int j0 = blockIdx.x * 64;
  const int jw = j0 + warp * 16;  // the warp's first column
  const int e = blockIdx.y;
` + expertRowRange + `  if (lo + (int)blockIdx.z * 32 >= hi) return;
  const uint32_t* we = w + (size_t)e * NROWS * KW;
  const __nv_bfloat16* se = scales + (size_t)e * NROWS * KG;
  const __nv_bfloat16* be = biases + (size_t)e * NROWS * KG;
  for (int i = tid; i < NC; i += 128) {
    const size_t gi = TRANS ? (size_t)j0 * KG + i : (size_t)i * KG + j0 / GS;
    Ss[i] = se[gi];
    Bs[i] = be[gi];
  }
  __syncthreads();
  // x may be a view off its 16-byte boundary: wide loads then go a value at a time.
  const bool x_aligned = (reinterpret_cast<size_t>(x) & 15) == 0;
  // One 32-slice's operands: xs[m][h] is row m0 + 16m + g + 8h's 8 values at k0 + 8·t4;
  // TRANS: wt[n] is tile n's row jw + 8n + g, word (k0 + 8·t4)/8;
  // else: wr[i] is row k0 + 8·t4 + i's word of columns jw + 8·(g/4) … +7, whose byte g%4
  // holds this lane's two columns (below).
  struct Slice { uint4 xs[2][2]; uint32_t wt[2]; uint32_t wr[8]; };
  auto load = [&](Slice& f, int m0, int k0) {
    #pragma unroll
    for (int m = 0; m < 2; m++)
      #pragma unroll
      for (int h = 0; h < 2; h++) {
        const int r = m0 + 16 * m + g + 8 * h;
        if (r >= hi) { f.xs[m][h] = make_uint4(0, 0, 0, 0); continue; }
        const __nv_bfloat16* src = x + (size_t)r * NC + k0 + 8 * t4;
        if (x_aligned) {
          f.xs[m][h] = *reinterpret_cast<const uint4*>(src);
        } else {
          uint32_t v[8];
          #pragma unroll
          for (int q = 0; q < 8; q++) v[q] = __bfloat16_as_ushort(src[q]);
          f.xs[m][h] = make_uint4(v[0] | v[1] << 16, v[2] | v[3] << 16, v[4] | v[5] << 16, v[6] | v[7] << 16);
        }
      }
    if (TRANS) {
      #pragma unroll
      for (int n = 0; n < 2; n++) f.wt[n] = we[(size_t)(jw + 8 * n + g) * KW + k0 / 8 + t4];
    } else {
      #pragma unroll
      for (int i = 0; i < 8; i++) f.wr[i] = we[(size_t)(k0 + 8 * t4 + i) * KW + jw / 8 + g / 4];
    }
  };
  const __nv_bfloat162 k128 = __float2bfloat162_rn(128.0f);
  // Not TRANS: byte g%4 of the first word into bytes 0 and 1, of the second into 2 and 3.
  const uint32_t wb = g % 4, wsel = wb | wb << 4 | (4 + wb) << 8 | (4 + wb) << 12;
  // q holds two 4-bit values in its low nibbles of the low and high halves.
  auto dequant = [&](uint32_t q, __nv_bfloat162 s2, __nv_bfloat162 b2) {
    q |= 0x43004300u;
    __nv_bfloat162 d = __hadd2(__hmul2(__hsub2(*reinterpret_cast<const __nv_bfloat162*>(&q), k128), s2), b2);
    return *reinterpret_cast<const uint32_t*>(&d);
  };
  auto half = [](const uint4& v, int i) { return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w; };
  for (int m0 = lo + (int)blockIdx.z * 32; m0 < hi; m0 += (int)gridDim.z * 32) {
    float acc[2][2][4];
    #pragma unroll
    for (int m = 0; m < 2; m++)
      #pragma unroll
      for (int n = 0; n < 2; n++)
        #pragma unroll
        for (int q = 0; q < 4; q++) acc[m][n][q] = 0.0f;
    auto compute = [&](const Slice& f, int k0) {
      #pragma unroll
      for (int step = 0; step < 2; step++) {
        uint32_t b[2][2];  // [tile][register]
        #pragma unroll
        for (int n = 0; n < 2; n++) {
          if (TRANS) {
            // Row jw + 8n + g, group k0/64; physical k 8·t4 + 4·step + {0,1} and {2,3}: nibble pairs 2·step and 2·step+1.
            const int sn = (jw - j0 + 8 * n + g) * KG + k0 / GS;
            const __nv_bfloat162 s2 = __bfloat162bfloat162(Ss[sn]), b2 = __bfloat162bfloat162(Bs[sn]);
            #pragma unroll
            for (int p = 0; p < 2; p++) {
              const uint32_t pair = f.wt[n] >> (8 * (2 * step + p));
              b[n][p] = dequant((pair & 0xFu) | ((pair & 0xF0u) << 12), s2, b2);
            }
          } else {
            // Tile n's column g is physical column jw + 8·(g/4) + 2·(g%4) + n: nibble n of byte g%4
            // of this lane's word, of rows k0 + 8·t4 + 4·step + {0,1} and {2,3}. One byte permute
            // puts both rows' bytes in the low byte of each half; a mask (and for n = 1 a shift)
            // leaves the nibbles.
            #pragma unroll
            for (int p = 0; p < 2; p++) {
              const int i = 4 * step + 2 * p, r = k0 + 8 * t4 + i;
              const uint32_t both = __byte_perm(f.wr[i], f.wr[i + 1], wsel);
              b[n][p] = dequant(((n == 0 ? both : both >> 4) & 0x000F000Fu),
                                *reinterpret_cast<const __nv_bfloat162*>(&Ss[r]), *reinterpret_cast<const __nv_bfloat162*>(&Bs[r]));
            }
          }
        }
        #pragma unroll
        for (int m = 0; m < 2; m++)
          #pragma unroll
          for (int n = 0; n < 2; n++)
            dg_mma16816(acc[m][n], half(f.xs[m][0], 2 * step), half(f.xs[m][1], 2 * step),
                        half(f.xs[m][0], 2 * step + 1), half(f.xs[m][1], 2 * step + 1), b[n][0], b[n][1]);
      }
    };
    // Two register sets in turn (NC is a multiple of 64): the next slice loads while this one multiplies.
    Slice sa, sb;
    load(sa, m0, 0);
    for (int k0 = 0; k0 < NC; k0 += 64) {
      load(sb, m0, k0 + 32);
      compute(sa, k0);
      if (k0 + 64 < NC) load(sa, m0, k0 + 64);
      compute(sb, k0 + 32);
    }
    #pragma unroll
    for (int m = 0; m < 2; m++)
      #pragma unroll
      for (int h = 0; h < 2; h++) {
        const int r = m0 + 16 * m + g + 8 * h;
        if (r >= hi) continue;
        if (TRANS) {
          #pragma unroll
          for (int n = 0; n < 2; n++)
            *reinterpret_cast<__nv_bfloat162*>(&out[(size_t)r * NJ + jw + 8 * n + 2 * t4]) =
                __floats2bfloat162_rn(acc[m][n][2 * h], acc[m][n][2 * h + 1]);
        } else {
          // Logical columns 2·t4 and 2·t4 + 1 of tiles 0 and 1 are physical jw + 4·t4 + {0, 2} and {1, 3}.
          __nv_bfloat16* o = &out[(size_t)r * NJ + jw + 4 * t4];
          *reinterpret_cast<__nv_bfloat162*>(o) = __floats2bfloat162_rn(acc[m][0][2 * h], acc[m][1][2 * h]);
          *reinterpret_cast<__nv_bfloat162*>(o + 2) = __floats2bfloat162_rn(acc[m][0][2 * h + 1], acc[m][1][2 * h + 1]);
        }
      }
  }
`
