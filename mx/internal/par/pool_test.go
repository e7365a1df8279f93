package par

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestRunEveryWorkerOnce: each of a region's workers calls work exactly once and Run
// returns only after all have returned — back to back (helpers still spinning), after a
// pause longer than spinFor (helpers parked), nested, and from several goroutines at once
// (more workers wanted than there are idle helpers, so fresh ones join the pool).
func TestRunEveryWorkerOnce(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	check := func(t *testing.T, workers int) {
		var calls, running atomic.Int32
		Run(workers, func() {
			running.Add(1)
			time.Sleep(50 * time.Microsecond)
			calls.Add(1)
			running.Add(-1)
		})
		if c := calls.Load(); c != int32(workers) {
			t.Fatalf("%d workers: work called %d times", workers, c)
		}
		if r := running.Load(); r != 0 {
			t.Fatalf("%d workers: Run returned with %d still running", workers, r)
		}
	}
	for _, procs := range []int{2, 4, 64} { // 64: oversubscribed here, so no spinning
		runtime.GOMAXPROCS(procs)
		for _, workers := range []int{1, 2, 3, 8} {
			check(t, workers)
			check(t, workers)
		}
		time.Sleep(3 * spinFor)
		check(t, 4)
		var outer atomic.Int32
		Run(3, func() {
			outer.Add(1)
			check(t, 3)
		})
		if outer.Load() != 3 {
			t.Fatalf("nested: outer work called %d times", outer.Load())
		}
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for range 20 {
					check(t, 3)
				}
			})
		}
		wg.Wait()
	}
}

// TestRunSeesWritesBothWays: what the caller wrote before Run is visible to every worker,
// and what the workers wrote is visible to the caller after Run (the region's start and
// end order memory, as WaitGroup did).
func TestRunSeesWritesBothWays(t *testing.T) {
	const workers = 4
	for round := range 200 {
		in := make([]int, workers)
		for i := range in {
			in[i] = round + i
		}
		out := make([]int, workers)
		var next atomic.Int32
		Run(workers, func() {
			i := int(next.Add(1) - 1)
			out[i] = in[i] * 2
		})
		for i := range out {
			if out[i] != (round+i)*2 {
				t.Fatalf("round %d: out[%d] = %d", round, i, out[i])
			}
		}
	}
}
