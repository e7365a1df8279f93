package goeng

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/dgtune/dgtune/mx"
)

// TestExpRow: expRow's e^(x − shift) is within 2 float32 ulps (relative 2.4e-7) of
// math.Exp across the softmax range, exact at 0 (e⁰ = 1: n = 0, r = 0, table entry 1),
// 0 below the smallest normal float32 and for −∞, NaN for NaN; the returned sum is the
// sum of what it wrote.
func TestExpRow(t *testing.T) {
	var xs []float32
	for x := float32(-87); x <= 0; x += 0.0137 {
		xs = append(xs, x)
	}
	xs = append(xs, 0, -1e-30, -0.5*float32(math.Ln2)/64, float32(math.Inf(-1)), -88, -1000)
	const shift = 2.5
	row := make([]float32, len(xs))
	for i, x := range xs {
		row[i] = x + shift
	}
	sum := expRow(row, shift)
	var want float64
	for i, x := range xs {
		got := row[i]
		want += float64(got)
		ref := math.Exp(float64(row0(x, shift)))
		switch {
		case x < -87.3:
			if got != 0 {
				t.Fatalf("e^%v = %v, want 0", x, got)
			}
		case math.Abs(float64(got)-ref) > 2.4e-7*ref:
			t.Fatalf("e^%v = %v, want %v (relative error %.2g)", x, got, ref, math.Abs(float64(got)-ref)/ref)
		}
	}
	if row[len(xs)-6] != 1 {
		t.Errorf("e^0 = %v, want exactly 1", row[len(xs)-6])
	}
	if math.Abs(sum-want) > 1e-12*want {
		t.Errorf("sum %v, want %v", sum, want)
	}
	nan := []float32{float32(math.NaN()), 1}
	expRow(nan, 1)
	if !math.IsNaN(float64(nan[0])) || nan[1] != 1 {
		t.Errorf("expRow([NaN 1], 1) = %v, want [NaN 1]", nan)
	}
}

// row0 is the argument expRow actually exponentiates: (x + shift) − shift in float32.
func row0(x, shift float32) float32 { return (x + shift) - shift }

// TestLogSumExpRowMatchesFloat64: the log-sum-exp over a vocabulary-sized row, with its
// exponentials from expInto, is within float32 rounding of the float64 reference, and
// keeps −∞ rows, +∞ and NaN as before.
func TestLogSumExpRowMatchesFloat64(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 9))
	for _, n := range []int{1, 3, 1023, 1024, 1025, 8192, 262144} {
		row := make([]float32, n)
		for i := range row {
			row[i] = float32(rng.NormFloat64() * 8)
		}
		m := math.Inf(-1)
		for _, v := range row {
			m = math.Max(m, float64(v))
		}
		var s float64
		for _, v := range row {
			s += math.Exp(float64(v) - m)
		}
		want := m + math.Log(s)
		got := float64(logSumExpRow(row))
		if d := math.Abs(got - want); d > 2e-6*math.Max(1, math.Abs(want)) {
			t.Errorf("n=%d: logsumexp %v, float64 reference %v (|Δ| %.3g)", n, got, want, d)
		}
	}
	ninf := float32(math.Inf(-1))
	if got := logSumExpRow([]float32{ninf, ninf}); !math.IsInf(float64(got), -1) {
		t.Errorf("all −∞: got %v", got)
	}
	if got := logSumExpRow([]float32{1, float32(math.Inf(1))}); !math.IsInf(float64(got), 1) {
		t.Errorf("with +∞: got %v", got)
	}
	if got := logSumExpRow([]float32{1, float32(math.NaN()), 2}); got == got {
		t.Errorf("with NaN: got %v", got)
	}
}

