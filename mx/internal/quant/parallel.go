package quant

import (
	"runtime"
	"sync/atomic"

	"github.com/dgtune/dgtune/mx/internal/par"
)

// minParallelWork is the work (≈ multiply-adds) below which starting
// goroutines costs more than it saves: ~250k MACs take ~100µs on one core,
// goroutine start and join take a few µs.
const minParallelWork = 1 << 18

// forEach calls body(lo, hi) over disjoint chunks covering [0, n). mk runs
// once per goroutine so each can own its scratch buffers. Small work runs
// on the calling goroutine; large work on up to GOMAXPROCS goroutines that
// pull chunks from a shared counter, so uneven chunks still balance.
func forEach(n, work int, mk func() func(lo, hi int)) {
	if n <= 0 {
		return
	}
	procs := min(runtime.GOMAXPROCS(0), n, max(1, work/minParallelWork))
	if procs <= 1 || work < minParallelWork {
		par.Run(1, func() { mk()(0, n) })
		return
	}
	chunks := min(n, 4*procs)
	size := (n + chunks - 1) / chunks
	var next atomic.Int64
	par.Run(procs, func() {
		body := mk()
		for {
			lo := int(next.Add(int64(size))) - size
			if lo >= n {
				return
			}
			body(lo, min(lo+size, n))
		}
	})
}
