package goeng

import (
	"math"
	"slices"

	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/internal/sgemm"
	"github.com/dgtune/dgtune/mx/internal/uninit"
)

// ScaledDotProductAttention is softmax(q·kᵀ·scale, masked)·v as one kernel with its own
// VJP. Work is cut into blocks, one per (batch, kv head): the G = Hq/Hkv query heads that
// share a kv head are contiguous in q, so a block is a [G·Lq, D] matrix of queries against
// [Lk, D] keys, and grouped-query attention needs no copy of k or v. Blocks run in groups
// (eachGroup) whose [G·Lq, Lk] scores fit a bounded buffer that is reused for the next
// group. When all the probabilities P fit maxKeptScores the forward hands them to the
// backward (which then skips recomputing them); otherwise it keeps only the log-sum-exp of
// every row and the backward recomputes P from it, so at most maxScratch floats of scores
// (P and dP in the backward) are alive, instead of all of [B, Hkv, G·Lq, Lk].
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
	traced := q.node != nil || k.node != nil || v.node != nil
	if !traced {
		a.kept = nil // no backward will read the probabilities
	}
	return record(res, "scaled_dot_product_attention", []*tensor{q, k, v}, func(g *tensor) []*tensor {
		dq, dk, dv := a.backward(g.f32(), lse, q.node != nil, k.node != nil, v.node != nil)
		return []*tensor{dq, dk, dv}
	})
}

// maxKeptScores bounds the probabilities a call keeps for its backward (floats, 8 MiB):
// up to it, the forward's P is handed to the backward instead of being recomputed (one
// product of the five and the exponentials); above it — a long prompt's encoder — the
// backward recomputes P from the log-sum-exps, so memory stays linear in the length.
const maxKeptScores = 1 << 21

// attention holds one call's operands as float32, with the mask read through broadcast
// strides (never expanded to [B, Hq, Lq, Lk]).
type attention struct {
	b, hq, hkv, g, lq, lk, d, dv int
	scale                        float32
	q, k, v                      []float32
	mask                         []bool // nil: every key allowed
	mst                          []int  // strides of mask over [B, Hq, Lq, Lk], 0 on broadcast axes
	// kept is the forward's probabilities P of every block ([B·Hkv, G·Lq, Lk]) when they
	// fit maxKeptScores, for the backward to use (and overwrite) once; nil otherwise.
	kept []float32
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

// maxScratch bounds the scores a call holds at once (floats, 32 MiB): blocks are taken
// in groups whose scores fit, so a long context does not hold all of them.
const maxScratch = 1 << 23

// eachGroup runs fn over consecutive groups of blocks [b0, b1), as many per group as fit
// maxScratch at per floats of scratch each (at least one), with a buffer of (b1−b0)·per
// floats reused from group to group (buf when it is big enough, else a fresh one). A group's products run as one sgemm.Batch and its
// rows in one parallel loop, so a step of attention is a handful of parallel regions
// whatever the number of kv heads, and the blocks share the cores instead of each being
// split over all of them. Every element rounds as it would block by block: Batch rounds
// each product as Gemm alone, and rows are independent.
func (a *attention) eachGroup(per int, buf []float32, fn func(b0, b1 int, buf []float32)) {
	nb := a.b * a.hkv
	g := groupBlocks(nb, per)
	if len(buf) < g*per {
		buf = uninit.Float32s(g * per) // every element is written before it is read
	}
	for b0 := 0; b0 < nb; b0 += g {
		b1 := min(nb, b0+g)
		fn(b0, b1, buf[:(b1-b0)*per])
	}
}

// groupBlocks is how many of nb blocks of per floats of scratch each eachGroup takes at
// once: as many as fit maxScratch, at least one.
func groupBlocks(nb, per int) int { return max(1, min(nb, maxScratch/max(per, 1))) }

// AttentionMemory is what one ScaledDotProductAttention call holds besides its operands,
// its output and the log-sum-exp of every query row (float64, kept for the backward), in
// float32 elements.
type AttentionMemory struct {
	// Kept is the forward's probabilities, handed to the backward (which drops them once
	// used) when they fit maxKeptScores; 0 otherwise.
	Kept int
	// ForwardScratch is the score blocks the forward holds while it runs when it keeps
	// none (Kept then holds them).
	ForwardScratch int
	// BackwardScratch is what the backward holds while it runs: dP beside the kept
	// probabilities, or the recomputed probabilities and dP of a group of blocks.
	BackwardScratch int
}

// AttentionMemoryOf is the AttentionMemory of a call with batch b, hq query heads over hkv
// kv heads, lq queries and lk keys: the bounds ScaledDotProductAttention works within,
// for a memory estimate to count (package shapeeng).
func AttentionMemoryOf(b, hq, hkv, lq, lk int) AttentionMemory {
	nb, per := b*hkv, (hq/max(hkv, 1))*lq*lk
	if nb*per <= maxKeptScores {
		return AttentionMemory{Kept: nb * per, BackwardScratch: nb * per}
	}
	return AttentionMemory{ForwardScratch: groupBlocks(nb, per) * per, BackwardScratch: groupBlocks(nb, 2*per) * 2 * per}
}

// eachRow runs body(blk, row, i) over every row of blocks b0..b1−1 in parallel, i being
// the row's index in the group (blk−b0)·rows + row.
func (a *attention) eachRow(b0, b1 int, body func(blk, row, i int)) {
	r := a.rows()
	parallelFor((b1-b0)*r, a.lk, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			body(b0+i/r, i%r, i)
		}
	})
}

