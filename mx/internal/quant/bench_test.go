package quant

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// reportGFLOPs reports flops an iteration as GFLOP/s.
func reportGFLOPs(b *testing.B, flops float64) {
	b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

// BenchmarkMatmulT covers the hot shapes: a decode-style single row against
// a hidden×hidden projection, and a training micro-batch.
func BenchmarkMatmulT(b *testing.B) {
	for _, s := range []struct{ M, K, N int }{{1, 2816, 2816}, {256, 512, 1024}} {
		for _, bits := range []int{4, 8} {
			p := Params{Bits: bits, GroupSize: 64}
			b.Run(fmt.Sprintf("M=%d_K=%d_N=%d_bits=%d", s.M, s.K, s.N, bits), func(b *testing.B) {
				rng := rand.New(rand.NewPCG(1, 1))
				packed, scales, biases, _, _ := randQ(b, rng, 1, s.N, s.K, p)
				x := randX(rng, s.M*s.K)
				y := make([]float32, s.M*s.N)
				for b.Loop() {
					MatmulT(y, x, s.M, packed, scales, biases, s.N, s.K, p)
				}
				reportGFLOPs(b, 2*float64(s.M*s.N*s.K))
			})
		}
	}
}

// BenchmarkMatmul is the non-transposed twin (p·E, input gradients).
func BenchmarkMatmul(b *testing.B) {
	for _, s := range []struct{ M, K, N int }{{1, 2816, 2816}, {256, 512, 1024}} {
		p := Params{Bits: 4, GroupSize: 64}
		b.Run(fmt.Sprintf("M=%d_K=%d_N=%d_bits=4", s.M, s.K, s.N), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 1))
			packed, scales, biases, _, _ := randQ(b, rng, 1, s.K, s.N, p)
			x := randX(rng, s.M*s.K)
			y := make([]float32, s.M*s.N)
			for b.Loop() {
				Matmul(y, x, s.M, packed, scales, biases, s.K, s.N, p)
			}
			reportGFLOPs(b, 2*float64(s.M*s.N*s.K))
		})
	}
}

// BenchmarkMatmulReal is the real geometry's attention projections over a step's 384
// rows, 4-bit: q_proj (2816 → 2048) and o_proj (2048 → 2816), forward x·Wᵀ (T) and the
// backward's g·W (N) against the same weight. The op profile at 16 threads had the
// forward LoRA linears at 591–873 GFLOP/s and their backward at 938–971.
func BenchmarkMatmulReal(b *testing.B) {
	const M = 384
	p := Params{Bits: 4, GroupSize: 64}
	for _, s := range []struct {
		name    string
		in, out int
	}{{"q_proj", 2816, 2048}, {"o_proj", 2048, 2816}} {
		rng := rand.New(rand.NewPCG(1, 1))
		packed, scales, biases, _, _ := randQ(b, rng, 1, s.out, s.in, p) // W [out, in]
		x, g := randX(rng, M*s.in), randX(rng, M*s.out)
		y, dx := make([]float32, M*s.out), make([]float32, M*s.in)
		flops := 2 * float64(M*s.in*s.out)
		b.Run(s.name+"/T", func(b *testing.B) {
			for b.Loop() {
				MatmulT(y, x, M, packed, scales, biases, s.out, s.in, p)
			}
			reportGFLOPs(b, flops)
		})
		b.Run(s.name+"/N", func(b *testing.B) {
			for b.Loop() {
				Matmul(dx, g, M, packed, scales, biases, s.out, s.in, p)
			}
			reportGFLOPs(b, flops)
		})
	}
}

// BenchmarkGemmThreshold times the few-row kernels against GemmPacked for the
// row counts around gemmMinRows (run with -cpu 1 for a per-core comparison).
func BenchmarkGemmThreshold(b *testing.B) {
	const K, N = 512, 1024
	for _, bits := range []int{3, 4} {
		p := Params{Bits: bits, GroupSize: 64}
		rng := rand.New(rand.NewPCG(1, 1))
		packed, scales, biases, _, _ := randQ(b, rng, 1, N, K, p)
		wt := newQmat(packed, scales, biases, N, K, p) // [N, K] for x·Wᵀ
		wn := newQmat(packed, scales, biases, K*2, N/2, p)
		for _, M := range []int{2, 3, 4, 6, 8, 32} {
			x := randX(rng, M*2*K)
			y := make([]float32, M*N)
			for _, c := range []struct {
				name string
				run  func()
			}{
				{"T_rows", func() { matmulTRows(y, x[:M*K], M, wt) }},
				{"T_gemm", func() { gemmT(y, x[:M*K], M, wt) }},
				{"N_rows", func() { matmulRows(y[:M*N/2], x, M, wn) }},
				{"N_gemm", func() { gemmN(y[:M*N/2], x, M, wn) }},
			} {
				b.Run(fmt.Sprintf("bits=%d/M=%d/%s", bits, M, c.name), func(b *testing.B) {
					for b.Loop() {
						c.run()
					}
					reportGFLOPs(b, 2*float64(M*N*K))
				})
			}
		}
	}
}
