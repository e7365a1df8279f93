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
// for spinFor waiting for the next one and only then park. Which helper runs which task
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
	state atomic.Int32
	job   atomic.Pointer[region]
	wake  chan struct{} // one token per wake-up of a parked helper
}

// region is one Run: its work, the helpers still running it, and done, closed when the
// last of them finishes.
type region struct {
	work    func()
	pending atomic.Int32
	done    chan struct{}
}

func (r *region) finish() {
	if r.pending.Add(-1) == 0 {
		close(r.done)
	}
}

// pool holds the idle helpers, most recently idle last (they are the likeliest to be
// still spinning). It is the process's pool of threads, as the Go runtime's own is: it
// holds no results and nothing a result depends on.
var pool struct {
	mu   sync.Mutex
	idle []*helper
}

// take removes up to n idle helpers from the pool.
func take(n int) []*helper {
	pool.mu.Lock()
	defer pool.mu.Unlock()
	k := min(n, len(pool.idle))
	got := make([]*helper, k)
	copy(got, pool.idle[len(pool.idle)-k:])
	pool.idle = pool.idle[:len(pool.idle)-k]
	return got
}

func put(h *helper) {
	pool.mu.Lock()
	pool.idle = append(pool.idle, h)
	pool.mu.Unlock()
}

// start gives r to h: the job is stored before the state changes, so a helper that sees
// busy (or is woken) always finds it.
func (h *helper) start(r *region) {
	h.job.Store(r)
	if h.state.Swap(busy) == parked {
		h.wake <- struct{}{}
	}
}

// loop is a helper's life: run the region it was given, go back to the pool, spin for the
// next one, park when none comes.
func (h *helper) loop(r *region) {
	for {
		r.work()
		r.finish()
		h.job.Store(nil)
		h.state.Store(idle)
		put(h)
		r = h.next()
	}
}

// next waits for the helper's next region.
func (h *helper) next() *region {
	if spinning() {
		deadline := time.Now().Add(spinFor)
		for i := 0; ; i++ {
			if r := h.job.Load(); r != nil {
				return r
			}
			if i%64 == 63 {
				if time.Now().After(deadline) {
					break
				}
				runtime.Gosched() // let anything runnable on this thread's queue go first
			}
			pause()
		}
	}
	if h.state.CompareAndSwap(idle, parked) {
		<-h.wake
	}
	// Either woken, or a caller made the helper busy while it was about to park: the job
	// was stored first.
	for {
		if r := h.job.Load(); r != nil {
			return r
		}
		runtime.Gosched()
	}
}

// spinning says whether spinning can pay: only when every goroutine of a region can have
// a core of its own. Oversubscribed (GOMAXPROCS above the core count), a spinning helper
// would take the cores the work needs.
func spinning() bool { return runtime.GOMAXPROCS(0) <= runtime.NumCPU() }

// runPooled runs work on the caller and workers−1 helpers (pooled where idle, fresh
// otherwise) and returns when all have returned.
func runPooled(workers int, work func()) {
	r := &region{work: work, done: make(chan struct{})}
	r.pending.Store(int32(workers - 1))
	helpers := take(workers - 1)
	for _, h := range helpers {
		h.start(r)
	}
	for range workers - 1 - len(helpers) {
		h := &helper{wake: make(chan struct{}, 1)}
		h.state.Store(busy)
		go h.loop(r)
	}
	work()
	if spinning() {
		deadline := time.Now().Add(spinFor)
		for i := 0; r.pending.Load() != 0; i++ {
			if i%64 == 63 && time.Now().After(deadline) {
				break
			}
			pause()
		}
	}
	<-r.done
}
