package goeng

import (
	"math"
	"slices"

	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/internal/sgemm"
)

// ScaledDotProductAttention is softmax(q·kᵀ·scale, masked)·v as one kernel with its own
// VJP. Work is cut into blocks, one per (batch, kv head): the G = Hq/Hkv query heads that
// share a kv head are contiguous in q, so a block is a [G·Lq, D] matrix of queries against
// [Lk, D] keys, and grouped-query attention needs no copy of k or v. A block's scores live
// in one [G·Lq, Lk] buffer that is reused for the next block; the forward keeps only the
// log-sum-exp of every row, and the backward recomputes the block's probabilities from it.
// So at most one block of scores (two in the backward: P and dP) per running block is
// alive, instead of all of [B, Hkv, G·Lq, Lk] plus the probabilities kept for the backward.
//
// Masked positions get score −∞ and probability 0; a row with every key masked gives NaN,
// as softmax over −∞ does.
func (e *Engine) ScaledDotProductAttention(hq, hk, hv mx.Handle, scale float64, hm mx.Handle) mx.Handle {
	q, k, v := tt(hq), tt(hk), tt(hv)
	var mask *tensor
	if hm != nil {
		mask = tt(hm)
	}
	a := newAttention(q, k, v, scale, mask)
	out, lse := a.forward()
	dt := mx.PromoteTypes(mx.PromoteTypes(q.dt, k.dt), v.dt)
	if !dt.IsFloat() {
		dt = mx.Float32
	}
	res := fromF32([]int{a.b, a.hq, a.lq, a.dv}, dt, out)
	return record(res, "scaled_dot_product_attention", []*tensor{q, k, v}, func(g *tensor) []*tensor {
		dq, dk, dv := a.backward(g.f32(), lse, q.node != nil, k.node != nil, v.node != nil)
		return []*tensor{dq, dk, dv}
	})
}

// attention holds one call's operands as float32, with the mask read through broadcast
// strides (never expanded to [B, Hq, Lq, Lk]).
type attention struct {
	b, hq, hkv, g, lq, lk, d, dv int
	scale                        float32
	q, k, v                      []float32
	mask                         []bool // nil: every key allowed
	mst                          []int  // strides of mask over [B, Hq, Lq, Lk], 0 on broadcast axes
}

func newAttention(q, k, v *tensor, scale float64, mask *tensor) *attention {
	a := &attention{
		b: q.shape[0], hq: q.shape[1], lq: q.shape[2], d: q.shape[3],
		hkv: k.shape[1], lk: k.shape[2], dv: v.shape[3],
		scale: float32(scale),
		q:     q.f32(), k: k.f32(), v: v.f32(),
	}
	a.g = a.hq / a.hkv
	if mask != nil {
		a.mask = mask.bools()
		a.mst = broadcastStrides(mask.shape, []int{a.b, a.hq, a.lq, a.lk})
	}
	return a
}

// rows is the number of query rows in a block (G heads × Lq).
func (a *attention) rows() int { return a.g * a.lq }

// Slices of block blk = batch·Hkv + kv head.
func (a *attention) qBlock(blk int) int { return blk * a.rows() * a.d }
func (a *attention) kBlock(blk int) int { return blk * a.lk * a.d }
func (a *attention) vBlock(blk int) int { return blk * a.lk * a.dv }
func (a *attention) oBlock(blk int) int { return blk * a.rows() * a.dv }

// eachBlock runs fn over every block with a scratch buffer of size floats. Blocks too
// small for sgemm to split run side by side, each on one goroutine (par false); larger
// ones run one after another with the parallelism inside (par true). Either way a buffer
// is reused from block to block.
func (a *attention) eachBlock(size int, fn func(blk int, buf []float32, par bool)) {
	nb := a.b * a.hkv
	work := a.rows() * a.lk * max(a.d, a.dv)
	if nb > 1 && work < 1<<18 {
		parallelFor(nb, work, func(lo, hi int) {
			buf := make([]float32, size)
			for blk := lo; blk < hi; blk++ {
				fn(blk, buf, false)
			}
		})
		return
	}
	buf := make([]float32, size)
	for blk := range nb {
		fn(blk, buf, true)
	}
}

// eachRow runs body over the rows of a block, in parallel when par is set.
func (a *attention) eachRow(par bool, body func(lo, hi int)) {
	if par {
		parallelFor(a.rows(), a.lk, body)
		return
	}
	body(0, a.rows())
}

