package quant

import (
	"fmt"
	"runtime"

	"github.com/dgtune/dgtune/mx/internal/sgemm"
)

// GatherMatmulT is gather_qmm(x, W, rhs_indices=idx, transpose=true) with
// one x row per index: y[m, :] = x[m, :]·W[idx[m]]ᵀ for a stack W[E, N, K]
// quantized along K — the quantized SwitchLinear forward. y is overwritten.
// sorted promises that idx is non-decreasing (rows already grouped by expert,
// MLX's sorted_indices): the rows are then used in place instead of being
// sorted into a copy. It panics if the sizes disagree, an index lies outside
// [0, E) or sorted indices are not sorted.
func GatherMatmulT(y, x []float32, M int, idx []int32, packed []uint32, scales, biases []float32, E, N, K int, p Params, sorted bool) {
	checkQ("GatherMatmulT", packed, scales, biases, E, N, K, p)
	checkDense("GatherMatmulT", "x", len(x), M, K)
	checkDense("GatherMatmulT", "y", len(y), M, N)
	if M == 0 {
		return
	}
	w := newQmat(packed, scales, biases, N, K, p)
	gather("GatherMatmulT", y, x, M, idx, E, N, K, tileN, sorted, func(ys, xs []float32, rows, e, n0, n1 int, sc *scratch) {
		mmT(ys, xs, rows, w.expert(e), n0, n1, sc)
	}, func(ys, xs []float32, rows, e int) sgemm.Product {
		we := w.expert(e)
		return sgemm.Product{M: rows, N: we.rows, K: we.cols, A: xs, LDA: we.cols, Pack: we.packT, C: ys, LDC: we.rows}
	})
}

// GatherMatmul is gather_qmm(x, W, rhs_indices=idx, transpose=false) with
// one x row per index: y[m, :] = x[m, :]·W[idx[m]] for a stack W[E, K, N]
// quantized along N. y is overwritten. sorted is as for GatherMatmulT. It
// panics if the sizes disagree, an index lies outside [0, E) or sorted
// indices are not sorted.
func GatherMatmul(y, x []float32, M int, idx []int32, packed []uint32, scales, biases []float32, E, K, N int, p Params, sorted bool) {
	checkQ("GatherMatmul", packed, scales, biases, E, K, N, p)
	checkDense("GatherMatmul", "x", len(x), M, K)
	checkDense("GatherMatmul", "y", len(y), M, N)
	if M == 0 {
		return
	}
	w := newQmat(packed, scales, biases, K, N, p)
	gather("GatherMatmul", y, x, M, idx, E, N, K, p.GroupSize, sorted, func(ys, xs []float32, rows, e, c0, c1 int, sc *scratch) {
		mm(ys, xs, rows, w.expert(e), c0, c1, sc)
	}, func(ys, xs []float32, rows, e int) sgemm.Product {
		we := w.expert(e)
		return sgemm.Product{M: rows, N: we.cols, K: we.rows, A: xs, LDA: we.rows, Pack: we.packN, C: ys, LDC: we.cols}
	})
}

// Segments returns, for indices into E experts, where each expert's rows start in
// expert order: rows of expert e are sorted positions start[e]..start[e+1]. When
// sorted is set the indices must already be non-decreasing (the positions are the
// rows themselves); otherwise order maps sorted positions to rows (a stable counting
// sort). It panics, naming op, on an index outside [0, E) or unsorted sorted indices.
func Segments(op string, idx []int32, E int, sorted bool) (start, order []int) {
	start = make([]int, E+1)
	prev := int32(0)
	for m, e := range idx {
		if e < 0 || int(e) >= E {
			panic(fmt.Sprintf("%s: index %d of row %d outside [0, %d)", op, e, m, E))
		}
		if sorted && e < prev {
			panic(fmt.Sprintf("%s: sorted indices decrease at row %d (%d after %d)", op, m, e, prev))
		}
		prev = e
		start[e+1]++
	}
	for e := range E {
		start[e+1] += start[e]
	}
	if sorted {
		return start, nil
	}
	order = make([]int, len(idx)) // sorted position → original row
	next := append([]int(nil), start[:E]...)
	for m, e := range idx {
		order[next[e]] = m
		next[e]++
	}
	return start, order
}

// gather groups the rows of x by expert (a stable counting sort into a copy,
// unless they come sorted), computes each expert's block and scatters the
// results back. Experts with at least gemmMinRows rows are products of one
// sgemm.Batch, whose goroutines share the tiles of all of them; the other
// experts are cut into (expert, output-column range) work items for kernel,
// with ranges split on multiples of align so that kernels keep their
// tile/group alignment. Work items run in parallel.
func gather(op string, y, x []float32, M int, idx []int32, E, N, K, align int, sorted bool,
	kernel func(ys, xs []float32, rows, e, n0, n1 int, sc *scratch),
	product func(ys, xs []float32, rows, e int) sgemm.Product) {
	if len(idx) != M {
		panic(fmt.Sprintf("quant.%s: %d indices for %d rows", op, len(idx), M))
	}
	start, order := Segments("quant."+op, idx, E, sorted)
	xs, ys := x, y
	if !sorted {
		xs = make([]float32, M*K)
		for i, m := range order {
			copy(xs[i*K:(i+1)*K], x[m*K:(m+1)*K])
		}
		ys = make([]float32, M*N)
	}

	// An item is an output-column range of one expert for kernel.
	type item struct{ e, n0, n1 int }
	var items []item
	var prods []sgemm.Product
	procs := runtime.GOMAXPROCS(0)
	work := 0 // multiply-adds left to the items
	for e := range E {
		s, t := start[e], start[e+1]
		rows := t - s
		if rows == 0 {
			continue
		}
		if rows >= gemmMinRows {
			prods = append(prods, product(ys[s*N:t*N], xs[s*K:t*K], rows, e))
			continue
		}
		work += rows * N * K
		parts := min(procs, max(1, rows*N*K/minParallelWork))
		step := ((N+parts-1)/parts + align - 1) / align * align
		for n0 := 0; n0 < N; n0 += step {
			items = append(items, item{e: e, n0: n0, n1: min(n0+step, N)})
		}
	}
	sgemm.Batch(prods)
	forEach(len(items), work, func() func(lo, hi int) {
		var sc scratch
		return func(lo, hi int) {
			for _, it := range items[lo:hi] {
				s, t := start[it.e], start[it.e+1]
				kernel(ys[s*N:t*N], xs[s*K:t*K], t-s, it.e, it.n0, it.n1, &sc)
			}
		}
	})
	if !sorted {
		for i, m := range order {
			copy(y[m*N:(m+1)*N], ys[i*N:(i+1)*N])
		}
	}
}
