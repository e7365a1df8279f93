package sgemm

import (
	"sync"

	"github.com/dgtune/dgtune/mx/internal/uninit"
)

// What one worker goroutine does with a tile: its packing buffers, B blocks prefetched
// ahead, and the sweeps of the micro-kernels over packed panels.

// worker is one goroutine's packing buffers, bound to one problem at a time.
type worker struct {
	*problem
	kernels
	kc         int
	rows       bool      // stream B through the row kernel (few rows of A)
	bufA, bufB []float32 // packed A block; packed B slab (or, with rows, the edge panels)
	rowBuf     []float32 // one row of sums for the row kernel
	tmp        [mr * nr]float32
	bufs       *buffers
	plan       *plan
	curA       []float32 // the packed A block of the current k-block
	// queue, when set, is the batch the worker pulls tiles from; ahead is the task it
	// claimed during its current tile's last k-block to prefetch its B (−1: none).
	queue *queue
	ahead int
}

// bAhead is a float32 op(B) block to hint into L2 while the current one is swept: segs
// runs of length floats, run s starting at b[base + s·stride].
type bAhead struct {
	b                          []float32
	base, stride, segs, length int
}

// block returns the bAhead of rows pc..pc+kb−1 and columns j0..j0+nt−1 of pl's op(B),
// ok false when pl's B is not a float32 matrix packed per block (decoded by a PackFunc,
// streamed by rows, or packed once whole).
func (pl *plan) block(pc, kb, j0, nt int) (bAhead, bool) {
	if pl.pack != nil || pl.rows || pl.thin || pl.skinny || kb <= 0 || nt <= 0 || pl.k*pl.n < prefetchMinB {
		return bAhead{}, false
	}
	if pl.tb {
		// op(B)[p, j] = b[j·ldb + p]: one run of kb per column.
		return bAhead{b: pl.b, base: j0*pl.ldb + pc, stride: pl.ldb, segs: nt, length: kb}, true
	}
	return bAhead{b: pl.b, base: pc*pl.ldb + j0, stride: pl.ldb, segs: kb, length: nt}, true
}

// hint prefetches runs lo..hi−1 of a.
func (a *bAhead) hint(lo, hi int) {
	for s := lo; s < hi; s++ {
		prefetchL2(&a.b[a.base+s*a.stride], a.length)
	}
}

// nextBlock is the block to prefetch during k-block pc (length kb) of the tile at
// columns j0..j0+nt: the tile's next k-block, or, during its last, the first of the task
// the worker claims now (w.ahead) and computes next.
func (w *worker) nextBlock(pc, kb, j0, nt int) (bAhead, bool) {
	if !w.prefetch {
		return bAhead{}, false
	}
	if pc+kb < w.k {
		return w.plan.block(pc+kb, min(w.kc, w.k-pc-kb), j0, nt)
	}
	q := w.queue
	if q == nil || w.ahead >= 0 {
		return bAhead{}, false
	}
	// Claiming early gives up some dynamic balance, so only for a tile whose B is worth
	// prefetching, and never among the batch's last tiles (one per worker), which stay
	// first come, first served.
	t := int(q.next.Load())
	if t+q.workers > q.tasks {
		return bAhead{}, false
	}
	if pl, _, _, j1, nt1 := q.locate(t); !pl.prefetchable(j1, nt1) {
		return bAhead{}, false
	}
	w.ahead = q.claim() // t, unless another worker took it meanwhile
	if w.ahead >= q.tasks {
		return bAhead{}, false
	}
	pl, _, _, j1, nt1 := q.locate(w.ahead)
	return pl.block(0, min(pl.kc, pl.k), j1, nt1)
}

// prefetchable says whether the first k-block of pl's tile at columns j0..j0+nt has a B
// that block would hint.
func (pl *plan) prefetchable(j0, nt int) bool {
	_, ok := pl.block(0, min(pl.kc, pl.k), j0, nt)
	return ok
}

// bufSizes are the largest buffers any tile of a batch needs.
type bufSizes struct{ a, b, row int }

func (s *bufSizes) fit(pl *plan) {
	s.a = max(s.a, roundUp(pl.tm, mr)*pl.kc)
	if pl.rows {
		s.row = max(s.row, pl.tn)
		s.b = max(s.b, pl.kc*rowUnit)
	} else {
		s.b = max(s.b, pl.kc*roundUp(pl.tn, nr))
	}
}

// buffers are a worker's scratch slices, recycled across calls: every element a kernel
// reads is written first (packing zero-pads its edges and the row sums are cleared), so
// they need no clearing, and a training step's thousands of products do not each
// allocate (and have the runtime zero) a fresh half-megabyte.
type buffers struct{ a, b, row []float32 }

var bufferPool = sync.Pool{New: func() any { return new(buffers) }}

