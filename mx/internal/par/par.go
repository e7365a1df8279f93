// Package par is the go engine's fork-join parallelism, shared by goeng, sgemm and quant
// so that every parallel region of a training step starts its goroutines the same way and
// can be observed in one place, and the products report their floating-point operations to
// a FlopCounter the same way.
//
// Run starts a region of a given number of workers (the caller is one of them) and waits
// for all of them; For cuts a range into contiguous chunks on such a region. Neither
// decides anything about results: callers split work so that each output element is
// computed by exactly one worker in a fixed order, so bits never depend on GOMAXPROCS.
// The workers other than the caller are pooled helper goroutines that spin briefly
// between regions (see pool.go): that pool and the two profiling hooks below are the
// package's only state, and none of them is read by any result.
//
// An Observer (a profiling hook, off unless a test or benchmark installs one) is told the
// worker count and wall time of every outermost region, inline ones included (workers 1),
// so that an op's time can be split into the part spent on one goroutine and the part
// spread over several; a FlopCounter is told the size of every matrix product.
package par

import (
	"runtime"
	"sync/atomic"
	"time"
)

// MinChunkWork is the least work (items × cost, ≈ simple float operations) worth a
// goroutine of its own: starting and joining one costs a microsecond or two, and 8k cheap
// element operations take a few microseconds on one core. (At 32k, a norm over 256 rows
// of 512 used 4 of 16 cores.)
const MinChunkWork = 8192

// Observer receives, for each outermost parallel region, the number of workers it ran
// on (1: inline on the caller) and its wall time.
type Observer func(workers int, wall time.Duration)

// observer is the installed profiling hook, nil unless Observe set one: a process-wide
// switch for a measurement, never read by any result.
var observer atomic.Pointer[Observer]

// depth counts the regions running inside an observed region, so nested ones (a product
// run by a worker of another region) are not reported twice.
var depth atomic.Int32

// Observe installs o until the returned function is called. Only one observer is active
// at a time; installing another replaces it.
func Observe(o Observer) (stop func()) {
	observer.Store(&o)
	return func() { observer.CompareAndSwap(&o, nil) }
}

// FlopCounter receives the floating-point operations (2 per multiply-add) of every matrix
// product as it starts; see ObserveFlops.
type FlopCounter func(flops int64)

// flopCounter is the installed counting hook, nil unless ObserveFlops set one: like
// observer, a process-wide switch for a measurement, never read by any result.
var flopCounter atomic.Pointer[FlopCounter]

// ObserveFlops installs c until the returned function is called, so that a profile can
// state how fast the products it times ran; only one is active at a time.
func ObserveFlops(c FlopCounter) (stop func()) {
	flopCounter.Store(&c)
	return func() { flopCounter.CompareAndSwap(&c, nil) }
}

// CountingFlops says whether a FlopCounter is installed, so that callers skip adding up
// their products' sizes when nobody reads them.
func CountingFlops() bool { return flopCounter.Load() != nil }

// CountFlops hands flops to the installed FlopCounter, if any.
func CountFlops(flops int64) {
	if c := flopCounter.Load(); c != nil {
		(*c)(flops)
	}
}

// observe wraps a region; it returns the function to call when the region ends.
func observe(workers int) func() {
	o := observer.Load()
	if o == nil {
		return nil
	}
	if depth.Add(1) != 1 {
		return func() { depth.Add(-1) }
	}
	t0 := time.Now()
	return func() {
		(*o)(workers, time.Since(t0))
		depth.Add(-1)
	}
}

// Workers is how many goroutines a region may use: GOMAXPROCS.
func Workers() int { return runtime.GOMAXPROCS(0) }

// Run calls work on the calling goroutine and on up to workers−1 helper goroutines at
// once, and returns when every call has returned. work must pull its tasks from shared
// state until none are left (a counter, typically): a helper that arrives after the
// caller's own call has returned finds nothing left and does not call it.
func Run(workers int, work func()) {
	if done := observe(max(workers, 1)); done != nil {
		defer done()
	}
	if workers <= 1 {
		work()
		return
	}
	runPooled(workers, work)
}

// For runs body over [0, n) split into at most GOMAXPROCS contiguous chunks, and no more
// chunks than there are MinChunkWork units of work, so that a small job on a machine with
// many cores does not pay for goroutines it cannot keep busy. cost is the approximate
// work per item; small jobs run inline.
func For(n int, cost int, body func(lo, hi int)) {
	if n <= 0 {
		return
	}
	workers := Workers()
	work := n * max(cost, 1)
	if workers <= 1 || work < MinChunkWork || n == 1 {
		if done := observe(1); done != nil {
			defer done()
		}
		body(0, n)
		return
	}
	workers = min(workers, n, max(2, work/MinChunkWork))
	// Up to three chunks per worker (each still MinChunkWork or more), pulled from a
	// counter: a worker that starts late or runs slow takes fewer of them.
	parts := min(n, 3*workers, max(workers, work/MinChunkWork))
	chunk := (n + parts - 1) / parts
	chunks := (n + chunk - 1) / chunk
	var next atomic.Int64
	Run(min(workers, chunks), func() {
		for {
			c := int(next.Add(1) - 1)
			if c >= chunks {
				return
			}
			lo := c * chunk
			body(lo, min(lo+chunk, n))
		}
	})
}