// scores sets s [G·Lq, Lk] to q·kᵀ·scale for block blk, with masked positions at −∞.
// The product and the scaling round as matmul followed by multiply would.
func (a *attention) scores(s []float32, blk int, par bool) {
	r, lk, d := a.rows(), a.lk, a.d
	sgemm.Gemm(sgemm.NoTrans, sgemm.Transposed, r, lk, d, a.q[a.qBlock(blk):], d, a.k[a.kBlock(blk):], d, s, lk, false)
	batch, kvh := blk/a.hkv, blk%a.hkv
	ninf := float32(math.Inf(-1))
	a.eachRow(par, func(lo, hi int) {
		for row := lo; row < hi; row++ {
			sr := s[row*lk : (row+1)*lk]
			for j := range sr {
				sr[j] *= a.scale
			}
			if a.mask == nil {
				continue
			}
			h, i := kvh*a.g+row/a.lq, row%a.lq
			base, step := batch*a.mst[0]+h*a.mst[1]+i*a.mst[2], a.mst[3]
			for j := range sr {
				if !a.mask[base+j*step] {
					sr[j] = ninf
				}
			}
		}
	})
}

// forward returns the output [B, Hq, Lq, Dv] and the log-sum-exp of every score row
// [B, Hq, Lq] (in block order, which is the same thing).
func (a *attention) forward() (out []float32, lse []float64) {
	r, lk, dv := a.rows(), a.lk, a.dv
	out = make([]float32, a.b*a.hq*a.lq*dv)
	lse = make([]float64, a.b*a.hq*a.lq)
	a.eachBlock(r*lk, func(blk int, p []float32, par bool) {
		a.scores(p, blk, par)
		l := lse[blk*r : (blk+1)*r]
		a.eachRow(par, func(lo, hi int) {
			for row := lo; row < hi; row++ {
				l[row] = softmaxLSE(p[row*lk : (row+1)*lk])
			}
		})
		sgemm.Gemm(sgemm.NoTrans, sgemm.NoTrans, r, dv, lk, p, lk, a.v[a.vBlock(blk):], dv, out[a.oBlock(blk):], dv, false)
	})
	return out, lse
}

// softmaxLSE replaces row by its softmax and returns the row's log-sum-exp
// max + log Σ exp(x − max). It follows softmaxRow (float64 sum, one reciprocal) but
// takes the exponentials in float32 with expRow.
func softmaxLSE(row []float32) float64 {
	m := float32(math.Inf(-1))
	for _, v := range row {
		if v > m { // unlike max, ignores NaN: a NaN score still makes the row NaN below
			m = v
		}
	}
	s := expRow(row, m)
	inv := float32(1 / s)
	for i := range row {
		row[i] *= inv
	}
	return float64(m) + math.Log(s)
}

// expRow sets row[i] = e^(row[i] − shift) and returns Σ row[i] in float64, several
// times faster than math.Exp. The arguments of a softmax lie in [−∞, 0], and float32
// needs only x = (64k + j)·ln2/64 + r with 0 ≤ j < 64 and |r| ≤ ln2/128 (ln2/64 split
// in two so that n·ln2/64 stays exact enough), e^r ≈ 1 + r + r²/2 (error r³/6 < 3e-8),
// 2^(j/64) from a table and 2^k written straight into the exponent bits: within about
// one ulp. The loop makes no calls, so consecutive elements overlap in the pipeline.
func expRow(row []float32, shift float32) float64 { return expInto(row, row, shift) }

// expInto is expRow reading src and writing dst (which may be src): dst[i] =
// e^(src[i] − shift), returning Σ dst[i] in float64.
func expInto(dst, src []float32, shift float32) float64 {
	const (
		scale = 64 / math.Ln2
		ln2hi = 0.693359375 / 64
		ln2lo = -2.12194440e-4 / 64
	)
	src = src[:len(dst)]
	// The AVX2 kernel takes the whole multiples of 8 (and their partial sums); the loops
	// below finish the rest exactly as they would have done it all.
	var s0, s1, s2, s3 float64
	start := 0
	if n8 := len(dst) / 8 * 8; expAVX2 && n8 > 0 {
		var sums [4]float64
		expKernel(&dst[0], &src[0], n8, shift, &exp2Frac[0], &sums)
		s0, s1, s2, s3 = sums[0], sums[1], sums[2], sums[3]
		start = n8
	}
	for i := start; i < len(dst); i++ {
		v := src[i]
		x := v - shift
		if x < -87.3 { // e^x below the smallest normal float32 (also x = −∞)
			dst[i] = 0
			continue
		}
		// x ≤ 0 here unless shift is not the row's maximum (NaN anywhere), and NaN stays
		// NaN through the polynomial.
		n := int32(x*scale - 0.5)
		nf := float32(n)
		r := x - nf*ln2hi - nf*ln2lo
		p := 1 + r*(1+r*0.5)
		dst[i] = p * exp2Frac[n&63] * math.Float32frombits(uint32(n>>6+127)<<23)
	}
	// Four partial sums: one float64 chain would cost an add latency per element.
	i := start
	for ; i+4 <= len(dst); i += 4 {
		r := dst[i : i+4 : i+4]
		s0 += float64(r[0])
		s1 += float64(r[1])
		s2 += float64(r[2])
		s3 += float64(r[3])
	}
	for ; i < len(dst); i++ {
		s0 += float64(dst[i])
	}
	return (s0 + s1) + (s2 + s3)
}

