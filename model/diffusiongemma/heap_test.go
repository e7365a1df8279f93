package diffusiongemma_test

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
)

// heapInUse is the heap in use once everything unreachable has been collected.
func heapInUse() uint64 {
	var s runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&s)
	return s.HeapInuse
}

// liveHeapMetric is the heap the last collection found live.
func liveHeapMetric() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// peakLiveHeap runs fn with the collector running after every 2% of heap growth and
// returns the largest live heap any collection during fn found. A finalizer re-armed at
// every cycle reads the collector's live-heap figure.
func peakLiveHeap(fn func()) (peak uint64, samples int) {
	defer debug.SetGCPercent(debug.SetGCPercent(2))
	var max atomic.Uint64
	var n atomic.Int64
	var done atomic.Bool
	type sentinel struct {
		p *int
		_ [64]byte
	}
	var arm func()
	arm = func() {
		runtime.SetFinalizer(&sentinel{p: new(int)}, func(*sentinel) {
			if done.Load() {
				return
			}
			n.Add(1)
			if v := liveHeapMetric(); v > max.Load() {
				max.Store(v)
			}
			arm()
		})
	}
	arm()
	fn()
	done.Store(true)
	return max.Load(), int(n.Load())
}