// scoreProducts appends, for each block of b0..b1−1, the product q·kᵀ into its [G·Lq, Lk]
// part of s.
func (a *attention) scoreProducts(ps []sgemm.Product, b0, b1 int, s []float32) []sgemm.Product {
	r, lk, d := a.rows(), a.lk, a.d
	for blk := b0; blk < b1; blk++ {
		ps = append(ps, sgemm.Product{TA: sgemm.NoTrans, TB: sgemm.Transposed, M: r, N: lk, K: d,
			A: a.q[a.qBlock(blk):], LDA: d, B: a.k[a.kBlock(blk):], LDB: d, C: s[(blk-b0)*r*lk:], LDC: lk})
	}
	return ps
}

// finishScores turns row row of block blk's product q·kᵀ into scores: ·scale (rounding as
// matmul followed by multiply would), and −∞ at masked keys.
func (a *attention) finishScores(sr []float32, blk, row int) {
	if a.scale != 1 {
		for j := vecVS(mx.OpMultiply, sr, sr, a.scale); j < len(sr); j++ {
			sr[j] *= a.scale
		}
	}
	if a.mask == nil {
		return
	}
	batch, kvh := blk/a.hkv, blk%a.hkv
	h, i := kvh*a.g+row/a.lq, row%a.lq
	base, step := batch*a.mst[0]+h*a.mst[1]+i*a.mst[2], a.mst[3]
	ninf := float32(math.Inf(-1))
	for j := range sr {
		if !a.mask[base+j*step] {
			sr[j] = ninf
		}
	}
}

// forward returns the output [B, Hq, Lq, Dv] and the log-sum-exp of every score row
// [B, Hq, Lq] (in block order, which is the same thing).
func (a *attention) forward() (out []float32, lse []float64) {
	r, lk, dv := a.rows(), a.lk, a.dv
	// Neither is cleared first: each block's P·V writes its rows of out whole, and every
	// row's log-sum-exp is set (zeroing them was serial time: 21 ms of the real
	// geometry's 16-thread step, with the backward's).
	out = uninit.Float32s(a.b * a.hq * a.lq * dv)
	lse = make([]float64, a.b*a.hq*a.lq)
	var ps []sgemm.Product
	if kept := AttentionMemoryOf(a.b, a.hq, a.hkv, a.lq, a.lk).Kept; kept > 0 {
		// One group whose buffer is the backward's P: eachGroup then makes it once.
		a.kept = uninit.Float32s(kept)
	}
	a.eachGroup(r*lk, a.kept, func(b0, b1 int, p []float32) {
		sgemm.Batch(a.scoreProducts(ps[:0], b0, b1, p))
		a.eachRow(b0, b1, func(blk, row, i int) {
			sr := p[i*lk : (i+1)*lk]
			a.finishScores(sr, blk, row)
			lse[blk*r+row] = softmaxLSE(sr)
		})
		ps = ps[:0]
		for blk := b0; blk < b1; blk++ {
			ps = append(ps, sgemm.Product{TA: sgemm.NoTrans, TB: sgemm.NoTrans, M: r, N: dv, K: lk,
				A: p[(blk-b0)*r*lk:], LDA: lk, B: a.v[a.vBlock(blk):], LDB: dv, C: out[a.oBlock(blk):], LDC: dv})
		}
		sgemm.Batch(ps)
	})
	return out, lse
}