// backward maps the output cotangent g [B, Hq, Lq, Dv] to (dq, dk, dv), each nil unless
// wanted. Per block, with P recomputed as exp(S − lse):
//
//	dV = Pᵀ·dO,  dP = dO·Vᵀ,  dS = P ⊙ (dP − rowsum(P ⊙ dP)),
//	dQ = dS·K·scale,  dK = dSᵀ·Q·scale,
//
// where dS is the softmax's VJP (masked positions have P = 0, so they pass nothing on).
// The G query heads of a block sum into their kv head's dK and dV inside the products.
func (a *attention) backward(g []float32, lse []float64, wantQ, wantK, wantV bool) (dq, dk, dv *tensor) {
	r, lk, d, dvw := a.rows(), a.lk, a.d, a.dv
	var gq, gk, gv []float32
	if wantQ {
		gq = make([]float32, len(a.q))
	}
	if wantK {
		gk = make([]float32, len(a.k))
	}
	if wantV {
		gv = make([]float32, len(a.v))
	}
	a.eachBlock(2*r*lk, func(blk int, buf []float32, par bool) {
		p, dp := buf[:r*lk], buf[r*lk:]
		a.scores(p, blk, par)
		l := lse[blk*r : (blk+1)*r]
		a.eachRow(par, func(lo, hi int) {
			for row := lo; row < hi; row++ {
				expRow(p[row*lk:(row+1)*lk], float32(l[row]))
			}
		})
		gb := g[a.oBlock(blk):]
		if wantV {
			sgemm.Gemm(sgemm.Transposed, sgemm.NoTrans, lk, dvw, r, p, lk, gb, dvw, gv[a.vBlock(blk):], dvw, false)
		}
		if !wantQ && !wantK {
			return
		}
		sgemm.Gemm(sgemm.NoTrans, sgemm.Transposed, r, lk, dvw, gb, dvw, a.v[a.vBlock(blk):], dvw, dp, lk, false)
		a.eachRow(par, func(lo, hi int) {
			for row := lo; row < hi; row++ {
				pr, dr := p[row*lk:(row+1)*lk], dp[row*lk:(row+1)*lk]
				dr = dr[:len(pr)]
				var dot float64
				for j, v := range pr {
					dot += float64(v) * float64(dr[j])
				}
				c := float32(dot)
				for j, v := range pr {
					pr[j] = v * (dr[j] - c) * a.scale // dS·scale, in place of P
				}
			}
		})
		if wantQ {
			sgemm.Gemm(sgemm.NoTrans, sgemm.NoTrans, r, d, lk, p, lk, a.k[a.kBlock(blk):], d, gq[a.qBlock(blk):], d, false)
		}
		if wantK {
			sgemm.Gemm(sgemm.Transposed, sgemm.NoTrans, lk, d, r, p, lk, a.q[a.qBlock(blk):], d, gk[a.kBlock(blk):], d, false)
		}
	})
	mk := func(v []float32, shape ...int) *tensor {
		if v == nil {
			return nil
		}
		return fromF32(slices.Clone(shape), mx.Float32, v)
	}
	return mk(gq, a.b, a.hq, a.lq, d), mk(gk, a.b, a.hkv, lk, d), mk(gv, a.b, a.hkv, lk, dvw)
}

// exp2Frac[j] is 2^(j/64) rounded to float32, for expRow. It is computed once and never
// written.
var exp2Frac = func() (t [64]float32) {
	for j := range t {
		t[j] = float32(math.Exp2(float64(j) / 64))
	}
	return t
}()
