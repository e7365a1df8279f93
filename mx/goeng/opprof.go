package goeng

import (
	"cmp"
	"fmt"
	"io"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgtune/dgtune/mx/internal/par"
)

// OpProfile measures where a computation's wall time goes, op by op, and how much of it
// ran on a single goroutine: the Amdahl view of a training step. It is a measurement
// hook for benchmarks and tests (see model/diffusiongemma's TestOpProfile), never on by
// default, and changes no result.
//
// Each engine op is charged the wall time since the previous op ended (so the model's
// own Go code between ops lands on the op that follows it); the backward pass charges
// each VJP as "vjp:<op>", the sums of cotangents as "backward:accumulate" and its own
// bookkeeping as "backward:walk". Every outermost parallel region (par.Run, par.For,
// sgemm, quant) reports its worker count and wall time to the op running it; an op's
// serial time is its wall time minus the wall time of its regions that ran on two or
// more goroutines.
type OpProfile struct {
	mu      sync.Mutex
	last    time.Time
	nested  int // > 0 inside a VJP: its inner ops are part of it
	pending opStat
	stats   map[string]*opStat
	stop    []func()
	start   time.Time
	total   time.Duration
}

type opStat struct {
	calls      int
	wall       time.Duration
	parWall    time.Duration // wall time in regions of two or more workers
	regions    int           // regions of two or more workers
	workerSum  int           // Σ workers over those regions
	maxWorkers int
	flops      int64 // of the matrix products it ran (sgemm), 2 per multiply-add
	// ideal is what the parallel regions would take on GOMAXPROCS free cores: each
	// region's work (its wall time × the cores it could use here, min(workers,
	// NumCPU)) over min(workers, GOMAXPROCS). On a machine with fewer cores than
	// GOMAXPROCS this predicts a bigger one, ignoring memory bandwidth and stragglers.
	ideal time.Duration
}

func (s *opStat) add(o *opStat) {
	s.calls += o.calls
	s.wall += o.wall
	s.parWall += o.parWall
	s.regions += o.regions
	s.workerSum += o.workerSum
	s.maxWorkers = max(s.maxWorkers, o.maxWorkers)
	s.flops += o.flops
	s.ideal += o.ideal
}

// predicted is the op's wall time on GOMAXPROCS free cores: its serial part plus ideal.
func (s *opStat) predicted() time.Duration { return s.serial() + s.ideal }

func (s *opStat) serial() time.Duration { return max(s.wall-s.parWall, 0) }

// activeProfile is the running OpProfile, nil unless StartOpProfile was called: a
// process-wide switch for a measurement, like the runtime's CPU profiler.
var activeProfile atomic.Pointer[OpProfile]

// StartOpProfile starts charging ops to a new profile until Stop. Only one runs at a
// time: starting another replaces it.
func StartOpProfile() *OpProfile {
	p := &OpProfile{stats: map[string]*opStat{}}
	p.start = time.Now()
	p.last = p.start
	p.stop = []func(){par.Observe(p.region), par.ObserveFlops(p.countFlops)}
	activeProfile.Store(p)
	return p
}

// Stop ends the profile.
func (p *OpProfile) Stop() {
	activeProfile.CompareAndSwap(p, nil)
	for _, stop := range p.stop {
		stop()
	}
	p.mu.Lock()
	p.total = time.Since(p.start)
	p.mu.Unlock()
}

func (p *OpProfile) region(workers int, wall time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if workers >= 2 {
		p.pending.parWall += wall
		p.pending.regions++
		p.pending.workerSum += workers
		here, there := min(workers, runtime.NumCPU()), min(workers, runtime.GOMAXPROCS(0))
		p.pending.ideal += wall * time.Duration(here) / time.Duration(there)
	}
	p.pending.maxWorkers = max(p.pending.maxWorkers, workers)
}

// Flops is the floating-point operations of the matrix products run while the profile was
// on (2 per multiply-add, as sgemm was asked for them).
func (p *OpProfile) Flops() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	var n int64
	for _, s := range p.stats {
		n += s.flops
	}
	return n + p.pending.flops
}

// countFlops charges a product's floating-point operations to the op running it.
func (p *OpProfile) countFlops(flops int64) {
	p.mu.Lock()
	p.pending.flops += flops
	p.mu.Unlock()
}

// mark charges the time since the previous mark to op.
func mark(op string, shape []int) {
	if p := activeProfile.Load(); p != nil {
		p.mark(op, shape)
	}
}

func (p *OpProfile) mark(op string, shape []int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.nested > 0 {
		return
	}
	now := time.Now()
	key := op
	if shape != nil {
		key = fmt.Sprintf("%s %v", op, shape)
	}
	s := p.stats[key]
	if s == nil {
		s = &opStat{}
		p.stats[key] = s
	}
	p.pending.calls = 1
	p.pending.wall = now.Sub(p.last)
	s.add(&p.pending)
	p.pending = opStat{}
	p.last = now
}

