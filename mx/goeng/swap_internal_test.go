package goeng

import (
	"math"
	"slices"
	"testing"

	"github.com/dgtune/dgtune/mx/internal/dims"

	"github.com/dgtune/dgtune/mx"
)

func seqTensor(shape ...int) *tensor {
	v := make([]float32, dims.Numel(shape))
	for i := range v {
		v[i] = float32(math.Sin(float64(i)*0.37)) + float32(i%7)*0.125
	}
	return newTensor(shape, mx.Float32, v)
}

// TestSwapViewPending: a transpose of the last two axes computes no elements until
// something other than a product reads them; products through it equal products of the
// materialised transpose bit for bit; a swap of a swap is the source; other permutations
// are materialised at once.
func TestSwapViewPending(t *testing.T) {
	w := seqTensor(2, 5, 3) // [batch, rows, cols]
	wt := transposeKernel(w, []int{0, 2, 1})
	if wt.swapped() != w || wt.swap.data != nil || !slices.Equal(wt.shape, []int{2, 3, 5}) {
		t.Fatalf("swap view: src %p (want %p), data %v, shape %v", wt.swapped(), w, wt.swap.data, wt.shape)
	}
	x := seqTensor(2, 4, 3)
	got := matmulKernel(x, wt).f32()
	if wt.swap.data != nil {
		t.Fatal("matmul materialised the pending transpose")
	}
	dense := view(w, []int{2, 3, 5}, []int{15, 1, 3}, 0)
	want := matmulKernel(x, dense).f32()
	if !slices.Equal(got, want) {
		t.Fatalf("x·swap(w) = %v, want %v", got, want)
	}
	// A transposed left operand, and its VJP products.
	a := transposeKernel(seqTensor(3, 4), []int{1, 0}) // [4, 3]
	b := seqTensor(3, 2)
	if g, w := matmulKernel(a, b).f32(), matmulKernel(view(seqTensor(3, 4), []int{4, 3}, []int{1, 4}, 0), b).f32(); !slices.Equal(g, w) {
		t.Fatalf("swap(a)·b = %v, want %v", g, w)
	}
	// Reading the elements materialises them once, in row-major order of the new shape.
	if g := wt.f32(); !slices.Equal(g, dense.f32()) {
		t.Fatalf("elements %v, want %v", g, dense.f32())
	}
	if wt.swap.data == nil {
		t.Fatal("elements read but not kept")
	}
	if back := transposeKernel(wt, []int{0, 2, 1}); back.swapped() != nil || !slices.Equal(back.f32(), w.f32()) || !slices.Equal(back.shape, w.shape) {
		t.Fatalf("swap of swap: %v %v", back.shape, back.f32())
	}
	if p := transposeKernel(w, []int{1, 0, 2}); p.swapped() != nil || p.data == nil {
		t.Fatal("a non-swap permutation should be computed at once")
	}
	// Reshape and elementwise ops see the transposed elements.
	r := reshapeKernel(transposeKernel(w, []int{0, 2, 1}), []int{30})
	if !slices.Equal(r.f32(), dense.f32()) {
		t.Fatalf("reshape of a swap: %v", r.f32())
	}
}
