package par

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Fork-join through a pool of helper goroutines.
//
// A training step runs thousands of parallel regions, many of them tens of microseconds
// long. Starting fresh goroutines for each means waking parked threads each time, and on
// a many-core machine that wake-up latency is a large part of a short region (OpenMP
// runtimes, which PyTorch and MKL use, keep their threads spinning between regions for
// the same reason). Run hands its work to helpers that, once they finish a region, spin
// for spinFor waiting for the next one and only then park (half of them: see spinners). Which helper runs which task
// never matters to a result: callers split work so that every output element has one
// fixed computation.

// spinFor is how long an idle helper (and a caller waiting for its helpers) spins before
// parking: longer than the serial stretch between most regions of a step, short enough
// that an idle process stops burning cores almost at once.
const spinFor = 200 * time.Microsecond

// Helper states.
const (
	idle   int32 = iota // in the pool, spinning
	parked              // in the pool, blocked on wake
	busy                // given a region
)

type helper struct {
	id    int // order of starting: the first spinners() spin between regions
	state atomic.Int32
	job   atomic.Pointer[region]
	wake  chan struct{} // one token per wake-up of a parked helper
}

// region is one Run: its work and its state — the closed bit, set once the caller's own
// call of work has returned, and the number of helpers inside work — plus done, closed by
// the helper that leaves work last after the region closed.
type region struct {
	work  func()
	state atomic.Int64
	done  chan struct{}
}

const closedBit = 1 << 62

// enter lets a helper into the region's work unless the caller's call has already
// returned: then every task is taken (callers' work pulls tasks until none are left) and
// the helper has nothing to do.
func (r *region) enter() bool {
	for {
		s := r.state.Load()
		if s&closedBit != 0 {
			return false
		}
		if r.state.CompareAndSwap(s, s+1) {
			return true
		}
	}
}

// leave is a helper's exit from work.
func (r *region) leave() {
	if r.state.Add(-1) == closedBit {
		close(r.done)
	}
}

// helpers lists every helper goroutine started so far, as a copy-on-write slice (grown
// under mu). Callers claim idle ones with a compare-and-swap on their state and helpers
// free themselves with a store, so no lock is shared between a region's goroutines. It
// is the process's pool of threads, as the Go runtime's own is: it holds no results and
// nothing a result depends on.
var helpers struct {
	mu   sync.Mutex
	list atomic.Pointer[[]*helper]
}

// claim gives r to up to n helpers, spinning ones first, then parked ones (woken), and
// returns how many it found.
func claim(r *region, n int) int {
	list := helpers.list.Load()
	if list == nil || n == 0 {
		return 0
	}
	got := 0
	for _, from := range []int32{idle, parked} {
		for _, h := range *list {
			if got == n {
				return got
			}
			// A plain load first: a failed compare-and-swap still takes the line exclusively.
			if h.state.Load() == from && h.state.CompareAndSwap(from, busy) {
				h.job.Store(r)
				if from == parked {
					h.wake <- struct{}{}
				}
				got++
			}
		}
	}
	return got
}

// spawn starts a new helper on r and adds it to the list.
func spawn(r *region) {
	h := &helper{wake: make(chan struct{}, 1)}
	h.state.Store(busy)
	h.job.Store(r)
	helpers.mu.Lock()
	var list []*helper
	if old := helpers.list.Load(); old != nil {
		list = append(list, *old...)
	}
	h.id = len(list)
	list = append(list, h)
	helpers.list.Store(&list)
	helpers.mu.Unlock()
	go h.loop()
}

// loop is a helper's life: run the region it was given, become claimable again, spin for
// the next one, park when none comes.
func (h *helper) loop() {
	for {
		r := h.next()
		in := r.enter()
		if in {
			r.work()
		}
		h.job.Store(nil) // before idle: a caller stores the next job only after claiming
		h.state.Store(idle)
		if in {
			r.leave()
		}
	}
}

// next waits for the helper's next region.
func (h *helper) next() *region {
	if spinning() && h.id < spinners() {
		deadline := time.Now().Add(spinFor)
		for i := 0; ; i++ {
			if r := h.job.Load(); r != nil {
				return r
			}
			// No runtime.Gosched here: fifteen spinners yielding every few microseconds
			// queue on the scheduler's global lock and slow the goroutine doing the work.
			// A spinner holds its thread for spinFor at most, then parks.
			if i%64 == 63 && time.Now().After(deadline) {
				break
			}
			pause()
		}
	}
	if h.state.CompareAndSwap(idle, parked) {
		<-h.wake
	}
	// Either woken, or claimed while about to park: the job follows the claim at once.
	for {
		if r := h.job.Load(); r != nil {
			return r
		}
		runtime.Gosched()
	}
}

// spinners is how many helpers (the first started) spin between regions; the others park
// at once. Half of GOMAXPROCS: on the 16-core machine a region then starts at once on
// half the cores and the parked helpers join it late or, when the work is already taken,
// not at all — 1.3–1.5× the steps per second of every helper spinning (bench and small
// presets, 16 threads), whose spinning cores cost the working ones their clock and
// contend for the region's counters.
func spinners() int { return max(1, runtime.GOMAXPROCS(0)/2) }

// spinning says whether spinning can pay: only when every goroutine of a region can have
// a core of its own. Oversubscribed (GOMAXPROCS above the core count), a spinning helper
// would take the cores the work needs.
func spinning() bool { return runtime.GOMAXPROCS(0) <= runtime.NumCPU() }

// runPooled runs work on the caller and up to workers−1 helpers (claimed where idle,
// started otherwise) and returns when every call of work has returned. A helper that
// arrives after the caller's own call returned skips the region, so the caller never
// waits for one that was slow to wake.
func runPooled(workers int, work func()) {
	r := &region{work: work, done: make(chan struct{})}
	for range workers - 1 - claim(r, workers-1) {
		spawn(r)
	}
	work()
	if r.state.Add(closedBit) == closedBit {
		return // no helper inside
	}
	if spinning() {
		deadline := time.Now().Add(spinFor)
		for i := 0; r.state.Load() != closedBit; i++ {
			if i%64 == 63 && time.Now().After(deadline) {
				break
			}
			pause()
		}
	}
	<-r.done
}
