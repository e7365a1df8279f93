package goeng_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
)

// composedSDPA is attention spelled with recorded ops (matmul, multiply, where, softmax)
// — the engine's former implementation — as the reference for the fused kernel.
func composedSDPA(q, k, v *mx.Array, scale float64, mask *mx.Array) *mx.Array {
	b, hq, lq, d := q.Dim(0), q.Dim(1), q.Dim(2), q.Dim(3)
	hkv, lk := k.Dim(1), k.Dim(2)
	g := hq / hkv
	s := mx.MulScalar(mx.Matmul(mx.Reshape(q, b, hkv, g*lq, d), mx.Transpose(k, 0, 1, 3, 2)), scale)
	s = mx.Reshape(s, b, hkv, g, lq, lk)
	if mask != nil {
		m := mx.Reshape(mx.BroadcastTo(mask, b, hq, lq, lk), b, hkv, g, lq, lk)
		s = mx.Where(m, s, mx.Full(q.Engine(), nil, math.Inf(-1), mx.Float32))
	}
	p := mx.Reshape(mx.Softmax(s, 4), b, hkv, g*lq, lk)
	return mx.Reshape(mx.Matmul(p, v), b, hq, lq, v.Dim(3))
}

// TestAttentionMatchesComposed compares outputs and the gradients of Σ out⊙R for q, k
// and v with the composed reference on random inputs: GQA groups of 1, 2 and 4, masks of
// every broadcast rank (per query and key, per batch, per head), a key masked for every
// query, Dv ≠ D, and blocks big enough for the parallel paths. Both compute the same
// float32 products and an exact-in-float64 softmax sum, so they agree to a few float32
// roundings of the largest terms.
func TestAttentionMatchesComposed(t *testing.T) {
	e := mxtest.Go(t)
	rng := newRand(31)
	type tc struct {
		b, hq, hkv, lq, lk, d, dv int
		mask                      []int // shape of a random mask; nil for none
	}
	cases := []tc{
		{1, 4, 2, 3, 5, 4, 4, nil},
		{2, 4, 1, 6, 7, 8, 3, []int{6, 7}},
		{2, 2, 2, 5, 9, 4, 6, []int{2, 1, 5, 9}},
		{1, 8, 2, 4, 6, 4, 4, []int{1, 8, 1, 6}},
		{1, 4, 2, 64, 96, 64, 64, []int{64, 96}}, // one block: parallel rows and sgemm
		{3, 2, 2, 16, 24, 16, 16, []int{3, 1, 16, 24}},
	}
	for _, c := range cases {
		name := fmt.Sprintf("B%d_Hq%d_Hkv%d_Lq%d_Lk%d_D%d_Dv%d_mask%v", c.b, c.hq, c.hkv, c.lq, c.lk, c.d, c.dv, c.mask)
		t.Run(name, func(t *testing.T) {
			q := mxtest.RandN(e, rng, c.b, c.hq, c.lq, c.d)
			k := mxtest.RandN(e, rng, c.b, c.hkv, c.lk, c.d)
			v := mxtest.RandN(e, rng, c.b, c.hkv, c.lk, c.dv)
			var mask *mx.Array
			if c.mask != nil {
				n := 1
				for _, s := range c.mask {
					n *= s
				}
				lk := c.mask[len(c.mask)-1]
				allow := make([]bool, n)
				for i := range allow {
					// Key 1 is masked for every query; every row keeps key 0.
					j := i % lk
					allow[i] = j == 0 || (j != 1 && rng.IntN(3) > 0)
				}
				mask = mx.FromBool(e, allow, c.mask...)
			}
			const scale = 0.3
			got := mx.ScaledDotProductAttention(q, k, v, scale, mask)
			want := composedSDPA(q, k, v, scale, mask)
			if ok, i := mxtest.Close(got.Float32s(), want.Float32s(), 1e-5, 1e-6); !ok {
				t.Fatalf("output element %d = %v, want %v", i, got.Float32s()[i], want.Float32s()[i])
			}
			loss := func(f func(q, k, v *mx.Array, scale float64, mask *mx.Array) *mx.Array) func(a []*mx.Array) *mx.Array {
				return func(a []*mx.Array) *mx.Array { return mxtest.Project(f(a[0], a[1], a[2], scale, mask), 5) }
			}
			args := []*mx.Array{q, k, v}
			gGot := mx.Grad(loss(mx.ScaledDotProductAttention), 0, 1, 2)(args)
			gWant := mx.Grad(loss(composedSDPA), 0, 1, 2)(args)
			for i, n := range []string{"q", "k", "v"} {
				if ok, j := mxtest.Close(gGot[i].Float32s(), gWant[i].Float32s(), 1e-4, 1e-5); !ok {
					t.Fatalf("d%s element %d = %v, want %v", n, j, gGot[i].Float32s()[j], gWant[i].Float32s()[j])
				}
			}
		})
	}
}

