package sgemm

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/dgtune/dgtune/mx/internal/par"
)

// How a batch of products is cut into tiles and shared between workers: each problem's
// plan (kernel choice, block sizes, shared packed operands), the task queue, and the
// scratch a batch needs (Scratch, which the memory estimate reads).

// plan is how one problem is cut into tiles.
type plan struct {
	*problem
	rows           bool // stream B through the row kernel (few rows of A)
	skinny         bool // at most one panel wide: the skinny kernel reads A in place
	unitM, unitN   int
	tm, tn, kc     int
	tilesM, tilesN int
	// packedA, when set, holds all of op(A) packed once, k-block after k-block, for the
	// tiles to share (a product with one block of rows cut into many column tiles).
	packedA *[]float32
	// thin: K is at most thinMaxK; op(B) is packed once, whole, into thinB for every tile
	// to read, and the thin kernel reads A in place.
	thin  bool
	thinB *[]float32
	// inplaceA: op(A) is never packed; the in-place kernel reads it (whole blocks of 2mr
	// rows; the rows past the last are packed and go through the edge kernel).
	inplaceA bool
	// pairN is the narrowest column tile cut keeps before it cuts rows: two panels where
	// the wide kernel takes them. A one-panel tile runs the 12×16 kernel, which on the
	// device's Xeon multiplies at ~60 % of the 12×32 one's rate (a 4-bit 384×512×512 LoRA
	// linear at 16 threads: 29 % of its CPU in kern12x16).
	pairN int
	// rowsShareA: cut split this plan's single block of rows into row tiles after its
	// columns; its tiles still share one packed A (shareA), each reading its own rows.
	rowsShareA bool
}

func newPlan(p *problem, ks kernels) plan {
	pl := plan{problem: p}
	// One panel wide with enough rows: the skinny kernel, A never packed.
	pl.skinny = ks.skinny != nil && p.n <= skinnyMaxN && p.m >= skinnyRows && p.pack == nil
	// Few rows of A: stream B a row at a time instead of packing it.
	pl.rows = !pl.skinny && ks.row != nil && p.m <= smallM && p.tb == NoTrans && p.pack == nil
	// Few k steps and an A read in place: the thin kernel.
	pl.thin = !pl.skinny && !pl.rows && ks.thin != nil && p.k <= thinMaxK && p.m >= thinRows && p.ta == NoTrans && p.pack == nil
	// Few panels, all of them paired: A in place — unless A's rows are a multiple of 4 KiB
	// apart, which puts the lines a block of A reads into one L1 set (1024×383×64 with a
	// transposed A: 95 → 93 GFLOP/s on one core; at a stride of 383, 384 or 512 floats
	// the in-place kernel is 7-13 % faster).
	pl.inplaceA = !pl.skinny && !pl.rows && !pl.thin && ks.inplace != nil && ks.wide != nil && ks.edge != nil &&
		p.n <= inplaceMaxN && p.n%(2*nr) == 0 && p.lda%1024 != 0
	pl.unitM, pl.unitN = mr, nr
	if pl.inplaceA {
		pl.unitN = 2 * nr // tiles of whole panel pairs
	}
	if ks.pair != nil {
		pl.unitM = 2 * mr // tiles of whole pairs of panels
	}
	if pl.rows {
		pl.unitN = rowUnit
	}
	if pl.skinny {
		pl.unitM = skinnyRows
	}
	pl.pairN = pl.unitN
	if ks.wide != nil && ks.edge != nil && !pl.rows && !pl.skinny && !pl.thin && !pl.inplaceA {
		pl.pairN = 2 * nr
	}
	if pl.thin {
		pl.unitM = thinRows
	}
	rowLimit := mcMax
	if p.pack != nil || p.k*p.n >= bigB {
		// B is packed (or decoded) once per row tile: taller tiles pack it fewer times.
		// Decoding a quantized weight costs more than packing the rows of A, and a large
		// float32 weight streams from memory each time (at 384 rows, 144-row tiles read
		// it three times; 2 threads on the device, float32 bench: 661–700 → 694–803
		// tokens/s).
		rowLimit = mcPackedMax
	}
	pl.tm, pl.tilesM = split(p.m, rowLimit, pl.unitM)
	pl.tn, pl.tilesN = split(p.n, ncMax, pl.unitN)
	pl.kc, _ = split(p.k, kcMax, KBlock)
	return pl
}