// grow returns s resized to n, reallocated (unzeroed: see buffers) when too small.
func grow(s []float32, n int) []float32 {
	if cap(s) < n {
		return uninit.Float32s(n)
	}
	return s[:n]
}

func newWorker(ks kernels, sz bufSizes) *worker {
	bufs := bufferPool.Get().(*buffers)
	bufs.a, bufs.b, bufs.row = grow(bufs.a, sz.a), grow(bufs.b, sz.b), grow(bufs.row, sz.row)
	return &worker{kernels: ks, bufA: bufs.a, bufB: bufs.b, rowBuf: bufs.row, bufs: bufs}
}

// bind points the worker at a plan's problem.
func (w *worker) bind(pl *plan) { w.problem, w.kc, w.rows, w.plan = pl.problem, pl.kc, pl.rows, pl }

// release returns the buffers to the pool.
func (w *worker) release() {
	w.problem, w.plan = nil, nil
	bufferPool.Put(w.bufs)
}

// tile computes C[i0:i0+mt, j0:j0+nt], walking K in blocks in order.
func (w *worker) tile(i0, mt, j0, nt int) {
	if w.plan != nil && w.plan.skinny {
		w.skinnyTile(i0, mt, j0, nt)
		return
	}
	if w.plan != nil && w.plan.thin {
		w.thinTile(i0, mt, j0, nt)
		return
	}
	if w.plan != nil && w.plan.inplaceA {
		w.inplaceTile(i0, mt, j0, nt)
		return
	}
	for pc := 0; pc < w.k; pc += w.kc {
		kb := min(w.kc, w.k-pc)
		acc := w.acc || pc > 0
		if w.plan != nil && w.plan.packedA != nil {
			// Panel i0/mr of the block starts i0·kb floats in (i0 is a multiple of mr).
			w.curA = (*w.plan.packedA)[w.plan.aBlockOffset(pc)+i0*kb:]
		} else {
			packA(w.bufA, w.a, w.lda, w.ta, i0, mt, pc, kb)
			w.curA = w.bufA
		}
		if !w.rows {
			if w.pack != nil {
				w.pack(w.bufB[:roundUp(nt, nr)*kb], pc, kb, j0, nt)
			} else {
				packB(w.bufB, w.b, w.ldb, w.tb, pc, kb, j0, nt)
			}
			ahead, ok := w.nextBlock(pc, kb, j0, nt)
			var pf *bAhead
			if ok {
				pf = &ahead
			}
			w.sweep(kb, i0, mt, j0, nt, w.bufB, acc, pf)
			continue
		}
		// The row kernel takes whole multiples of rowUnit columns; the rest (fewer
		// than rowUnit) go through the tile kernel from packed edge panels.
		nw := nt / rowUnit * rowUnit
		if nw > 0 {
			for i := range mt {
				sums := w.rowBuf[:nw]
				clear(sums)
				w.row(kb, w.curA[(i/mr)*kb*mr+i%mr:], mr, w.b[pc*w.ldb+j0:], w.ldb, sums)
				addInto(w.c[(i0+i)*w.ldc+j0:][:nw], sums, acc)
			}
		}
		if nw < nt {
			packB(w.bufB, w.b, w.ldb, w.tb, pc, kb, j0+nw, nt-nw)
			w.sweep(kb, i0, mt, j0+nw, nt-nw, w.bufB, acc, nil)
		}
	}
}

// inplaceTile is tile for an inplaceA plan: per k-block, B is packed as usual and the
// in-place kernel runs over every whole block of 2mr rows, each block across all the
// tile's panel pairs (its rows of A stay in L1); the rows past the last whole block are
// packed and go through the edge kernel.
func (w *worker) inplaceTile(i0, mt, j0, nt int) {
	full := mt / (2 * mr) * (2 * mr)
	for pc := 0; pc < w.k; pc += w.kc {
		kb := min(w.kc, w.k-pc)
		acc := w.acc || pc > 0
		if w.pack != nil {
			w.pack(w.bufB[:roundUp(nt, nr)*kb], pc, kb, j0, nt)
		} else {
			packB(w.bufB, w.b, w.ldb, w.tb, pc, kb, j0, nt)
		}
		for ir := 0; ir < full; ir += 2 * mr {
			var a []float32
			if w.ta {
				a = w.a[pc*w.lda+i0+ir:]
			} else {
				a = w.a[(i0+ir)*w.lda+pc:]
			}
			for jr := 0; jr < nt; jr += 2 * nr {
				w.inplace(w.ta, kb, a, w.lda, w.bufB[jr*kb:], w.bufB[(jr+nr)*kb:], nr, w.c[(i0+ir)*w.ldc+j0+jr:], w.ldc, acc)
			}
		}
		if rest := mt - full; rest > 0 {
			packA(w.bufA, w.a, w.lda, w.ta, i0+full, rest, pc, kb)
			a1 := w.bufA
			if rest > mr {
				a1 = w.bufA[mr*kb:]
			}
			for jr := 0; jr < nt; jr += 2 * nr {
				w.edge(kb, w.bufA, a1, w.bufB[jr*kb:], w.bufB[(jr+nr)*kb:], nr, w.c[(i0+full)*w.ldc+j0+jr:], w.ldc, acc, rest, 2*nr)
			}
		}
	}
}

