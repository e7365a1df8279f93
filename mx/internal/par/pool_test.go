package par

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestRunWorkers: work runs on the caller and at most workers−1 helpers, every call has
// returned when Run returns, and tasks pulled from a counter are all done exactly once —
// back to back (helpers still spinning), after a pause longer than spinFor (helpers
// parked), nested, and from several goroutines at once (more workers wanted than there
// are idle helpers, so fresh ones join the pool).
func TestRunWorkers(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	check := func(t *testing.T, workers int) {
		const tasks = 64
		var calls, running atomic.Int32
		var next atomic.Int32
		var done [tasks]atomic.Int32
		Run(workers, func() {
			running.Add(1)
			calls.Add(1)
			for {
				i := next.Add(1) - 1
				if i >= tasks {
					break
				}
				time.Sleep(time.Microsecond)
				done[i].Add(1)
			}
			running.Add(-1)
		})
		if c := calls.Load(); c < 1 || c > int32(workers) {
			t.Fatalf("%d workers: work called %d times", workers, c)
		}
		if r := running.Load(); r != 0 {
			t.Fatalf("%d workers: Run returned with %d calls still running", workers, r)
		}
		for i := range done {
			if d := done[i].Load(); d != 1 {
				t.Fatalf("%d workers: task %d done %d times", workers, i, d)
			}
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
		if o := outer.Load(); o < 1 || o > 3 {
			t.Fatalf("nested: outer work called %d times", o)
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

// TestRunUsesHelpers: a region long enough for helpers to arrive runs on several
// goroutines at once (the pool does hand out work).
func TestRunUsesHelpers(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	var running, most atomic.Int32
	Run(4, func() {
		n := running.Add(1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		time.Sleep(20 * time.Millisecond)
		running.Add(-1)
	})
	if most.Load() < 2 {
		t.Fatalf("at most %d goroutines ran the region at once", most.Load())
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
			for {
				i := int(next.Add(1) - 1)
				if i >= workers {
					return
				}
				out[i] = in[i] * 2
			}
		})
		for i := range out {
			if out[i] != (round+i)*2 {
				t.Fatalf("round %d: out[%d] = %d", round, i, out[i])
			}
		}
	}
}
