package goeng_test

import (
	"fmt"
	"testing"

	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
)

// reportGFLOPs reports flops per iteration as GFLOP/s over the timed loop.
func reportGFLOPs(b *testing.B, flops float64) { reportRate(b, flops, "GFLOP/s") }

// reportGelems reports elems elements an iteration as billions a second.
func reportGelems(b *testing.B, elems int) { reportRate(b, float64(elems), "Gelem/s") }

// reportRate reports perOp units an iteration as billions a second.
func reportRate(b *testing.B, perOp float64, unit string) {
	b.ReportMetric(perOp*float64(b.N)/b.Elapsed().Seconds()/1e9, unit)
}

// BenchmarkMatmul covers a square training-size product, a decode-style vector against
// a hidden×hidden projection (2816 is the model's hidden size), and 1024³.
func BenchmarkMatmul(b *testing.B) {
	for _, s := range []struct{ M, K, N int }{{512, 512, 512}, {1, 2816, 2816}, {1024, 1024, 1024}} {
		b.Run(fmt.Sprintf("%dx%dx%d", s.M, s.K, s.N), func(b *testing.B) {
			e := mxtest.Go(b)
			rng := newRand(1)
			x := mxtest.RandN(e, rng, s.M, s.K)
			w := mxtest.RandN(e, rng, s.K, s.N)
			for b.Loop() {
				mx.Eval(mx.Matmul(x, w))
			}
			reportGFLOPs(b, 2*float64(s.M*s.K*s.N))
		})
	}
}

// BenchmarkQuantizedMatmul is x·Wᵀ with a 4-bit W [N, K], group 64: a LoRA-training
// micro-batch through a quantized projection.
func BenchmarkQuantizedMatmul(b *testing.B) {
	const M, K, N = 256, 512, 1024
	e := mxtest.Go(b)
	rng := newRand(2)
	x := mxtest.RandN(e, rng, M, K)
	wq, s, bias := mx.Quantize(mxtest.RandN(e, rng, N, K), 64, 4)
	for b.Loop() {
		mx.Eval(mx.QuantizedMatmul(x, wq, s, bias, true, 64, 4))
	}
	reportGFLOPs(b, 2*M*K*N)
}

// BenchmarkAttention is the decoder's shape: a 256-token canvas attending to 256 cached
// prompt positions plus itself (Lq 256, Lk 512), 8 heads of 64. Two matmuls of
// 2·Lq·Lk·D flops per head.
func BenchmarkAttention(b *testing.B) {
	const B, H, Lq, Lk, D = 1, 8, 256, 256 + 256, 64
	e := mxtest.Go(b)
	rng := newRand(3)
	q := mxtest.RandN(e, rng, B, H, Lq, D)
	k := mxtest.RandN(e, rng, B, H, Lk, D)
	v := mxtest.RandN(e, rng, B, H, Lk, D)
	for b.Loop() {
		mx.Eval(mx.ScaledDotProductAttention(q, k, v, 0.125, nil))
	}
	reportGFLOPs(b, 4*B*H*Lq*Lk*D)
}

// BenchmarkMLPStep is one forward+backward of a 256→1024→256 GELU MLP on a batch of
// 128. The backward pass costs two matmuls per forward matmul, so a step is 3× the
// forward flops 2·2·128·256·1024.
func BenchmarkMLPStep(b *testing.B) {
	const batch, in, hidden = 128, 256, 1024
	e := mxtest.Go(b)
	rng := newRand(4)
	x := mxtest.RandN(e, rng, batch, in)
	y := mxtest.RandN(e, rng, batch, in)
	w1 := mx.MulScalar(mxtest.RandN(e, rng, in, hidden), 0.06)
	w2 := mx.MulScalar(mxtest.RandN(e, rng, hidden, in), 0.03)
	step := mx.ValueAndGrad(func(a []*mx.Array) []*mx.Array {
		h := mx.GELUTanh(mx.Matmul(a[2], a[0]))
		return []*mx.Array{mx.Mean(mx.Square(mx.Subtract(mx.Matmul(h, a[1]), a[3])), false)}
	}, 0, 1)
	for b.Loop() {
		vals, grads := step([]*mx.Array{w1, w2, x, y})
		mx.Eval(append(vals, grads...)...)
	}
	reportGFLOPs(b, 3*2*2*batch*in*hidden)
}

// BenchmarkArgpartitionRouter is the router's top-k selection at the bench preset: 384
// tokens over 32 experts, and the real geometry's 128.
func BenchmarkArgpartitionRouter(b *testing.B) {
	for _, experts := range []int{32, 128} {
		b.Run(fmt.Sprintf("384x%d", experts), func(b *testing.B) {
			e := mxtest.Go(b)
			x := mxtest.RandN(e, newRand(6), 384, experts)
			for b.Loop() {
				mx.Eval(mx.Argpartition(x, experts-4, -1))
			}
		})
	}
}

// BenchmarkRMSNorm is the bench preset's norm over a step's rows (384 × 512, a frozen
// weight): the forward alone, and the forward with the backward's dx.
func BenchmarkRMSNorm(b *testing.B) {
	const rows, d = 384, 512
	e := mxtest.Go(b)
	rng := newRand(7)
	x := mxtest.RandN(e, rng, rows, d)
	w := mxtest.RandN(e, rng, d)
	g := mxtest.RandN(e, rng, rows, d)
	mx.Eval(x, w, g)
	b.Run("forward", func(b *testing.B) {
		for b.Loop() {
			mx.Eval(mx.RMSNorm(x, w, 1e-6))
		}
		reportGelems(b, rows*d)
	})
	b.Run("forward+backward", func(b *testing.B) {
		step := mx.ValueAndGrad(func(a []*mx.Array) []*mx.Array {
			return []*mx.Array{mx.Sum(mx.Multiply(mx.RMSNorm(a[0], w, 1e-6), g), false)}
		})
		for b.Loop() {
			outs, grads := step([]*mx.Array{x})
			mx.Eval(append(outs, grads...)...)
		}
		reportGelems(b, rows*d)
	})
}
