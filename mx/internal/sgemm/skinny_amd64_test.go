//go:build amd64 && !purego

package sgemm

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestSkinnyMatchesTile: a product at most one panel wide gives the same bits through the
// skinny kernel (A read in place) as through the packed tile kernel — for both layouts of
// A and B, with and without accumulation, edge columns (N not a multiple of 8), rows left
// over past the last group of 8, several k-blocks and several workers.
func TestSkinnyMatchesTile(t *testing.T) {
	if !hasAVX2FMA() {
		t.Skip("CPU without AVX2/FMA")
	}
	with := avx2Kernels()
	without := with
	without.skinny = nil
	shapes := [][3]int{{8, 1, 8}, {8, 512, 8}, {13, 7, 5}, {256, 512, 8}, {300, 513, 16}, {97, 300, 12}, {512, 256, 1}, {16, 64, 9}}
	sameAcrossKernels(t, rand.New(rand.NewPCG(21, 22)), with, without, shapes, [3]int{3, 2, 1}, "skinny result differs from the tile kernel's")
}

// BenchmarkSkinny times LoRA-shaped products (rank 8) with and without the skinny kernel.
func BenchmarkSkinny(b *testing.B) {
	if !hasAVX2FMA() {
		b.Skip("CPU without AVX2/FMA")
	}
	with := defaultKernels()
	without := with
	without.skinny = nil
	for _, ks := range []namedKernels{{"tile", without}, {"skinny", with}} {
		for _, c := range []struct {
			ta      Trans
			m, k, n int
		}{{NoTrans, 256, 512, 8}, {NoTrans, 256, 1024, 8}, {Transposed, 512, 256, 8}} {
			b.Run(fmt.Sprintf("%s/trans=%v/%dx%dx%d", ks.name, c.ta, c.m, c.k, c.n), func(b *testing.B) {
				benchGemm(b, ks.k, maxProcs(), c.ta, NoTrans, c.m, c.k, c.n)
			})
		}
	}
}
