package quant

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkGather times the experts' products of the bench preset's training step —
// 384 tokens × top-4 = 1536 rows sorted over 32 experts, gate/up [512 → 512] and down
// [256 → 512] — forward (GatherMatmulT) and input gradient (GatherMatmul), 4-bit in
// groups of 64: the go engine's gather_qmm and its VJP (mx/goeng).
func BenchmarkGather(b *testing.B) {
	const E, rows = 32, 1536
	p := Params{Bits: 4, GroupSize: 64}
	idx := make([]int32, rows)
	for i := range idx {
		idx[i] = int32(i * E / rows)
	}
	for _, s := range []struct {
		name string
		N, K int // the weight [E, N, K]
	}{{"gate_up", 512, 512}, {"down", 512, 256}} {
		rng := rand.New(rand.NewPCG(1, 1))
		packed, scales, biases, _, _ := randQ(b, rng, E, s.N, s.K, p)
		flops := 2 * float64(rows*s.N*s.K)
		b.Run(fmt.Sprintf("%s/forward", s.name), func(b *testing.B) {
			x, y := randX(rng, rows*s.K), make([]float32, rows*s.N)
			for b.Loop() {
				GatherMatmulT(y, x, rows, idx, packed, scales, biases, E, s.N, s.K, p, true)
			}
			reportGFLOPs(b, flops)
		})
		b.Run(fmt.Sprintf("%s/input_gradient", s.name), func(b *testing.B) {
			g, dx := randX(rng, rows*s.N), make([]float32, rows*s.K)
			for b.Loop() {
				GatherMatmul(dx, g, rows, idx, packed, scales, biases, E, s.N, s.K, p, true)
			}
			reportGFLOPs(b, flops)
		})
	}
}