// TestAttentionKeptMatchesRecomputed: the backward from the forward's kept probabilities
// and the one that recomputes them from the log-sum-exps give the same cotangents to
// float32 rounding — masked (causal, and a fully masked key) and not, with grouped-query
// heads — and a call whose probabilities exceed maxKeptScores keeps none.
func TestAttentionKeptMatchesRecomputed(t *testing.T) {
	rng := rand.New(rand.NewPCG(61, 62))
	const b, hq, hkv, lq, lk, d = 2, 4, 2, 9, 13, 16
	mk := func(shape ...int) *tensor {
		n := 1
		for _, s := range shape {
			n *= s
		}
		return newTensor(shape, mx.Float32, randF32(rng, n))
	}
	q, k, v := mk(b, hq, lq, d), mk(b, hkv, lk, d), mk(b, hkv, lk, d)
	g := randF32(rng, b*hq*lq*d)
	allow := make([]bool, lq*lk)
	for i := range lq {
		for j := range lk {
			allow[i*lk+j] = j <= i+lk-lq && j != 3
		}
	}
	for _, mask := range []*tensor{nil, newTensor([]int{1, 1, lq, lk}, mx.Bool, allow)} {
		kept := newAttention(q, k, v, 0.25, mask)
		_, lse := kept.forward()
		if kept.kept == nil {
			t.Fatal("small call kept no probabilities")
		}
		again := newAttention(q, k, v, 0.25, mask)
		again.forward()
		again.kept = nil // recompute
		got := triple(kept.backward(g, lse, true, true, true))
		want := triple(again.backward(g, lse, true, true, true))
		for i := range got {
			for j := range got[i] {
				if diff := math.Abs(float64(got[i][j] - want[i][j])); diff > 1e-5*(1+math.Abs(float64(want[i][j]))) {
					t.Fatalf("mask %v: cotangent %d element %d: kept %v, recomputed %v", mask != nil, i, j, got[i][j], want[i][j])
				}
			}
		}
		if kept.kept != nil {
			t.Error("the backward did not drop the probabilities it used")
		}
	}
	big := newAttention(mk(1, 1, 1500, 8), mk(1, 1, 1500, 8), mk(1, 1, 1500, 8), 1, nil)
	big.forward()
	if big.kept != nil {
		t.Errorf("a call of %d probabilities kept them (limit %d)", 1500*1500, maxKeptScores)
	}
}

func triple(a, b, c *tensor) [3][]float32 { return [3][]float32{a.f32(), b.f32(), c.f32()} }

// TestAttentionMemoryOf: the plan is what a call holds. Four query heads over two kv heads
// and 8 queries by 16 keys: 2 blocks × 2·8 rows × 16 keys = 512 probabilities, kept for the
// backward (dP as large). Over 1100 queries and keys, 2·2·1100·1100 = 4.84e6 > 2^21: none
// kept; the forward scores both blocks at once (2·2.42e6 floats ≤ 2^23) and the backward one
// block's P and dP at a time (2·2.42e6).
func TestAttentionMemoryOf(t *testing.T) {
	for _, tc := range []struct {
		lq, lk int
		want   AttentionMemory
	}{
		{8, 16, AttentionMemory{Kept: 512, BackwardScratch: 512}},
		{1100, 1100, AttentionMemory{ForwardScratch: 4840000, BackwardScratch: 4840000}},
	} {
		if got := AttentionMemoryOf(1, 4, 2, tc.lq, tc.lk); got != tc.want {
			t.Errorf("%d×%d: %+v, want %+v", tc.lq, tc.lk, got, tc.want)
		}
		q := newTensor([]int{1, 4, tc.lq, 8}, mx.Float32, make([]float32, 4*tc.lq*8))
		kv := newTensor([]int{1, 2, tc.lk, 8}, mx.Float32, make([]float32, 2*tc.lk*8))
		a := newAttention(q, kv, kv, 1, nil)
		a.forward()
		if len(a.kept) != tc.want.Kept {
			t.Errorf("%d×%d: the forward kept %d probabilities, the plan says %d", tc.lq, tc.lk, len(a.kept), tc.want.Kept)
		}
	}
}