// skinnyTile is tile for a plan at most one panel wide: per k-block it packs the B panel
// once and runs the skinny kernel down the rows, reading A in place; rows past the last
// whole group of skinnyRows go through the packed tile kernel as usual.
func (w *worker) skinnyTile(i0, mt, j0, nt int) {
	full := mt / skinnyRows * skinnyRows
	var tmp [skinnyRows * skinnyCols]float32
	for pc := 0; pc < w.k; pc += w.kc {
		kb := min(w.kc, w.k-pc)
		acc := w.acc || pc > 0
		packB(w.bufB, w.b, w.ldb, w.tb, pc, kb, j0, nt)
		for ir := 0; ir < full; {
			rows := skinnyRows
			if w.ta && w.skinnyT16 != nil && ir+2*skinnyRows <= full {
				rows = 2 * skinnyRows
			}
			for jc := 0; jc < nt; jc += skinnyCols {
				for h := 0; h < rows; h += skinnyRows {
					var a []float32
					if w.ta {
						a = w.a[pc*w.lda+i0+ir+h:]
					} else {
						a = w.a[(i0+ir+h)*w.lda+pc:]
					}
					off := (i0+ir+h)*w.ldc + j0 + jc
					if jc+skinnyCols <= nt {
						if rows > skinnyRows {
							// Both halves at once.
							w.skinnyT16(kb, a, w.lda, w.bufB[jc:], nr, w.c[off:], w.ldc, acc)
							break
						}
						w.skinny(w.ta, kb, a, w.lda, w.bufB[jc:], nr, w.c[off:], w.ldc, acc)
						continue
					}
					// Edge columns: the same kernel into a scratch tile (the panel is
					// zero past nt), then the same c + Σ into C.
					nn := nt - jc
					w.skinny(w.ta, kb, a, w.lda, w.bufB[jc:], nr, tmp[:], skinnyCols, false)
					for i := range skinnyRows {
						addInto(w.c[off+i*w.ldc:][:nn], tmp[i*skinnyCols:i*skinnyCols+nn], acc)
					}
				}
			}
			ir += rows
		}
		if full < mt {
			packA(w.bufA, w.a, w.lda, w.ta, i0+full, mt-full, pc, kb)
			w.curA = w.bufA
			w.sweep(kb, i0+full, mt-full, j0, nt, w.bufB, acc, nil)
		}
	}
}

// thinTile is tile for a thin plan: the thin kernel down the rows in blocks of thinRows,
// over the whole panels of the tile in one call per block. Edge columns (a last panel
// past nt) and the rows past the last whole block — copied into a zero-padded block, as A
// is read in place — go through the same kernel into a scratch block and then the same
// c + Σ into C, so every element rounds alike.
func (w *worker) thinTile(i0, mt, j0, nt int) {
	k := w.k
	bp := (*w.plan.thinB)[(j0/nr)*k*nr:] // j0 is a multiple of nr (unitN)
	cols := nt / nr * nr
	var tmp [thinRows * nr]float32
	var rest [thinRows * thinMaxK]float32
	for ir := 0; ir < mt; ir += thinRows {
		rows := min(thinRows, mt-ir)
		a, lda := w.a[(i0+ir)*w.lda:], w.lda
		if rows < thinRows {
			clear(rest[:])
			for i := range rows {
				copy(rest[i*k:(i+1)*k], w.a[(i0+ir+i)*w.lda:])
			}
			a, lda = rest[:], k
		}
		c := w.c[(i0+ir)*w.ldc+j0:]
		if rows == thinRows && cols > 0 {
			w.thin(k, a, lda, bp, cols/nr, c, w.ldc, w.acc)
		}
		for jr := 0; jr < nt; jr += nr {
			if rows == thinRows && jr < cols {
				continue
			}
			nn := min(nr, nt-jr)
			w.thin(k, a, lda, bp[(jr/nr)*k*nr:], 1, tmp[:], nr, false)
			for i := range rows {
				addInto(c[i*w.ldc+jr:][:nn], tmp[i*nr:i*nr+nn], w.acc)
			}
		}
	}
}