// cut splits the tiles further until there are at least want of them, as long as tiles
// stay big enough to amortise their packing. A product with a single block of rows keeps
// its packed A whole and shared by every tile (see shareA) instead of packed again by
// each: it cuts its columns down to pairN, then its rows (down to rowCutMin, each tile
// still decoding or packing its own columns of B), then its columns down to one panel.
// One that is a single panel wide (a LoRA down-projection, x·A with rank 8 columns) can
// only be cut by rows, and is.
func (pl *plan) cut(want int) {
	if pl.tilesM == 1 && !pl.inplaceA {
		for pl.tilesN < want && pl.tn >= 2*pl.pairN {
			pl.tn, pl.tilesN = split(pl.n, roundUp(pl.tn/2, pl.unitN), pl.unitN)
		}
		if pl.pairN > pl.unitN && pl.tilesN > 1 {
			for pl.tilesM*pl.tilesN < want && pl.tm >= 2*rowCutMin {
				pl.tm, pl.tilesM = split(pl.m, roundUp(pl.tm/2, pl.unitM), pl.unitM)
				pl.rowsShareA = true
			}
		}
		for pl.tilesM*pl.tilesN < want && pl.tn >= 2*pl.unitN {
			pl.tn, pl.tilesN = split(pl.n, roundUp(pl.tn/2, pl.unitN), pl.unitN)
		}
		if pl.tilesN > 1 || pl.rows {
			return
		}
	}
	for pl.tilesM*pl.tilesN < want {
		if pl.tn >= 4*pl.unitN && pl.tn >= pl.tm {
			pl.tn, pl.tilesN = split(pl.n, roundUp(pl.tn/2, pl.unitN), pl.unitN)
		} else if pl.tm >= 4*pl.unitM {
			pl.tm, pl.tilesM = split(pl.m, roundUp(pl.tm/2, pl.unitM), pl.unitM)
		} else {
			return
		}
	}
}

// sharesA reports whether the plan's tiles read one op(A) packed by shareA: a single block
// of rows cut into column tiles, or such a block cut into row tiles too (rowsShareA).
func (pl *plan) sharesA() bool {
	return pl.tilesN >= 2 && !pl.inplaceA && (pl.tilesM == 1 || pl.rowsShareA)
}

// aBlockOffset is where k-block pc starts in a shared packed A (all blocks but the last
// are kc long).
func (pl *plan) aBlockOffset(pc int) int { return roundUp(pl.m, mr) * pc }

// sharedAPool recycles the shared packed-A buffers.
var sharedAPool = sync.Pool{New: func() any { return new([]float32) }}

// shareA packs op(A) of every plan with a single block of rows and several column tiles
// once, in parallel over (plan, k-block), before any tile runs; each element is packed
// exactly as the tile would have packed it.
func shareA(plans []plan, workers int) {
	// A job is one k-block of rows i0..i0+shareRows of one plan, so that even a product
	// of one or two k-blocks packs on many goroutines.
	const shareRows = 8 * mr
	type job struct{ pl, pc, i0 int }
	var jobs []job
	for i := range plans {
		pl := &plans[i]
		if !pl.sharesA() {
			continue
		}
		buf := sharedAPool.Get().(*[]float32)
		*buf = grow(*buf, roundUp(pl.m, mr)*pl.k)
		pl.packedA = buf
		for pc := 0; pc < pl.k; pc += pl.kc {
			for i0 := 0; i0 < pl.m; i0 += shareRows {
				jobs = append(jobs, job{i, pc, i0})
			}
		}
	}
	if len(jobs) == 0 {
		return
	}
	var next atomic.Int64
	work := func() {
		for {
			j := int(next.Add(1) - 1)
			if j >= len(jobs) {
				return
			}
			pl := &plans[jobs[j].pl]
			pc, i0 := jobs[j].pc, jobs[j].i0
			kb := min(pl.kc, pl.k-pc)
			// Panel i0/mr of the block starts i0·kb floats in (panels are mr·kb long).
			packA((*pl.packedA)[pl.aBlockOffset(pc)+i0*kb:], pl.a, pl.lda, pl.ta, i0, min(shareRows, pl.m-i0), pc, kb)
		}
	}
	par.Run(min(workers, len(jobs)), work)
}

// packThinB packs the whole op(B) of every thin plan once, as packB lays out one k-block
// of K (at most thinMaxK·n floats: far less than the product's m·n·K multiply-adds).
func packThinB(plans []plan) {
	for i := range plans {
		pl := &plans[i]
		if !pl.thin {
			continue
		}
		buf := sharedAPool.Get().(*[]float32)
		*buf = grow(*buf, roundUp(pl.n, nr)*pl.k)
		packB(*buf, pl.b, pl.ldb, pl.tb, 0, pl.k, 0, pl.n)
		pl.thinB = buf
	}
}

// releaseShared returns the plans' shared packed operands (packedA, thinB) to their pool.
func releaseShared(plans []plan) {
	for i := range plans {
		for _, buf := range []*[]float32{plans[i].packedA, plans[i].thinB} {
			if buf != nil {
				sharedAPool.Put(buf)
			}
		}
	}
}

