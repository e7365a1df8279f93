package sgemm

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestPackAByDefinition: packA's panels — through the AVX2 transposing kernel where built,
// the unsafe copies and the edge loops — hold exactly op(A)[i0 + q·mr + i, pc + p] at
// q·kb·mr + p·mr + i, zero past mt, for both layouts, k blocks that are and are not
// multiples of 8, and row counts with a partial last panel.
func TestPackAByDefinition(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	const rows, cols = 40, 300
	a := randMat(rng, rows*cols)
	for _, tr := range []Trans{NoTrans, Transposed} {
		lda := cols
		if tr {
			lda = rows // a holds op(A)ᵀ: cols rows of length rows
		}
		for _, c := range [][4]int{{0, 6, 0, 8}, {3, 12, 5, 64}, {0, 13, 1, 7}, {6, 5, 17, 9}, {2, 30, 40, 256}} {
			i0, mt, pc, kb := c[0], c[1], c[2], c[3]
			if tr {
				i0 %= rows - mt // op(A) has only rows rows here: keep the case inside it
			}
			t.Run(fmt.Sprintf("trans=%v/i0=%d/mt=%d/pc=%d/kb=%d", tr, i0, mt, pc, kb), func(t *testing.T) {
				op := func(i, p int) float32 {
					if tr {
						return a[p*lda+i]
					}
					return a[i*lda+p]
				}
				want := make([]float32, roundUp(mt, mr)*kb)
				for q := 0; q < roundUp(mt, mr)/mr; q++ {
					for p := range kb {
						for i := range mr {
							if q*mr+i < mt {
								want[q*kb*mr+p*mr+i] = op(i0+q*mr+i, pc+p)
							}
						}
					}
				}
				got := randMat(rng, len(want)) // garbage: every element must be written
				packA(got, a, lda, tr, i0, mt, pc, kb)
				if !slices.Equal(got, want) {
					t.Fatal("packed panels differ from op(A) by definition")
				}
			})
		}
	}
}
