package shapeeng_test

import (
	"testing"

	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/goeng"
	"github.com/dgtune/dgtune/mx/shapeeng"
)

func zeros(e mx.Engine, shape ...int) *mx.Array {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return mx.FromFloat32(e, make([]float32, n), shape...)
}

// heap is u's heap without the products' packing pools (their size is sgemm's to plan).
func heap(u shapeeng.Usage) int64 { return u.Heap - u.Label(shapeeng.LabelPacking) }

// TestUntracedLifetimes: an array dies after its last use. x [1000] float32 (4000 B) → y =
// exp x → z = exp y: while y is made x is still read (8000 B), while z is made y is
// (8000 B); z is never read again, and x is kept.
func TestUntracedLifetimes(t *testing.T) {
	e := shapeeng.New(shapeeng.Options{})
	x := zeros(e, 1000)
	t0 := e.Now()
	y := mx.Exp(x)
	t1 := e.Now()
	mx.Exp(y)
	t2 := e.Now()
	for _, tc := range []struct {
		t    int
		want int64
	}{{t0, 4000}, {t1, 8000}, {t2, 8000}, {t2 + 1, 0}} {
		if got := e.At(tc.t).Heap; got != tc.want {
			t.Errorf("At(%d) = %d B, want %d", tc.t, got, tc.want)
		}
	}
	if p := e.Peak(0); p.Heap != 8000 || p.Time != t1 {
		t.Errorf("peak %d B at %d, want 8000 at %d", p.Heap, p.Time, t1)
	}
	e.Keep("x", x)
	if got := e.At(t2 + 1); got.Heap != 4000 || got.Label("x") != 4000 {
		t.Errorf("kept x after the program: %d B (label x: %d), want 4000", got.Heap, got.Label("x"))
	}
}

// TestViews: a reshape, a transpose of the last two axes and a cast to the same dtype
// make no bytes; a product reads a pending transpose in place, while an elementwise op
// makes its elements once.
func TestViews(t *testing.T) {
	e := shapeeng.New(shapeeng.Options{})
	w := zeros(e, 8, 16) // 512 B
	e.Keep("w", w)
	wt := mx.Transpose(mx.Reshape(w, 8, 16))
	x := zeros(e, 2, 16) // 128 B
	y := mx.Matmul(x, wt)
	if got := heap(e.At(e.Now())); got != 512+128+2*8*4 {
		t.Errorf("after x·wᵀ: %d B, want w 512 + x 128 + y 64", got)
	}
	mx.Exp(wt)
	if got := heap(e.At(e.Now())); got != 512+512+512 {
		t.Errorf("exp of the transpose: %d B, want w 512 + its transpose 512 + the result 512", got)
	}
	_ = y
}

// TestGradient is sum(x·w) differentiated with respect to w, x [4, 8] (128 B) and w
// [8, 2] (64 B, kept). The backward runs the sum's VJP (a [4, 2] broadcast of the seed)
// and then the product's (dw = xᵀ·g, [8, 2]); the go engine's graph keeps x·w (32 B) and
// the sum (4 B) until the walk ends. At the product's VJP: x 128 + w 64 + x·w 32 + sum 4
// + g 32 + dw 64 = 324 B. An engine that frees after the last reader drops x·w after the
// sum reads it: 292 B.
func TestGradient(t *testing.T) {
	for _, tc := range []struct {
		r    shapeeng.Retention
		want int64
	}{{shapeeng.RetainGraph, 324}, {shapeeng.RetainNeeded, 292}} {
		e := shapeeng.New(shapeeng.Options{Retention: tc.r})
		x, w := zeros(e, 4, 8), zeros(e, 8, 2)
		e.Keep("w", w)
		start := e.Now() + 1
		_, grads := mx.ValueAndGrad(func(a []*mx.Array) []*mx.Array {
			return []*mx.Array{mx.Sum(mx.Matmul(x, a[0]), false)}
		})([]*mx.Array{w})
		if got := heap(e.Peak(start)); got != tc.want {
			t.Errorf("%s: peak %d B, want %d", tc.r, got, tc.want)
		}
		if s := grads[0].Shape(); len(s) != 2 || s[0] != 8 || s[1] != 2 || grads[0].DType() != mx.Float32 {
			t.Errorf("%s: gradient %v %s, want [8 2] float32", tc.r, s, grads[0].DType())
		}
	}
}

