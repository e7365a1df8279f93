package quant

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkPackers times decoding a 4-bit [512, 1024] weight into sgemm panels, one
// k-block of 256 at a time, in both layouts; ns/weight is the cost per weight element.
func BenchmarkPackers(b *testing.B) {
	const rows, cols, kb = 512, 1024, 256
	p := Params{Bits: 4, GroupSize: 64}
	rng := rand.New(rand.NewPCG(1, 1))
	packed, scales, biases, _, _ := randQ(b, rng, 1, rows, cols, p)
	w := newQmat(packed, scales, biases, rows, cols, p)
	dst := make([]float32, kb*512)
	b.Run("T", func(b *testing.B) { // op(B) = Wᵀ: k along cols, 512-wide column tiles over rows
		for b.Loop() {
			for pc := 0; pc < cols; pc += kb {
				w.packT(dst, pc, kb, 0, rows)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/(rows*cols), "ns/weight")
	})
	b.Run("N", func(b *testing.B) { // op(B) = W: k along rows
		for b.Loop() {
			for pc := 0; pc < rows; pc += kb {
				for j0 := 0; j0 < cols; j0 += 512 {
					w.packN(dst, pc, kb, j0, 512)
				}
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/(rows*cols), "ns/weight")
	})
}

// BenchmarkPackersCold is BenchmarkPackers with the weight cold: each call decodes the
// next of a pool of [512, 1024] 4-bit weights (words, scales and biases, 384 MiB in all:
// past the last-level cache of the machines this runs on), as a training step's
// decoders read every weight from memory.
func BenchmarkPackersCold(b *testing.B) {
	const rows, cols, kb = 512, 1024, 256
	p := Params{Bits: 4, GroupSize: 64}
	wpr, ng := PackedCols(cols, p.Bits), cols/p.GroupSize
	per := rows*wpr*4 + 2*rows*ng*4
	pool := make([]qmat, (384<<20)/per)
	for i := range pool {
		packed := make([]uint32, rows*wpr)
		for j := range packed {
			packed[j] = uint32(j*2654435761 + i)
		}
		scales, biases := make([]float32, rows*ng), make([]float32, rows*ng)
		for j := range scales {
			scales[j], biases[j] = 0.01, -0.08
		}
		pool[i] = newQmat(packed, scales, biases, rows, cols, p)
	}
	dst := make([]float32, kb*512)
	b.Run("T", func(b *testing.B) {
		i := 0
		for b.Loop() {
			w := pool[i%len(pool)]
			for pc := 0; pc < cols; pc += kb {
				w.packT(dst, pc, kb, 0, rows)
			}
			i++
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/(rows*cols), "ns/weight")
	})
	b.Run("N", func(b *testing.B) {
		i := 0
		for b.Loop() {
			w := pool[i%len(pool)]
			for pc := 0; pc < rows; pc += kb {
				for j0 := 0; j0 < cols; j0 += 512 {
					w.packN(dst, pc, kb, j0, 512)
				}
			}
			i++
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/(rows*cols), "ns/weight")
	})
}
