//go:build mlx

package mlxeng

/*
#include "mlx/c/mlx.h"

// mlxeng_sdpa_folded is MLX's attention fallback (mlx/fast.cpp, v0.32.1) with the G
// query heads of each kv head folded into the query rows: q [B, Hq, L, D] is scaled as
// MLX scales it (by scale in q's dtype), viewed as [B, Hkv, G·L, D] and multiplied by
// k [B, Hkv, Lk, D] transposed; mask (when has_mask; additive, q's dtype, broadcastable
// to [B, Hq, L, Lk]) is added over the scores viewed as [B, Hkv, G, L, Lk]; then MLX's
// precise softmax and the product with v [B, Hkv, Lk, Dv], viewed back as [B, Hq, L, Dv].
static int mlxeng_sdpa_folded(mlx_array* res, const mlx_array q, const mlx_array k, const mlx_array v, float scale,
		const mlx_array mask, int has_mask, mlx_stream s) {
	int b = mlx_array_dim(q, 0), hq = mlx_array_dim(q, 1), l = mlx_array_dim(q, 2), d = mlx_array_dim(q, 3);
	int hkv = mlx_array_dim(k, 1), lk = mlx_array_dim(k, 2), dv = mlx_array_dim(v, 3), g = hq / hkv;
	int qf_shape[4] = {b, hkv, g * l, d}, s5_shape[5] = {b, hkv, g, l, lk}, mb_shape[4] = {b, hq, l, lk};
	int heads[2] = {hkv, g}, pf_shape[4] = {b, hkv, g * l, lk}, out_shape[4] = {b, hq, l, dv};
	mlx_array sc32 = mlx_array_new_float(scale), sc = mlx_array_new(), qs = mlx_array_new(), qf = mlx_array_new(),
		kt = mlx_array_new(), scores = mlx_array_new(), s5 = mlx_array_new(), mb = mlx_array_new(), m5 = mlx_array_new(),
		sum = mlx_array_new(), p = mlx_array_new(), pf = mlx_array_new(), out = mlx_array_new();
	int rc = mlx_astype(&sc, sc32, mlx_array_dtype(q), s) || mlx_multiply(&qs, sc, q, s) ||
		mlx_reshape(&qf, qs, qf_shape, 4, s) || mlx_swapaxes(&kt, k, -1, -2, s) || mlx_matmul(&scores, qf, kt, s);
	if (rc == 0 && has_mask) {
		rc = mlx_reshape(&s5, scores, s5_shape, 5, s) || mlx_broadcast_to(&mb, mask, mb_shape, 4, s) ||
			mlx_unflatten(&m5, mb, 1, heads, 2, s) || mlx_add(&sum, s5, m5, s) ||
			mlx_softmax_axis(&p, sum, -1, true, s) || mlx_reshape(&pf, p, pf_shape, 4, s);
	} else if (rc == 0) {
		rc = mlx_softmax_axis(&pf, scores, -1, true, s);
	}
	rc = rc || mlx_matmul(&out, pf, v, s) || mlx_reshape(res, out, out_shape, 4, s);
	mlx_array arrs[] = {sc32, sc, qs, qf, kt, scores, s5, mb, m5, sum, p, pf, out};
	for (int i = 0; i < (int)(sizeof arrs / sizeof arrs[0]); i++) {
		mlx_array_free(arrs[i]);
	}
	return rc;
}
*/
import "C"

import "github.com/dgtune/dgtune/mx"

// Grouped-query attention with the query heads folded into the rows (MLXENG_SDPA=folded
// turns it on, on CUDA; off by default until measured on a GPU). For head sizes above
// 128 — the real 26B-A4B geometry's 256 and 512 — MLX-CUDA has no fused attention
// (cuDNN's stops at 128) and takes its fallback composition, which lays q out as
// [B, Hkv, G, L, D] against k and v expanded to [B, Hkv, 1, Lk, D]: a product with a
// broadcast batch axis, which MLX-CUDA's matmul copies into full batches (the copy
// kernels around a layer's attention products), and whose k and v gradients are
// [B, Hkv, G, Lk, D] summed over G afterwards. Folding the G heads of each kv head into
// the query rows — q viewed as [B, Hkv, G·L, D], a free reshape — makes both products
// plain batched ones over [B, Hkv] and each of k's and v's gradients one product. The
// values are the fallback's: the same scaling of q, the same float32 sums of the same
// products (in cuBLAS's order for the shapes given), the same mask and precise softmax.