// softmaxLSE replaces row by its softmax and returns the row's log-sum-exp
// max + log Σ exp(x − max). It follows softmaxRow (float64 sum, one reciprocal) but
// takes the exponentials in float32 with expRow.
func softmaxLSE(row []float32) float64 {
	m := float32(math.Inf(-1))
	start := 0
	if n8 := len(row) / 8 * 8; expAVX2 && n8 > 0 {
		m, start = maxKernel(&row[0], n8), n8
	}
	for _, v := range row[start:] {
		if v > m { // unlike max, ignores NaN: a NaN score still makes the row NaN below
			m = v
		}
	}
	s := expRow(row, m)
	inv := float32(1 / s)
	for i := vecVS(mx.OpMultiply, row, row, inv); i < len(row); i++ {
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
	// Not cleared first: each block's dQ, dK and dV are one product each (the G query
	// heads of a kv head sum inside dK's and dV's), which writes the block whole — zeros
	// when its inner dimension is empty.
	var gq, gk, gv []float32
	if wantQ {
		gq = uninit.Float32s(len(a.q))
	}
	if wantK {
		gk = uninit.Float32s(len(a.k))
	}
	if wantV {
		gv = uninit.Float32s(len(a.v))
	}
	per := r * lk
	var ps []sgemm.Product
	kept := a.kept
	a.kept = nil // used (and overwritten with dS) once
	if kept != nil {
		// The forward's P, all blocks in one group, and dP beside it.
		nb := a.b * a.hkv
		p, dp := kept, uninit.Float32s(nb*per)
		a.backwardGroup(0, nb, p, dp, g, gq, gk, gv, wantQ, wantK, wantV)
	} else {
		a.eachGroup(2*per, nil, func(b0, b1 int, buf []float32) {
			n := (b1 - b0) * per
			p, dp := buf[:n], buf[n:]
			sgemm.Batch(a.scoreProducts(ps[:0], b0, b1, p))
			a.eachRow(b0, b1, func(blk, row, i int) {
				sr := p[i*lk : (i+1)*lk]
				a.finishScores(sr, blk, row)
				expRow(sr, float32(lse[blk*r+row]))
			})
			a.backwardGroup(b0, b1, p, dp, g, gq, gk, gv, wantQ, wantK, wantV)
		})
	}
	mk := func(v []float32, shape ...int) *tensor {
		if v == nil {
			return nil
		}
		return fromF32(slices.Clone(shape), mx.Float32, v)
	}
	return mk(gq, a.b, a.hq, a.lq, d), mk(gk, a.b, a.hkv, lk, d), mk(gv, a.b, a.hkv, lk, dvw)
}

// backwardGroup is the backward of blocks b0..b1−1 from their probabilities p (overwritten
// with dS·scale) and a scratch dp of the same size: dV, dP, dS, then dQ and dK.
func (a *attention) backwardGroup(b0, b1 int, p, dp, g, gq, gk, gv []float32, wantQ, wantK, wantV bool) {
	r, lk, d, dvw := a.rows(), a.lk, a.d, a.dv
	per := r * lk
	// dV reads P before dS overwrites it; dP is independent of it.
	var ps []sgemm.Product
	for blk := b0; blk < b1; blk++ {
		pb, gb := p[(blk-b0)*per:], g[a.oBlock(blk):]
		if wantV {
			ps = append(ps, sgemm.Product{TA: sgemm.Transposed, TB: sgemm.NoTrans, M: lk, N: dvw, K: r,
				A: pb, LDA: lk, B: gb, LDB: dvw, C: gv[a.vBlock(blk):], LDC: dvw})
		}
		if wantQ || wantK {
			ps = append(ps, sgemm.Product{TA: sgemm.NoTrans, TB: sgemm.Transposed, M: r, N: lk, K: dvw,
				A: gb, LDA: dvw, B: a.v[a.vBlock(blk):], LDB: dvw, C: dp[(blk-b0)*per:], LDC: lk})
		}
	}
	sgemm.Batch(ps)
	if !wantQ && !wantK {
		return
	}
	a.eachRow(b0, b1, func(blk, row, i int) {
		pr, dr := p[i*lk:(i+1)*lk], dp[i*lk:(i+1)*lk]
		c := float32(dot4(pr, dr))
		// dS·scale = P·(dP − c)·scale in place of P, each step rounded; dP is not needed
		// again, so it holds dP − c.
		for j := vecVS(mx.OpSubtract, dr, dr, c); j < len(dr); j++ {
			dr[j] -= c
		}
		for j := vecVV(mx.OpMultiply, pr, pr, dr); j < len(pr); j++ {
			pr[j] *= dr[j]
		}
		if a.scale != 1 {
			for j := vecVS(mx.OpMultiply, pr, pr, a.scale); j < len(pr); j++ {
				pr[j] *= a.scale
			}
		}
	})
	ps = ps[:0]
	for blk := b0; blk < b1; blk++ {
		pb := p[(blk-b0)*per:]
		if wantQ {
			ps = append(ps, sgemm.Product{TA: sgemm.NoTrans, TB: sgemm.NoTrans, M: r, N: d, K: lk,
				A: pb, LDA: lk, B: a.k[a.kBlock(blk):], LDB: d, C: gq[a.qBlock(blk):], LDC: d})
		}
		if wantK {
			ps = append(ps, sgemm.Product{TA: sgemm.Transposed, TB: sgemm.NoTrans, M: lk, N: d, K: r,
				A: pb, LDA: lk, B: a.q[a.qBlock(blk):], LDB: d, C: gk[a.kBlock(blk):], LDC: d})
		}
	}
	sgemm.Batch(ps)
}

// exp2Frac[j] is 2^(j/64) rounded to float32, for expRow. It is computed once and never
// written.
var exp2Frac = func() (t [64]float32) {
	for j := range t {
		t[j] = float32(math.Exp2(float64(j) / 64))
	}
	return t
}()
