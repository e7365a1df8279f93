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

// TestPackBByDefinition: packB's panels — the eight-row groups of packBRows, the
// transposing runs and the edge loops — hold exactly op(B)[pc + p, j0 + q·nr + j] at
// q·kb·nr + p·nr + j, zero past nt, for both layouts, k blocks that are and are not
// multiples of 8 and column counts with a partial last panel.
func TestPackBByDefinition(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	const rows, cols = 300, 90 // op(B) is rows×cols
	b := randMat(rng, rows*cols)
	for _, tr := range []Trans{NoTrans, Transposed} {
		ldb := cols
		if tr {
			ldb = rows // b holds op(B)ᵀ: cols rows of length rows
		}
		for _, c := range [][4]int{{0, 8, 0, 16}, {5, 64, 3, 40}, {1, 7, 16, 5}, {17, 256, 0, 90}, {40, 13, 70, 20}} {
			pc, kb, j0, nt := c[0], c[1], c[2], c[3]
			t.Run(fmt.Sprintf("trans=%v/pc=%d/kb=%d/j0=%d/nt=%d", tr, pc, kb, j0, nt), func(t *testing.T) {
				op := func(p, j int) float32 {
					if tr {
						return b[j*ldb+p]
					}
					return b[p*ldb+j]
				}
				want := make([]float32, roundUp(nt, nr)*kb)
				for q := 0; q < roundUp(nt, nr)/nr; q++ {
					for p := range kb {
						for j := range nr {
							if q*nr+j < nt {
								want[q*kb*nr+p*nr+j] = op(pc+p, j0+q*nr+j)
							}
						}
					}
				}
				got := randMat(rng, len(want)) // garbage: every element must be written
				packB(got, b, ldb, tr, pc, kb, j0, nt)
				if !slices.Equal(got, want) {
					t.Fatal("packed panels differ from op(B) by definition")
				}
			})
		}
	}
}
