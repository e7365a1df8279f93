package kernels

// ExpertOrderSource is the stable order of n expert ids by expert, and its inverse, in
// one launch: order [n] lists the positions of idx [n] (int32) by non-decreasing id, ties
// in position order — what a stable argsort gives — and inverse [n] is where each
// position went (order[inverse[i]] = i, the argsort of order). Ids are clamped to
// [0, E): the caller promises they lie there (a router's top-k), and a wrong id must not
// write outside the outputs. MLX declares idx, idx_shape, order and inverse, and the
// template constant E (the number of experts, at most 1024). Launch: one block of 1024
// threads (32 warps).
//
// A mixture of experts sorts its T·k (token, slot) pairs by expert before the grouped
// products and puts them back after; as two argsorts MLX-CUDA ran a one-block merge sort
// of the 3,072 pairs of the real 26B-A4B geometry twice a layer (~27 µs each) with casts
// around them. Here: the ids are counted per expert (shared-memory atomics) and the
// counts scanned into each expert's first position; then the pairs are placed 1024 at a
// time in position order — each warp ranks its lanes among those of the same expert
// (__match_any_sync), the warps' counts per expert (at most 32, one byte each) give
// each lane the lanes of its expert in earlier warps, and the experts' next free
// positions move on by the round's counts.
const ExpertOrderSource = `
  constexpr int W = 32;  // warps
  __shared__ int next[E];                 // each expert's next free position
  __shared__ unsigned char wcount[W][E];  // this round's pairs of each expert, by warp
  const int n = idx_shape[0];
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  auto expert = [&](int i) { return min(max((int)idx[i], 0), E - 1); };
  for (int e = tid; e < E; e += 1024) next[e] = 0;
  __syncthreads();
  for (int i = tid; i < n; i += 1024) atomicAdd(&next[expert(i)], 1);
  __syncthreads();
  if (tid == 0) {
    int start = 0;
    for (int e = 0; e < E; e++) {
      const int c = next[e];
      next[e] = start;
      start += c;
    }
  }
  __syncthreads();
  for (int r0 = 0; r0 < n; r0 += 1024) {
    const int i = r0 + tid;
    const int e = i < n ? expert(i) : -1;
    for (int x = tid; x < W * E; x += 1024) (&wcount[0][0])[x] = 0;
    __syncthreads();
    const unsigned same = __match_any_sync(0xffffffffu, e);
    const int rank = __popc(same & ((1u << lane) - 1u));
    if (e >= 0 && rank == 0) wcount[warp][e] = (unsigned char)__popc(same);
    __syncthreads();
    if (e >= 0) {
      int pos = next[e] + rank;
      for (int w = 0; w < warp; w++) pos += wcount[w][e];
      order[pos] = i;
      inverse[i] = pos;
    }
    __syncthreads();
    for (int x = tid; x < E; x += 1024) {
      int s = 0;
      for (int w = 0; w < W; w++) s += wcount[w][x];
      next[x] += s;
    }
    __syncthreads();
  }
`
