//go:build amd64 && !purego

package sgemm

import (
	"fmt"
	"sync"
	"testing"
)

// BenchmarkFMAPeak is the FMA peak of 1 and of GOMAXPROCS cores — twelve independent
// fused multiply-adds per iteration on registers, one goroutine per core — with YMM
// registers and, where the CPU has AVX-512, ZMM: the rate the whole step's GFLOP/s are
// quoted against.
func BenchmarkFMAPeak(b *testing.B) {
	if !hasAVX2FMA() {
		b.Skip("CPU without AVX2 and FMA")
	}
	type peak struct {
		name  string
		run   func(n int)
		flops float64 // per iteration
	}
	peaks := []peak{{"ymm", fmaPeakY, 12 * 8 * 2}}
	if hasAVX512() {
		peaks = append(peaks, peak{"zmm", fmaPeakZ, 12 * 16 * 2})
	}
	const iters = 1 << 20
	for _, p := range peaks {
		for _, w := range []int{1, maxProcs()} {
			b.Run(fmt.Sprintf("%s/w%d", p.name, w), func(b *testing.B) {
				for b.Loop() {
					var wg sync.WaitGroup
					for range w {
						wg.Go(func() { p.run(iters) })
					}
					wg.Wait()
				}
				reportGFLOPs(b, p.flops*iters*float64(w))
			})
		}
	}
}
