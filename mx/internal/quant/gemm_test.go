package quant

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestGemmPath runs MatmulT and Matmul with at least gemmMinRows rows, which go
// through sgemm.GemmPacked, on shapes that exercise its edges: K split into several
// k-blocks (K > 256), k-blocks that cut a group of 128 in two (K = 384 splits at 192),
// N that leaves a partial panel or tile, and every code width. The reference is the
// float64 product with the dequantized weight, under checkMatmul's bound.
func TestGemmPath(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	shapes := []struct{ M, N, K int }{
		{gemmMinRows, 33, 384},
		{8, 70, 128},
		{40, 17, 640},
		{13, 160, 96},
	}
	for _, bits := range allBits {
		for _, gs := range allGroups {
			p := Params{Bits: bits, GroupSize: gs}
			for _, s := range shapes {
				name := fmt.Sprintf("%v M=%d N=%d K=%d", p, s.M, s.N, s.K)
				x := randX(rng, s.M*s.K)
				if s.K%gs == 0 {
					packed, scales, biases, w, ab := randQ(t, rng, 1, s.N, s.K, p)
					y := nans(s.M * s.N)
					MatmulT(y, x, s.M, packed, scales, biases, s.N, s.K, p)
					checkMatmul(t, name+" MatmulT", y, x, w, ab, s.M, s.N, s.K, 1, s.K)
				}
				// x·W with W[K, N] needs N (the quantized axis) a multiple of gs.
				n := (s.N + gs - 1) / gs * gs
				packed, scales, biases, w, ab := randQ(t, rng, 1, s.K, n, p)
				y := nans(s.M * n)
				Matmul(y, x, s.M, packed, scales, biases, s.K, n, p)
				checkMatmul(t, name+" Matmul", y, x, w, ab, s.M, n, s.K, n, 1)
			}
		}
	}
}

// TestGatherGemm mixes experts above and below gemmMinRows, and one whose product is
// big enough for sgemm to run it on several goroutines, in both layouts.
func TestGatherGemm(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	const E, N, K = 4, 128, 512
	// expert 0: 1 row (kernels); 1: gemmMinRows = 3 rows, 3·128·512 < 2^18
	// multiply-adds (a single-goroutine gemm item); 2: no rows; 3: 32 rows,
	// 32·128·512 ≥ 2^18 (a gemm of its own, parallel inside).
	var idx []int32
	for m := range 36 {
		switch {
		case m == 7:
			idx = append(idx, 0)
		case m%12 == 1:
			idx = append(idx, 1)
		default:
			idx = append(idx, 3)
		}
	}
	M := len(idx)
	for _, bits := range []int{3, 4, 8} {
		p := Params{Bits: bits, GroupSize: 64}
		x := randX(rng, M*K)
		packed, scales, biases, w, ab := randQ(t, rng, E, N, K, p)
		y := nans(M * N)
		GatherMatmulT(y, x, M, idx, packed, scales, biases, E, N, K, p, false)
		for m, e := range idx {
			lo, hi := int(e)*N*K, (int(e)+1)*N*K
			checkMatmul(t, p.String()+" GatherMatmulT", y[m*N:(m+1)*N], x[m*K:(m+1)*K], w[lo:hi], ab[lo:hi], 1, N, K, 1, K)
		}
		xn := randX(rng, M*N)
		packed, scales, biases, w, ab = randQ(t, rng, E, N, K, p) // stack [E, N, K] as x·W: K' = N, N' = K
		yn := nans(M * K)
		GatherMatmul(yn, xn, M, idx, packed, scales, biases, E, N, K, p, false)
		for m, e := range idx {
			lo, hi := int(e)*N*K, (int(e)+1)*N*K
			checkMatmul(t, p.String()+" GatherMatmul", yn[m*K:(m+1)*K], xn[m*N:(m+1)*N], w[lo:hi], ab[lo:hi], 1, K, N, K, 1)
		}
	}
}

// TestPackers checks packT and packN panel by panel against the dequantized weight,
// including what sgemm never asks for: a first column that is not a multiple of the
// panel width (packN's element path) and a panel cut short (zero past nt). A panel
// entry is s·q + b, the same float32 expression Dequantize evaluates, so the two may
// differ only by one rounding where the compiler fuses the multiply-add.
func TestPackers(t *testing.T) {
	rng := rand.New(rand.NewPCG(25, 26))
	const rows, cols = 40, 256
	for _, bits := range allBits {
		for _, gs := range allGroups {
			p := Params{Bits: bits, GroupSize: gs}
			packed, scales, biases, dense, _ := randQ(t, rng, 1, rows, cols, p)
			w := newQmat(packed, scales, biases, rows, cols, p)
			// packT: op(B)[k, j] = W[j, k], k along cols; blocks start on multiples of 64.
			for _, c := range []struct{ pc, kb, j0, nt int }{{0, 256, 0, 40}, {64, 128, 16, 9}, {192, 64, 3, 20}} {
				dst := nans(roundUp(c.nt, pw) * c.kb)
				w.packT(dst, c.pc, c.kb, c.j0, c.nt)
				checkPanels(t, fmt.Sprintf("%v packT %v", p, c), dst, c.kb, c.nt, func(k, j int) float32 {
					return dense[(c.j0+j)*cols+c.pc+k]
				})
			}
			// packN: op(B)[k, j] = W[k, j], j along cols.
			for _, c := range []struct{ pc, kb, j0, nt int }{{0, 40, 0, 256}, {5, 17, 32, 40}, {1, 30, 200, 56}, {0, 8, 248, 8}} {
				dst := nans(roundUp(c.nt, pw) * c.kb)
				w.packN(dst, c.pc, c.kb, c.j0, c.nt)
				checkPanels(t, fmt.Sprintf("%v packN %v", p, c), dst, c.kb, c.nt, func(k, j int) float32 {
					return dense[(c.pc+k)*cols+c.j0+j]
				})
			}
		}
	}
}

func checkPanels(t *testing.T, name string, dst []float32, kb, nt int, want func(k, j int) float32) {
	t.Helper()
	for q := range roundUp(nt, pw) / pw {
		for k := range kb {
			for j := range pw {
				got := dst[q*kb*pw+k*pw+j]
				var w float32
				if q*pw+j < nt {
					w = want(k, q*pw+j)
				}
				if d := math.Abs(float64(got - w)); !(d <= 1e-6*math.Abs(float64(w))) {
					t.Fatalf("%s: panel %d [%d, %d] = %v, want %v", name, q, k, j, got, w)
				}
			}
		}
	}
}

func nans(n int) []float32 {
	y := make([]float32, n)
	for i := range y {
		y[i] = float32(math.NaN())
	}
	return y
}

func roundUp(n, unit int) int { return (n + unit - 1) / unit * unit }

// TestDecodeAt: codes read from any bit offset equal the codes packed there. The
// stream holds codes 0, 1, 2, ... mod 2^bits, so the code at index i is i mod 2^bits.
func TestDecodeAt(t *testing.T) {
	for _, bits := range allBits {
		codes := make([]uint8, 256)
		for i := range codes {
			codes[i] = uint8(i % (1 << bits))
		}
		words := make([]uint32, len(codes)*bits/32)
		packCodes(words, codes, bits)
		for _, start := range []int{0, 1, 16, 21, 100} {
			got := make([]float32, 37)
			decodeAt(got, words, start*bits, bits)
			for i, v := range got {
				if want := float32((start + i) % (1 << bits)); v != want {
					t.Fatalf("bits=%d start=%d: code %d = %v, want %v", bits, start, i, v, want)
				}
			}
		}
	}
}
