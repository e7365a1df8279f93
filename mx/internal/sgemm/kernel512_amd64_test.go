//go:build amd64 && !purego

// The AVX-512 kernels' tests skip on a CPU without AVX-512F (this development machine and
// CI have none). To run them where the CPU has it (the GPU machine's Xeon), build static
// test binaries here and run them there from the repository root, with
// GOENG_REQUIRE_AVX512=1 so that a CPU without AVX-512F fails instead of skipping:
//
//	bash bench/avx512_tests.sh build   # here: .devbin-avx512/{sgemm,quant,goeng}.test
//	bash bench/avx512_tests.sh run     # there: every test of those packages, verbose
//
// (The same as: CGO_ENABLED=0 go test -c -o .devbin-avx512/sgemm.test ./mx/internal/sgemm,
// then in mx/internal/sgemm: GOENG_REQUIRE_AVX512=1 ../../../.devbin-avx512/sgemm.test -test.v.)

package sgemm

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/dgtune/dgtune/mx/internal/cputest"
)

// TestAVX512MatchesAVX2: the AVX-512 pair kernel forms every element exactly as the AVX2
// tile kernel does, so a product is bitwise the same with or without it — for every
// transpose, with and without accumulation, with padded strides, edge tiles, odd row
// counts (a tile left without a pair) and more than one k-block.
func TestAVX512MatchesAVX2(t *testing.T) {
	cputest.RequireAVX512(t, hasAVX512())
	with := defaultKernels()
	if with.pair == nil {
		t.Fatal("AVX-512 CPU but no pair kernel chosen")
	}
	without := avx2Kernels()
	shapes := [][3]int{{12, 16, 16}, {6, 16, 16}, {18, 7, 33}, {30, 300, 50}, {144, 256, 512}, {256, 512, 1024}, {97, 513, 130}, {17, 1, 16}}
	sameAcrossKernels(t, rand.New(rand.NewPCG(11, 12)), with, without, shapes, [3]int{3, 5, 2}, "AVX-512 result differs from AVX2")
}

// TestWideMatchesPair: the 12×32 wide kernel and the edge kernels form every element as
// the 12×16 pair kernel (and the 6×16 tile kernel through its scratch tile) do, so
// products are bitwise the same with or without them — an even and an odd number of
// panels (a last panel left without a partner), edge columns, row counts that leave 1 to
// 11 rows below the last whole pair, products smaller than one tile, several k-blocks,
// every transpose, accumulation and several workers.
func TestWideMatchesPair(t *testing.T) {
	cputest.RequireAVX512(t, hasAVX512())
	with := defaultKernels()
	if with.wide == nil || with.edge == nil {
		t.Fatal("AVX-512 CPU but no wide or edge kernel chosen")
	}
	wideOnly := with
	wideOnly.edge = nil
	without := wideOnly
	without.wide = nil
	shapes := [][3]int{{12, 16, 32}, {24, 7, 48}, {41, 300, 512}, {45, 512, 40}, {384, 512, 1024}, {17, 33, 100},
		{11, 64, 64}, {383, 64, 383}, {5, 20, 3}, {7, 9, 17}, {1, 5, 31}, {30, 70, 47}, {13, 8, 15}}
	sameAcrossKernels(t, rand.New(rand.NewPCG(41, 42)), with, without, shapes, [3]int{3, 5, 2}, "wide and edge result differs from the pair kernel's")
	sameAcrossKernels(t, rand.New(rand.NewPCG(43, 44)), wideOnly, without, shapes, [3]int{3, 5, 2}, "wide result differs from the pair kernel's")
}

// TestInplaceMatchesPacked: reading A in place (products at most inplaceMaxN wide, in
// whole panel pairs) forms every element as the packed kernels do — transposed and
// untransposed A, padded strides, several k-blocks, rows past the last block of twelve
// (packed, through the edge kernel), accumulation and several workers — and the plan
// takes it exactly for those widths.
func TestInplaceMatchesPacked(t *testing.T) {
	cputest.RequireAVX512(t, hasAVX512())
	with := defaultKernels()
	if with.inplace == nil {
		t.Fatal("AVX-512 CPU but no in-place kernel chosen")
	}
	without := with
	without.inplace = nil
	shapes := [][3]int{{12, 5, 32}, {24, 64, 64}, {383, 512, 64}, {512, 383, 64}, {17, 300, 96}, {7, 33, 128}, {100, 1, 64}, {30, 257, 32}}
	sameAcrossKernels(t, rand.New(rand.NewPCG(51, 52)), with, without, shapes, [3]int{3, 5, 2}, "in-place result differs from the packed kernels'")
	for _, c := range []struct {
		n, lda int
		want   bool
	}{{32, 64, true}, {64, 383, true}, {128, 64, true}, {48, 64, false}, {160, 64, false}, {16, 64, false}, {64, 1024, false}, {64, 2048, false}} {
		if got := newPlan(&problem{m: 100, n: c.n, k: 64, lda: c.lda}, with).inplaceA; got != c.want {
			t.Errorf("N=%d lda=%d: inplaceA %v, want %v", c.n, c.lda, got, c.want)
		}
	}
}