// sdpaEnv turns the folded attention on ("folded").
const sdpaEnv = "MLXENG_SDPA"

// foldsAttention reports whether ScaledDotProductAttention takes the folded composition:
// on a CUDA GPU with sdpaEnv "folded"; q, k, v of rank 4 and one float dtype with more
// query heads than kv heads (a multiple of them) and more than 8 queries (fewer take
// MLX's vector kernel); where MLX has no fused attention — a head size above 128 or not a
// multiple of 8, or float32 — and with no mask or an additive one of q's dtype and rank
// at most 4.
func (e *Engine) foldsAttention(q, k, v, mask *array) bool {
	if !e.foldedSDPA {
		return false
	}
	if len(q.shape) != 4 || len(k.shape) != 4 || len(v.shape) != 4 || !q.dt.IsFloat() || k.dt != q.dt || v.dt != q.dt {
		return false
	}
	hq, hkv, l, d, dv := q.shape[1], k.shape[1], q.shape[2], q.shape[3], v.shape[3]
	if hkv < 1 || hq <= hkv || hq%hkv != 0 || l <= 8 {
		return false
	}
	if hasFusedAttention(q.dt, d, dv) {
		return false
	}
	return mask == nil || (mask.dt == q.dt && len(mask.shape) <= 4)
}

// sdpaFolded is the folded composition (mlxeng_sdpa_folded); mask may be nil.
func (e *Engine) sdpaFolded(q, k, v *array, scale float64, mask *array) *array {
	var m C.mlx_array
	has := C.int(0)
	if mask != nil {
		m, has = mask.c, 1
	}
	return e.op("sdpa", func(res *C.mlx_array) C.int {
		return C.mlxeng_sdpa_folded(res, q.c, k.c, v.c, C.float(scale), m, has, e.stream)
	})
}

// foldedSDPAOn reports whether the engine on device folds attention with the
// environment's setting env.
func foldedSDPAOn(device, env string) bool { return isCUDA(device) && env == "folded" }

// hasFusedAttention reports whether MLX-CUDA attends with a fused kernel (cuDNN's) for
// queries of dtype dt, key head size d and value head size dv: half precision, head
// sizes up to 128 and multiples of 8. Elsewhere it takes its fallback composition.
func hasFusedAttention(dt mx.DType, d, dv int) bool {
	return (dt == mx.BFloat16 || dt == mx.Float16) && d <= 128 && dv <= 128 && d%8 == 0 && dv%8 == 0
}

// joinAttentionEnv "0" turns the joined attention off (JoinsAttention), for measuring.
const joinAttentionEnv = "MLXENG_JOIN_ATTENTION"

// joinAttentionOn reports whether the engine on device joins attention calls with the
// environment's setting env.
func joinAttentionOn(device, env string) bool { return isCUDA(device) && env != "0" }

// JoinsAttention implements mx.AttentionJoiner: on CUDA, where MLX has no fused attention
// for q (the real 26B-A4B geometry's head sizes 256 and 512), its fallback composition
// costs a dozen launches a call forward (scaling, the k/v expansion copies, two products,
// the mask, the softmax, the transposes) and more backward, for any number of rows; one
// masked call over the fused forward's encoder and decoder rows saves one call's worth,
// and the split of the queries and the concatenate of the outputs, for a few more masked
// scores. Where MLX has the fused kernel the separate calls keep it: the decoder's call,
// unmasked, is cuDNN's.
func (e *Engine) JoinsAttention(dt mx.DType, headDim int) bool {
	return e.joinAttention && !hasFusedAttention(dt, headDim, headDim)
}

var _ mx.AttentionJoiner = (*Engine)(nil)
