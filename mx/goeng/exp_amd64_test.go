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