// BenchmarkKernelSets compares the AVX2 tile kernel, the AVX-512 pair kernel and the
// wide kernel on one core and on all of them.
func BenchmarkKernelSets(b *testing.B) {
	cputest.RequireAVX512(b, hasAVX512())
	pair := defaultKernels()
	pair.wide = nil
	for _, ks := range []namedKernels{{"avx2", avx2Kernels()}, {"pair", pair}, {"avx512", defaultKernels()}} {
		for _, s := range [][3]int{{256, 512, 1024}, {512, 512, 512}} {
			for _, w := range []int{1, maxProcs()} {
				b.Run(fmt.Sprintf("%s/%dx%dx%d/w%d", ks.name, s[0], s[1], s[2], w), func(b *testing.B) {
					benchGemm(b, ks.k, w, NoTrans, NoTrans, s[0], s[1], s[2])
				})
			}
		}
	}
}

// TestThinMatchesTile: a product with few k steps (a LoRA rank) gives the same bits
// through the thin kernel (A read in place, B packed once) as through the packed tile
// kernels — with and without accumulation, for both layouts of B (a transposed A takes
// the tile path either way), edge columns, rows past the last block of eight, products
// too short for a block and several workers.
func TestThinMatchesTile(t *testing.T) {
	cputest.RequireAVX512(t, hasAVX512())
	with := defaultKernels()
	if with.thin == nil {
		t.Fatal("AVX-512 CPU but no thin kernel chosen")
	}
	without := with
	without.thin = nil
	shapes := [][3]int{{17, 8, 16}, {384, 8, 512}, {100, 1, 33}, {23, 16, 7}, {300, 32, 200}, {64, 4, 2048}, {9, 12, 100}, {200, 33, 64}}
	sameAcrossKernels(t, rand.New(rand.NewPCG(31, 32)), with, without, shapes, [3]int{3, 2, 1}, "thin result differs from the tile kernels'")
}

// BenchmarkThin times LoRA up-projection shapes (rank 8: (x·A)·B and its input gradient,
// B untransposed and transposed) with and without the thin kernel.
func BenchmarkThin(b *testing.B) {
	cputest.RequireAVX512(b, hasAVX512())
	with := defaultKernels()
	without := with
	without.thin = nil
	for _, ks := range []namedKernels{{"tile", without}, {"thin", with}} {
		for _, s := range [][3]int{{384, 8, 512}, {384, 8, 2048}} {
			for _, tb := range []Trans{NoTrans, Transposed} {
				b.Run(fmt.Sprintf("%s/tb=%v/%dx%dx%d", ks.name, tb, s[0], s[1], s[2]), func(b *testing.B) {
					benchGemm(b, ks.k, maxProcs(), NoTrans, tb, s[0], s[1], s[2])
				})
			}
		}
	}
}

// TestSkinnyT16MatchesSkinny: a transposed A at most one panel wide gives the same bits
// through the sixteen-row AVX-512 skinny kernel as through the eight-row one — edge
// columns, rows left over past the last group of sixteen or eight, several k-blocks,
// accumulation and several workers.
func TestSkinnyT16MatchesSkinny(t *testing.T) {
	cputest.RequireAVX512(t, hasAVX512())
	with := defaultKernels()
	if with.skinnyT16 == nil {
		t.Fatal("AVX-512 CPU but no sixteen-row skinny kernel chosen")
	}
	without := with
	without.skinnyT16 = nil
	shapes := [][3]int{{16, 1, 8}, {512, 384, 8}, {40, 300, 8}, {33, 513, 16}, {100, 64, 12}, {24, 7, 5}, {2048, 384, 8}}
	sameAcrossKernels(t, rand.New(rand.NewPCG(33, 34)), with, without, shapes, [3]int{3, 2, 1}, "sixteen-row skinny result differs from the eight-row kernel's")
}

// BenchmarkKernelInL1 is the wide kernel alone on one core, its packed A (2mr×kc), B
// (kc×2nr) and C tile reused call after call so that all of them stay in L1: the
// micro-kernel's own ceiling, against which a whole product's rate (BenchmarkGemmSingleCore)
// and the FMA peak (BenchmarkFMAPeak) are read.
func BenchmarkKernelInL1(b *testing.B) {
	cputest.RequireAVX512(b, hasAVX512())
	rng := rand.New(rand.NewPCG(41, 42))
	for _, kc := range []int{64, 128, 256} {
		b.Run(fmt.Sprintf("kc%d", kc), func(b *testing.B) {
			a0, a1 := randMat(rng, mr*kc), randMat(rng, mr*kc)
			b0, b1 := randMat(rng, nr*kc), randMat(rng, nr*kc)
			c := randMat(rng, 2*mr*2*nr)
			for b.Loop() {
				kernelWideAVX512(kc, a0, a1, b0, b1, nr, c, 2*nr, true)
			}
			reportGFLOPs(b, 2*float64(2*mr*2*nr*kc))
		})
	}
}
