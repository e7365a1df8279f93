package goeng

import (
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
)

// TestArgsortFloatRowMatchesSliceStable wants the insertion sort of short rows to give
// exactly sort.SliceStable's indices (NaNs last, ties in index order), on rows with ties,
// NaNs and infinities, at lengths around insertionMaxRow.
func TestArgsortFloatRowMatchesSliceStable(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for _, n := range []int{0, 1, 2, 5, 32, insertionMaxRow, insertionMaxRow + 1, 128} {
		for trial := range 50 {
			row := make([]float32, n)
			for i := range row {
				switch r := rng.IntN(10); {
				case r == 0:
					row[i] = float32(math.NaN())
				case r == 1:
					row[i] = float32(math.Inf(1 - 2*rng.IntN(2)))
				case r < 5:
					row[i] = float32(rng.IntN(3)) // ties
				default:
					row[i] = float32(rng.NormFloat64())
				}
			}
			want := make([]int32, n)
			for i := range want {
				want[i] = int32(i)
			}
			sort.SliceStable(want, func(a, b int) bool {
				va, vb := row[want[a]], row[want[b]]
				if va != va {
					return false
				}
				return vb != vb || va < vb
			})
			got := make([]int32, n)
			argsortFloatRow(row, got)
			if !slices.Equal(got, want) {
				t.Fatalf("n=%d trial %d: row %v\ngot  %v\nwant %v", n, trial, row, got, want)
			}
		}
	}
}