// enterVJP and leaveVJP bracket a VJP, so that the ops it runs (a recomputed checkpoint
// segment) are charged to it.
func enterVJP() {
	if p := activeProfile.Load(); p != nil {
		p.mark("backward:walk", nil)
		p.mu.Lock()
		p.nested++
		p.mu.Unlock()
	}
}

func leaveVJP(op string, shape []int) {
	if p := activeProfile.Load(); p != nil {
		p.mu.Lock()
		p.nested--
		p.mu.Unlock()
		p.mark("vjp:"+op, shape)
	}
}

// WriteReport writes the profile as a table, ops by serial time (largest first), with a
// summary line per op name (all shapes together) and the totals: wall time, the part in
// parallel regions, and the parallel fraction.
func (p *OpProfile) WriteReport(w io.Writer, steps int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	steps = max(steps, 1)
	type row struct {
		key string
		s   opStat
	}
	var rows []row
	byOp := map[string]*opStat{}
	var tot opStat
	for k, s := range p.stats {
		rows = append(rows, row{k, *s})
		name := k
		for i, c := range k {
			if c == ' ' {
				name = k[:i]
				break
			}
		}
		if byOp[name] == nil {
			byOp[name] = &opStat{}
		}
		byOp[name].add(s)
		tot.add(s)
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) / float64(steps) }
	rate := func(s opStat) string {
		if s.flops == 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f", gflops(s.flops, s.wall))
	}
	avgW := func(s opStat) float64 {
		if s.regions == 0 {
			return 1
		}
		return float64(s.workerSum) / float64(s.regions)
	}
	fmt.Fprintf(w, "per step (%d steps): wall %.1f ms, in parallel regions %.1f ms (%.1f %%), serial %.1f ms, %d ops, %d parallel regions\n",
		steps, ms(tot.wall), ms(tot.parWall), 100*float64(tot.parWall)/float64(max(tot.wall, 1)), ms(tot.serial()),
		tot.calls/steps, tot.regions/steps)
	fmt.Fprintf(w, "products (sgemm): %.3f GFLOP per step, %.1f GFLOP/s over the wall time, %.1f GFLOP/s over the ops that ran them\n",
		float64(tot.flops)/1e9/float64(steps), gflops(tot.flops, tot.wall), gflops(tot.flops, productWall(p.stats)))
	fmt.Fprintf(w, "predicted on %d free cores (%d here): %.1f ms, of it serial %.1f ms (%.1f %%)\n",
		runtime.GOMAXPROCS(0), runtime.NumCPU(), ms(tot.predicted()), ms(tot.serial()),
		100*float64(tot.serial())/float64(max(tot.predicted(), 1)))
	var ops []row
	for k, s := range byOp {
		ops = append(ops, row{k, *s})
	}
	bySerial := func(a, b row) int {
		return cmp.Or(cmp.Compare(b.s.serial(), a.s.serial()), cmp.Compare(a.key, b.key))
	}
	slices.SortFunc(ops, bySerial)
	slices.SortFunc(rows, bySerial)
	fmt.Fprintf(w, "\n%-36s %8s %8s %7s %8s %6s %8s %7s %8s\n", "by op", "serial", "wall", "par", "pred", "calls", "regions", "workers", "GFLOP/s")
	for _, r := range ops {
		fmt.Fprintf(w, "%-36s %8.2f %8.2f %7.2f %8.2f %6d %8d %7.1f %8s\n", r.key, ms(r.s.serial()), ms(r.s.wall), ms(r.s.parWall),
			ms(r.s.predicted()), r.s.calls/steps, r.s.regions/steps, avgW(r.s), rate(r.s))
	}
	fmt.Fprintf(w, "\nby op and output shape (top 60 by serial time)\n")
	for i, r := range rows {
		if i == 60 {
			break
		}
		fmt.Fprintf(w, "%-48s %8.2f %8.2f %7.2f %8.2f %6d %8d %7.1f %8s\n", r.key, ms(r.s.serial()), ms(r.s.wall), ms(r.s.parWall),
			ms(r.s.predicted()), r.s.calls/steps, r.s.regions/steps, avgW(r.s), rate(r.s))
	}
}

// gflops is flops over d in GFLOP/s (0 for no time).
func gflops(flops int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(flops) / d.Seconds() / 1e9
}

// productWall is the wall time of the ops that ran matrix products.
func productWall(stats map[string]*opStat) time.Duration {
	var d time.Duration
	for _, s := range stats {
		if s.flops > 0 {
			d += s.wall
		}
	}
	return d
}