// sweep runs the tile kernel over C[i0:i0+mt, j0:j0+nt] for one k-block of kb, from the
// packed A block and the packed B panels bp. With pf set, each panel's sweep first hints
// its share of pf's runs into L2, so the next block's weight streams in from memory while
// this one is multiplied (a float32 weight packs from memory otherwise: the experts' 48-row
// products spent about as long packing B as multiplying). Two full panels at a time go
// through the wide kernel where there is one, for every whole pair of A micro-panels.
func (w *worker) sweep(kb, i0, mt, j0, nt int, bp []float32, acc bool, pf *bAhead) {
	if w.edge != nil && w.wide != nil {
		w.sweepWide(kb, i0, mt, j0, nt, bp, acc, pf)
		return
	}
	panels := (nt + nr - 1) / nr
	for jr := 0; jr < nt; jr += nr {
		q := jr / nr
		wide := w.wide != nil && jr+2*nr <= nt && mt >= 2*mr
		if pf != nil {
			last := q + 1
			if wide {
				last++
			}
			pf.hint(q*pf.segs/panels, last*pf.segs/panels)
		}
		panel := bp[jr*kb:]
		if !wide {
			w.sweepPanel(kb, i0, 0, mt, j0+jr, min(nr, nt-jr), panel, acc)
			continue
		}
		next := bp[(jr+nr)*kb:]
		ir := 0
		for ; ir+2*mr <= mt; ir += 2 * mr {
			w.wide(kb, w.curA[ir*kb:], w.curA[(ir+mr)*kb:], panel, next, nr, w.c[(i0+ir)*w.ldc+j0+jr:], w.ldc, acc)
		}
		w.sweepPanel(kb, i0, ir, mt, j0+jr, nr, panel, acc)
		w.sweepPanel(kb, i0, ir, mt, j0+jr+nr, nr, next, acc)
		jr += nr
	}
}

// sweepWide is sweep with the wide and edge kernels: C is covered in blocks of two panels
// (2nr columns, fewer at the right edge) by 2mr rows (fewer at the bottom), every block in
// one kernel call that stores straight into C.
func (w *worker) sweepWide(kb, i0, mt, j0, nt int, bp []float32, acc bool, pf *bAhead) {
	panels := (nt + nr - 1) / nr
	for jr := 0; jr < nt; jr += 2 * nr {
		q := jr / nr
		cols := min(2*nr, nt-jr)
		if pf != nil {
			pf.hint(q*pf.segs/panels, min(q+2, panels)*pf.segs/panels)
		}
		panel := bp[jr*kb:]
		next := panel
		if cols > nr {
			next = bp[(jr+nr)*kb:]
		}
		for ir := 0; ir < mt; ir += 2 * mr {
			rows := min(2*mr, mt-ir)
			a0 := w.curA[ir*kb:]
			a1 := a0
			if rows > mr {
				a1 = w.curA[(ir+mr)*kb:]
			}
			c := w.c[(i0+ir)*w.ldc+j0+jr:]
			switch {
			case rows == 2*mr && cols == 2*nr:
				w.wide(kb, a0, a1, panel, next, nr, c, w.ldc, acc)
			case rows == 2*mr && cols == nr:
				w.pair(kb, a0, a1, panel, nr, c, w.ldc, acc)
			default:
				w.edge(kb, a0, a1, panel, next, nr, c, w.ldc, acc, rows, cols)
			}
		}
	}
}

// sweepPanel runs the tile kernels down rows ir..mt−1 of the block at row i0 for one B
// panel, whose first nn columns are C's columns j..j+nn−1.
func (w *worker) sweepPanel(kb, i0, ir, mt, j, nn int, panel []float32, acc bool) {
	for ; ir < mt; ir += mr {
		mm := min(mr, mt-ir)
		ap := w.curA[ir*kb:]
		off := (i0+ir)*w.ldc + j
		if w.pair != nil && nn == nr && ir+2*mr <= mt {
			w.pair(kb, ap, w.curA[(ir+mr)*kb:], panel, nr, w.c[off:], w.ldc, acc)
			ir += mr
			continue
		}
		if mm == mr && nn == nr {
			w.tile6x16(kb, ap, panel, nr, w.c[off:], w.ldc, acc)
			continue
		}
		// Edge tile: the same kernel into a scratch tile, then the same c + Σ into
		// C, so edge elements round exactly like interior ones.
		w.tile6x16(kb, ap, panel, nr, w.tmp[:], nr, false)
		for i := range mm {
			addInto(w.c[off+i*w.ldc:][:nn], w.tmp[i*nr:i*nr+nn], acc)
		}
	}
}

// addInto sets dst = src, or dst + src when acc.
func addInto(dst, src []float32, acc bool) {
	if !acc {
		copy(dst, src)
		return
	}
	src = src[:len(dst)]
	for j := range dst {
		dst[j] += src[j]
	}
}
