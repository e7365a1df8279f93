package par

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// TestForCoversEachItemOnce runs For over sizes and costs around the chunk threshold at
// several GOMAXPROCS and wants every item visited exactly once, in contiguous chunks.
func TestForCoversEachItemOnce(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, procs := range []int{1, 2, 16} {
		runtime.GOMAXPROCS(procs)
		for _, c := range []struct{ n, cost int }{{0, 1}, {1, 1 << 20}, {7, 1}, {1000, 8}, {1000, 100}, {100003, 1}} {
			seen := make([]atomic.Int32, c.n)
			For(c.n, c.cost, func(lo, hi int) {
				if lo >= hi || lo < 0 || hi > c.n {
					t.Errorf("procs %d n %d: chunk [%d, %d)", procs, c.n, lo, hi)
					return
				}
				for i := lo; i < hi; i++ {
					seen[i].Add(1)
				}
			})
			for i := range seen {
				if v := seen[i].Load(); v != 1 {
					t.Fatalf("procs %d n %d cost %d: item %d visited %d times", procs, c.n, c.cost, i, v)
				}
			}
		}
	}
}

// TestObserverSeesOutermostRegions wants the observer to hear of each outermost region
// with its worker count (1 for inline work), not of regions nested inside one, and
// nothing after it is stopped.
func TestObserverSeesOutermostRegions(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	var got []int
	stop := Observe(func(workers int, wall time.Duration) {
		if wall < 0 {
			t.Errorf("wall %v", wall)
		}
		got = append(got, workers) // regions here are outermost, so reports come one at a time
	})
	Run(3, func() { Run(2, func() {}) }) // nested: one report
	For(10, 1, func(lo, hi int) {})      // inline
	For(64, MinChunkWork, func(lo, hi int) {})
	stop()
	Run(2, func() {})
	if len(got) != 3 || got[0] != 3 || got[1] != 1 || got[2] != 4 {
		t.Errorf("reports %v, want [3 1 4]", got)
	}
}

// TestFlopCounterHearsCounts wants an installed FlopCounter to receive every count, and
// CountingFlops to say whether one is installed.
func TestFlopCounterHearsCounts(t *testing.T) {
	if CountingFlops() {
		t.Fatal("a counter is installed before ObserveFlops")
	}
	var sum int64
	stop := ObserveFlops(func(n int64) { sum += n })
	if !CountingFlops() {
		t.Error("CountingFlops is false with a counter installed")
	}
	CountFlops(6)
	CountFlops(10)
	stop()
	CountFlops(100)
	if sum != 16 || CountingFlops() {
		t.Errorf("sum %d, counting %v after stop; want 16, false", sum, CountingFlops())
	}
}