// runBatch computes checked problems with ks on at most workers goroutines. Each tile of
// each problem is one task; every goroutine is meant to get about two tasks' worth of
// work, so a problem gets tiles in proportion to its share of the multiply-adds.
func runBatch(ps []*problem, ks kernels, workers int) {
	if par.CountingFlops() {
		var flops int64
		for _, p := range ps {
			flops += 2 * int64(p.m) * int64(p.n) * int64(p.k)
		}
		par.CountFlops(flops)
	}
	plans, first, sz, workers := planBatch(ps, ks, workers)
	if len(plans) == 0 {
		return
	}
	tasks := first[len(plans)]
	packThinB(plans)
	defer releaseShared(plans)
	if workers > 1 {
		shareA(plans, workers)
	}
	var next atomic.Int64
	q := &queue{plans: plans, first: first, next: &next, tasks: tasks, workers: workers}
	work := func() {
		w := newWorker(ks, sz)
		defer w.release()
		w.queue = q
		t := q.claim()
		for t < tasks {
			pl, i0, mt, j0, nt := q.locate(t)
			w.bind(pl)
			w.ahead = -1
			w.tile(i0, mt, j0, nt)
			if pl.then != nil {
				pl.then(i0, i0+mt, j0, j0+nt)
			}
			t = w.ahead
			if t < 0 {
				t = q.claim()
			}
		}
	}
	par.Run(workers, work)
}

// planBatch plans the tiles of checked problems for at most workers goroutines: the
// plans of the problems with work (problems with an empty C or K are finished here),
// first[i] the number of plan i's first task (tasks are numbered plan by plan), the
// buffers each worker needs and the number of workers to start.
func planBatch(ps []*problem, ks kernels, workers int) ([]plan, []int, bufSizes, int) {
	var plans []plan
	total := 0
	for _, p := range ps {
		if p.m == 0 || p.n == 0 {
			continue
		}
		if p.k == 0 {
			if !p.acc {
				for i := range p.m {
					clear(p.c[i*p.ldc : i*p.ldc+p.n])
				}
			}
			if p.then != nil {
				p.then(0, p.m, 0, p.n)
			}
			continue
		}
		plans = append(plans, newPlan(p, ks))
		total += p.m * p.n * p.k
	}
	if len(plans) == 0 {
		return nil, nil, bufSizes{}, 0
	}
	if total < minParallel {
		workers = 1
	}
	// No more goroutines than there are minParallel units of work: on a many-core
	// machine a small product is not spread so thin that starting goroutines dominates.
	workers = min(workers, max(1, total/minParallel))
	first := make([]int, len(plans)+1)
	var sz bufSizes
	for i := range plans {
		pl := &plans[i]
		if workers > 1 {
			share := pl.m * pl.n * pl.k
			pl.cut(int((int64(2*workers)*int64(share) + int64(total) - 1) / int64(total)))
		}
		first[i+1] = first[i] + pl.tilesM*pl.tilesN
		sz.fit(pl)
	}
	return plans, first, sz, max(1, min(workers, first[len(plans)]))
}

// Scratch is the float32 scratch Gemm of op(A) [m, k] by op(B) [k, n] — GemmPacked when
// packed (a decoded B, a quantized weight) — takes on at most workers goroutines, as
// runBatch plans it: perWorker is each of the running workers' packing buffers, which a
// pool recycles from product to product, and shared the operands packed once for all the
// tiles (packed A, a thin product's B), back to their pool when the product ends. A
// memory estimate reads it (package shapeeng).
func Scratch(m, n, k int, ta, tb, packed bool, workers int) (perWorker, shared, running int) {
	p := &problem{ta: Trans(ta), tb: Trans(tb), m: m, n: n, k: k}
	if packed {
		p.pack = func([]float32, int, int, int, int) {}
	}
	plans, _, sz, running := planBatch([]*problem{p}, defaultKernels(), workers)
	for i := range plans {
		pl := &plans[i]
		if pl.thin {
			shared += roundUp(pl.n, nr) * pl.k
		}
		if running > 1 && pl.sharesA() {
			shared += roundUp(pl.m, mr) * pl.k
		}
	}
	return sz.a + sz.b + sz.row, shared, running
}

// queue hands out the tasks (tiles) of a batch's plans, numbered plan by plan.
type queue struct {
	plans   []plan
	first   []int // first[i] is the number of the first task of plan i
	next    *atomic.Int64
	tasks   int
	workers int // goroutines pulling from it
}

// claim takes the next unclaimed task (tasks when none is left).
func (q *queue) claim() int { return min(int(q.next.Add(1)-1), q.tasks) }

// locate returns task t's plan and tile: rows i0..i0+mt, columns j0..j0+nt.
func (q *queue) locate(t int) (pl *plan, i0, mt, j0, nt int) {
	i, _ := slices.BinarySearch(q.first, t+1)
	pl = &q.plans[i-1]
	t -= q.first[i-1]
	i0, j0 = (t/pl.tilesN)*pl.tm, (t%pl.tilesN)*pl.tn
	return pl, i0, min(pl.tm, pl.m-i0), j0, min(pl.tn, pl.n-j0)
}

// split cuts n into the fewest parts of at most limit, evened out and rounded up
// to a multiple of unit; it returns the part size and the number of parts.
func split(n, limit, unit int) (size, parts int) {
	parts = (n + limit - 1) / limit
	size = roundUp((n+parts-1)/parts, unit)
	return size, (n + size - 1) / size
}

func roundUp(n, unit int) int { return (n + unit - 1) / unit * unit }
