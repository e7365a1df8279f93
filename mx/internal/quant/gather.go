package quant

import (
	"fmt"
	"runtime"
)

// GatherMatmulT is gather_qmm(x, W, rhs_indices=idx, transpose=true) with
// one x row per index: y[m, :] = x[m, :]·W[idx[m]]ᵀ for a stack W[E, N, K]
// quantized along K — the quantized SwitchLinear forward. y is overwritten.
// It panics if the sizes disagree or an index lies outside [0, E).
func GatherMatmulT(y, x []float32, M int, idx []int32, packed []uint32, scales, biases []float32, E, N, K int, p Params) {
	checkQ("GatherMatmulT", packed, scales, biases, E, N, K, p)
	checkDense("GatherMatmulT", "x", len(x), M, K)
	checkDense("GatherMatmulT", "y", len(y), M, N)
	if M == 0 {
		return
	}
	w := newQmat(packed, scales, biases, N, K, p)
	gather("GatherMatmulT", y, x, M, idx, E, N, K, tileN, func(ys, xs []float32, rows, e, n0, n1 int, sc *scratch) {
		mmT(ys, xs, rows, w.expert(e), n0, n1, sc)
	}, func(ys, xs []float32, rows, e int) {
		gemmT(ys, xs, rows, w.expert(e))
	})
}

// GatherMatmul is gather_qmm(x, W, rhs_indices=idx, transpose=false) with
// one x row per index: y[m, :] = x[m, :]·W[idx[m]] for a stack W[E, K, N]
// quantized along N. y is overwritten. It panics if the sizes disagree or an
// index lies outside [0, E).
func GatherMatmul(y, x []float32, M int, idx []int32, packed []uint32, scales, biases []float32, E, K, N int, p Params) {
	checkQ("GatherMatmul", packed, scales, biases, E, K, N, p)
	checkDense("GatherMatmul", "x", len(x), M, K)
	checkDense("GatherMatmul", "y", len(y), M, N)
	if M == 0 {
		return
	}
	w := newQmat(packed, scales, biases, K, N, p)
	gather("GatherMatmul", y, x, M, idx, E, N, K, p.GroupSize, func(ys, xs []float32, rows, e, c0, c1 int, sc *scratch) {
		mm(ys, xs, rows, w.expert(e), c0, c1, sc)
	}, func(ys, xs []float32, rows, e int) {
		gemmN(ys, xs, rows, w.expert(e))
	})
}

// gather groups the rows of x by expert (a stable counting sort), copies
// them into contiguous blocks, computes each expert's block and scatters the
// results back. An expert with at least gemmMinRows rows is one gemm call:
// a large one runs alone (parallel inside, experts one after another), a
// small one is a work item. The other experts are cut into (expert,
// output-column range) work items for kernel, with ranges split on multiples
// of align so that kernels keep their tile/group alignment. Work items run in
// parallel.
func gather(op string, y, x []float32, M int, idx []int32, E, N, K, align int,
	kernel func(ys, xs []float32, rows, e, n0, n1 int, sc *scratch),
	gemm func(ys, xs []float32, rows, e int)) {
	if len(idx) != M {
		panic(fmt.Sprintf("quant.%s: %d indices for %d rows", op, len(idx), M))
	}
	start := make([]int, E+1) // rows of expert e are sorted rows start[e]..start[e+1]
	for m, e := range idx {
		if e < 0 || int(e) >= E {
			panic(fmt.Sprintf("quant.%s: index %d of row %d outside [0, %d)", op, e, m, E))
		}
		start[e+1]++
	}
	for e := range E {
		start[e+1] += start[e]
	}
	order := make([]int, M) // sorted position → original row
	next := append([]int(nil), start[:E]...)
	for m, e := range idx {
		order[next[e]] = m
		next[e]++
	}
	xs := make([]float32, M*K)
	for i, m := range order {
		copy(xs[i*K:(i+1)*K], x[m*K:(m+1)*K])
	}
	ys := make([]float32, M*N)

	// An item is an output-column range of one expert for kernel, or (whole)
	// an expert's gemm small enough to run on one goroutine.
	type item struct {
		e, n0, n1 int
		whole     bool
	}
	var items []item
	procs := runtime.GOMAXPROCS(0)
	work := 0 // multiply-adds left to the items
	for e := range E {
		rows := start[e+1] - start[e]
		if rows == 0 {
			continue
		}
		if rows >= gemmMinRows {
			if rows*N*K < minParallelWork {
				items = append(items, item{e: e, whole: true})
				work += rows * N * K
				continue
			}
			s := start[e]
			gemm(ys[s*N:start[e+1]*N], xs[s*K:start[e+1]*K], rows, e)
			continue
		}
		work += rows * N * K
		parts := min(procs, max(1, rows*N*K/minParallelWork))
		step := ((N+parts-1)/parts + align - 1) / align * align
		for n0 := 0; n0 < N; n0 += step {
			items = append(items, item{e: e, n0: n0, n1: min(n0+step, N)})
		}
	}
	forEach(len(items), work, func() func(lo, hi int) {
		var sc scratch
		return func(lo, hi int) {
			for _, it := range items[lo:hi] {
				s, t := start[it.e], start[it.e+1]
				if it.whole {
					gemm(ys[s*N:t*N], xs[s*K:t*K], t-s, it.e)
				} else {
					kernel(ys[s*N:t*N], xs[s*K:t*K], t-s, it.e, it.n0, it.n1, &sc)
				}
			}
		}
	})
	for i, m := range order {
		copy(y[m*N:(m+1)*N], ys[i*N:(i+1)*N])
	}
}