// TestAttentionFullyMaskedRow: a query that may see no key has softmax over −∞ only,
// which is NaN in the composed form too; the kernel keeps that, and the other rows are
// untouched by it. Query 0 sees nothing; query 1 sees both keys with scores [ln3, 0]
// (as in TestScaledDotProductAttention), so it returns ¾·[4 0] + ¼·[0 8] = [3 2].
func TestAttentionFullyMaskedRow(t *testing.T) {
	e := mxtest.Go(t)
	q := fa(e, []float32{1, 0, 1, 0}, 1, 1, 2, 2)
	k := fa(e, []float32{1, 0, 0, 1}, 1, 1, 2, 2)
	v := fa(e, []float32{4, 0, 0, 8}, 1, 1, 2, 2)
	mask := ba(e, []bool{false, false, true, true}, 2, 2)
	expect(t, mx.ScaledDotProductAttention(q, k, v, ln3, mask), mx.Float32, []int{1, 1, 2, 2}, []float32{nan, nan, 3, 2}, 1e-6)
	expect(t, composedSDPA(q, k, v, ln3, mask), mx.Float32, []int{1, 1, 2, 2}, []float32{nan, nan, 3, 2}, 1e-6)
}

// TestAttentionGradOnlyWhereTraced: with only v traced, dv is Pᵀ·g. One query row,
// scores [ln3, 0] → P = [¾, ¼]; with loss Σ out (g = 1 on both output columns) dv row j
// is P_j·[1 1], so dv = [[¾ ¾] [¼ ¼]].
func TestAttentionGradOnlyWhereTraced(t *testing.T) {
	e := mxtest.Go(t)
	q := fa(e, []float32{1, 0}, 1, 1, 1, 2)
	k := fa(e, []float32{1, 0, 0, 1}, 1, 1, 2, 2)
	v := fa(e, []float32{4, 0, 0, 8}, 1, 1, 2, 2)
	g := mx.Grad(func(a []*mx.Array) *mx.Array {
		return mx.Sum(mx.ScaledDotProductAttention(q, k, a[0], ln3, nil), false)
	})([]*mx.Array{v})
	expect(t, g[0], mx.Float32, []int{1, 1, 2, 2}, []float32{0.75, 0.75, 0.25, 0.25}, 1e-6)
}

// TestMatmulGradBroadcast checks the matmul VJP's transposed products on batch layouts
// the model does not use: B batched with A broadcast, both broadcast against each other,
// and a B with a leading unit batch axis (summed inside one product).
func TestMatmulGradBroadcast(t *testing.T) {
	e := mxtest.Go(t)
	for i, s := range [][2][]int{
		{{3, 4}, {2, 4, 5}},
		{{2, 1, 3, 4}, {1, 3, 4, 2}},
		{{2, 3, 4}, {1, 4, 5}},
	} {
		t.Run(fmt.Sprint(s), func(t *testing.T) {
			rng := newRand(uint64(40 + i))
			args := []*mx.Array{mxtest.RandN(e, rng, s[0]...), mxtest.RandN(e, rng, s[1]...)}
			f := func(a []*mx.Array) *mx.Array { return mxtest.Project(mx.Matmul(a[0], a[1]), uint64(i)) }
			mxtest.GradCheck(t, f, args, []int{0, 1}, mxtest.GradCheckOptions{})
		})
	}
}

// BenchmarkAttentionStep is forward plus backward of the decoder's attention shape (see
// BenchmarkAttention, with GQA over 4 kv heads) with q, k and v traced: 2 products in
// the forward (scores, P·V) and 5 in the backward (scores again, dV, dP, dQ, dK), each
// 2·Lq·Lk·D flops per query head.
func BenchmarkAttentionStep(b *testing.B) {
	const B, H, Hkv, Lq, Lk, D = 1, 8, 4, 256, 256 + 256, 64
	e := mxtest.Go(b)
	rng := newRand(3)
	q := mxtest.RandN(e, rng, B, H, Lq, D)
	k := mxtest.RandN(e, rng, B, Hkv, Lk, D)
	v := mxtest.RandN(e, rng, B, Hkv, Lk, D)
	step := mx.ValueAndGrad(func(a []*mx.Array) []*mx.Array {
		return []*mx.Array{mx.Sum(mx.ScaledDotProductAttention(a[0], a[1], a[2], 0.125, nil), false)}
	}, 0, 1, 2)
	for b.Loop() {
		vals, grads := step([]*mx.Array{q, k, v})
		mx.Eval(append(vals, grads...)...)
	}
	reportGFLOPs(b, 7*2*B*H*Lq*Lk*D)
}
