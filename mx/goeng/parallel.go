package goeng

import (
	"runtime"
	"sync"
)

// parallelFor runs body over [0, n) split into at most GOMAXPROCS contiguous chunks.
// cost is the approximate work per item; small jobs run inline to avoid goroutine
// overhead.
func parallelFor(n int, cost int, body func(lo, hi int)) {
	if n <= 0 {
		return
	}
	workers := runtime.GOMAXPROCS(0)
	if workers <= 1 || n*max(cost, 1) < 32768 || n == 1 {
		body(0, n)
		return
	}
	workers = min(workers, n)
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
