//go:build amd64 && !purego

package goeng

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestExpKernelMatchesGo: the AVX2 exp kernel writes the bits expInto's Go loop writes and
// returns the same float64 sum, over lengths around multiples of 8 and arguments across
// the softmax range, below the cut-off, −∞, NaN, and positive ones (a shift that is not
// the maximum).
func TestExpKernelMatchesGo(t *testing.T) {
	if !expAVX2 {
		t.Skip("CPU without AVX2")
	}
	rng := rand.New(rand.NewPCG(4, 4))
	for _, c := range []struct {
		n       int
		withNaN bool
	}{{1, false}, {7, false}, {8, true}, {9, false}, {15, true}, {16, false}, {17, false}, {64, true}, {1000, false}, {1000, true}, {8192, false}} {
		n := c.n
		src := make([]float32, n)
		for i := range src {
			k := rng.IntN(20)
			if k == 1 && !c.withNaN {
				k = 4
			}
			switch k {
			case 0:
				src[i] = float32(math.Inf(-1))
			case 1:
				src[i] = float32(math.NaN())
			case 2:
				src[i] = -100 - float32(rng.Float64()*50)
			case 3:
				src[i] = 1 + float32(rng.Float64()*20)
			default:
				src[i] = -float32(rng.Float64() * 90)
			}
		}
		shift := float32(0.25)
		got := make([]float32, n)
		gotSum := expInto(got, src, shift)
		expAVX2 = false
		want := make([]float32, n)
		wantSum := expInto(want, src, shift)
		expAVX2 = true
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(got[i] != got[i] && want[i] != want[i]) {
				t.Fatalf("n=%d: element %d (x=%v): kernel %v, Go %v", n, i, src[i], got[i], want[i])
			}
		}
		if math.Float64bits(gotSum) != math.Float64bits(wantSum) && !(math.IsNaN(gotSum) && math.IsNaN(wantSum)) {
			t.Fatalf("n=%d: sum %v, Go %v", n, gotSum, wantSum)
		}
	}
}

// TestMaxKernelMatchesLoop: the AVX max kernel finds the maximum softmaxLSE's loop finds —
// NaNs skipped, −∞ rows, zeros of both signs (where only the sign of a zero maximum may
// differ) — and softmaxLSE gives the same bits with it as with the loop alone.
func TestMaxKernelMatchesLoop(t *testing.T) {
	if !expAVX2 {
		t.Skip("CPU without AVX2")
	}
	rng := rand.New(rand.NewPCG(6, 6))
	negZero := float32(math.Copysign(0, -1))
	for _, n := range []int{8, 16, 24, 32, 40, 64, 100, 383, 1024} {
		for _, kind := range []string{"mixed", "all -inf", "zeros", "nan first"} {
			row := make([]float32, n)
			for i := range row {
				switch kind {
				case "all -inf":
					row[i] = float32(math.Inf(-1))
				case "zeros":
					row[i] = []float32{0, negZero, -3}[rng.IntN(3)]
				default:
					switch rng.IntN(10) {
					case 0:
						row[i] = float32(math.NaN())
					case 1:
						row[i] = float32(math.Inf(-1))
					default:
						row[i] = float32(rng.NormFloat64() * 10)
					}
				}
			}
			if kind == "nan first" {
				row[0] = float32(math.NaN())
			}
			want := float32(math.Inf(-1))
			for _, v := range row[:n/8*8] {
				if v > want {
					want = v
				}
			}
			if got := maxKernel(&row[0], n/8*8); got != want && !(got == 0 && want == 0) {
				t.Fatalf("n=%d %s: kernel max %v, loop %v", n, kind, got, want)
			}
			withK := append([]float32(nil), row...)
			lseK := softmaxLSE(withK)
			expAVX2 = false
			withLoop := append([]float32(nil), row...)
			lseLoop := softmaxLSE(withLoop)
			expAVX2 = true
			if math.Float64bits(lseK) != math.Float64bits(lseLoop) && !(math.IsNaN(lseK) && math.IsNaN(lseLoop)) {
				t.Fatalf("n=%d %s: lse %v with the kernel, %v without", n, kind, lseK, lseLoop)
			}
			for i := range withK {
				if math.Float32bits(withK[i]) != math.Float32bits(withLoop[i]) && !(withK[i] != withK[i] && withLoop[i] != withLoop[i]) {
					t.Fatalf("n=%d %s: softmax element %d: %v with the kernel, %v without", n, kind, i, withK[i], withLoop[i])
				}
			}
		}
	}
}