// TestGradCheckpoint: ten exps of a kept x [1000] (4000 B each) keep all ten results in
// the graph; as two checkpointed blocks of five the forward keeps each block's output
// only. At the end of the forward: x 4000 + 10·4000 + the sum 4 = 44004 B; checkpointed
// x 4000 + 2·4000 + 4 = 12004 B.
func TestGradCheckpoint(t *testing.T) {
	exps := func(x *mx.Array, n int) *mx.Array {
		for range n {
			x = mx.Exp(x)
		}
		return x
	}
	for _, tc := range []struct {
		ckpt bool
		want int64
	}{{false, 44004}, {true, 12004}} {
		e := shapeeng.New(shapeeng.Options{})
		x := zeros(e, 1000)
		e.Keep("x", x)
		var end int
		mx.ValueAndGrad(func(a []*mx.Array) []*mx.Array {
			h := a[0]
			for range 2 {
				if tc.ckpt {
					h = mx.GradCheckpoint(func(in []*mx.Array) []*mx.Array { return []*mx.Array{exps(in[0], 5)} })([]*mx.Array{h})[0]
				} else {
					h = exps(h, 5)
				}
			}
			s := mx.Sum(h, false)
			end = e.Now()
			return []*mx.Array{s}
		})([]*mx.Array{x})
		if got := e.At(end).Heap; got != tc.want {
			t.Errorf("checkpoint %v: %d B at the end of the forward, want %d", tc.ckpt, got, tc.want)
		}
	}
}

// TestAttention: the fused attention's memory is goeng's plan. q [1, 4, 8, 16] (a
// parameter), k and v [1, 2, 16, 16]: two kv-head blocks of 2·8 query rows by 16 keys,
// 512 probabilities, kept for the backward (2048 B), beside the output (2048 B) and a
// float64 log-sum-exp per query row (4·8·8 = 256 B); the backward's dP is as large.
func TestAttention(t *testing.T) {
	plan := goeng.AttentionMemoryOf(1, 4, 2, 8, 16)
	if plan.Kept != 512 || plan.BackwardScratch != 512 || plan.ForwardScratch != 0 {
		t.Fatalf("plan %+v, want 512 kept, 512 backward, no forward scratch", plan)
	}
	e := shapeeng.New(shapeeng.Options{})
	q, k, v := zeros(e, 1, 4, 8, 16), zeros(e, 1, 2, 16, 16), zeros(e, 1, 2, 16, 16)
	e.Keep("q", q)
	var end int
	mx.ValueAndGrad(func(a []*mx.Array) []*mx.Array {
		s := mx.Sum(mx.ScaledDotProductAttention(a[0], k, v, 1, nil), false)
		end = e.Now()
		return []*mx.Array{s}
	})([]*mx.Array{q})
	if got := e.At(end).Label("scaled_dot_product_attention"); got != 2048+2048+256 {
		t.Errorf("after the forward the attention holds %d B, want 4352", got)
	}
	if got := e.Peak(end).Label("attention scores"); got != 2048 {
		t.Errorf("attention scratch at the peak %d B, want dP's 2048", got)
	}
}

// TestLoaded: mapped checkpoint pages are counted apart from the heap.
func TestLoaded(t *testing.T) {
	e := shapeeng.New(shapeeng.Options{})
	e.Loaded("codes", []int{16, 4}, mx.Uint32, true)
	e.Loaded("scales", []int{16, 2}, mx.Float32, false)
	u := e.At(e.Now())
	if u.Mapped != 256 || u.Heap != 128 || u.Total() != 384 || u.Label("codes") != 256 {
		t.Errorf("usage %+v, want 256 B mapped (codes) and 128 B heap", u)
	}
}
