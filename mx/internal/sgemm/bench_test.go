package sgemm

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
)

// benchShapes: the square products, a decode-style row against a hidden×hidden
// projection (2816 is the real model's hidden size), and the `bench` preset's training
// shapes — 256 or 512 tokens through 512→1024 projections and the 512→8192 LM head.
var benchShapes = [][3]int{
	{1024, 1024, 1024}, {512, 512, 512}, {1, 2816, 2816},
	{256, 512, 1024}, {512, 512, 1024}, {256, 512, 8192}, {512, 512, 8192},
}

// reportGFLOPs reports flops an iteration as GFLOP/s.
func reportGFLOPs(b *testing.B, flops float64) {
	b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

func benchGemm(b *testing.B, kern kernels, workers int, ta, tb Trans, m, k, n int) {
	rng := rand.New(rand.NewPCG(1, 1))
	a, bm := randMat(rng, m*k), randMat(rng, k*n)
	lda, ldb := k, n
	if ta {
		lda = m
	}
	if tb {
		ldb = k
	}
	c := make([]float32, m*n)
	p := problem{ta: ta, tb: tb, m: m, n: n, k: k, a: a, lda: lda, b: bm, ldb: ldb, c: c, ldc: n}
	for b.Loop() {
		p.run(kern, workers)
	}
	reportGFLOPs(b, 2*float64(m*n*k))
}

// BenchmarkGemm is the default kernel on all cores (GOMAXPROCS) for C = A·B.
func BenchmarkGemm(b *testing.B) {
	for _, s := range benchShapes {
		b.Run(fmt.Sprintf("%s/%dx%dx%d", kernelName(), s[0], s[1], s[2]), func(b *testing.B) {
			benchGemm(b, defaultKernels(), maxProcs(), NoTrans, NoTrans, s[0], s[1], s[2])
		})
	}
}

// BenchmarkGemmTrans covers the layouts the backward pass produces: g·Bᵀ (NT) and Aᵀ·g (TN).
func BenchmarkGemmTrans(b *testing.B) {
	for _, tr := range [][2]Trans{{NoTrans, Transposed}, {Transposed, NoTrans}} {
		b.Run(fmt.Sprintf("ta=%v_tb=%v/512x512x1024", tr[0], tr[1]), func(b *testing.B) {
			benchGemm(b, defaultKernels(), maxProcs(), tr[0], tr[1], 512, 512, 1024)
		})
	}
}

// BenchmarkGemmSingleCore is one goroutine, for per-core efficiency, with the portable
// kernel alongside.
func BenchmarkGemmSingleCore(b *testing.B) {
	for _, kn := range kernelSets() {
		for _, s := range [][3]int{{512, 512, 512}, {1, 2816, 2816}} {
			b.Run(fmt.Sprintf("%s/%dx%dx%d", kn.name, s[0], s[1], s[2]), func(b *testing.B) {
				benchGemm(b, kn.k, 1, NoTrans, NoTrans, s[0], s[1], s[2])
			})
		}
	}
}

func maxProcs() int { return runtime.GOMAXPROCS(0) }
