package goeng

import (
	"runtime"
	"sync"
)

// minChunkWork is the least work (items × cost) worth a goroutine of its own: starting
// and joining one costs about a microsecond, as much as ~32k cheap element operations.
const minChunkWork = 32768

// parallelFor runs body over [0, n) split into at most GOMAXPROCS contiguous chunks,
// and no more chunks than there are minChunkWork units of work, so that a small job on
// a machine with many cores does not pay for goroutines it cannot keep busy. cost is
// the approximate work per item; small jobs run inline.
func parallelFor(n int, cost int, body func(lo, hi int)) {
	if n <= 0 {
		return
	}
	workers := runtime.GOMAXPROCS(0)
	work := n * max(cost, 1)
	if workers <= 1 || work < minChunkWork || n == 1 {
		body(0, n)
		return
	}
	workers = min(workers, n, max(2, work/minChunkWork))
	var wg sync.WaitGroup
	chunk := (n + workers - 1) / workers
	for lo := 0; lo < n; lo += chunk {
		hi := min(lo+chunk, n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			body(lo, hi)
		}()
	}
	wg.Wait()
}
