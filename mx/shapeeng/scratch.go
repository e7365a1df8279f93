package shapeeng

import (
	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/internal/sgemm"
)

// The go engine's memory that no op shows, counted from its own planning functions
// rather than copies of its constants: the products' packing buffers (sgemm.Scratch) here,
// the attention's kept probabilities and score blocks (goeng.AttentionMemoryOf) in
// ScaledDotProductAttention.

// packingPool is what sgemm's pools hold: every running worker's packing buffers, grown to
// the largest product's need, and the operands packed once per product. They are recycled
// from product to product, so a step holds them from its first product on.
type packingPool struct {
	workers, perWorker, shared int
	bytes                      int64
}

// LabelPacking labels the pools in the usage breakdown. Pools hold them, so a heap
// measured after a garbage collection (which empties sync.Pool) does not.
const LabelPacking = "sgemm packing buffers"

// gemm counts the scratch of one product op(A) [m, k]·op(B) [k, n] (packed: a decoded
// quantized B): the pools grow to hold it.
func (e *Engine) gemm(m, n, k int, ta, tb, packed bool) {
	if m <= 0 || n <= 0 || k <= 0 {
		return
	}
	per, shared, running := sgemm.Scratch(m, n, k, ta, tb, packed, e.threads)
	p := &e.pool
	p.workers, p.perWorker, p.shared = max(p.workers, running), max(p.perWorker, per), max(p.shared, shared)
	bytes := 4 * int64(p.workers*p.perWorker+p.shared)
	if grow := bytes - p.bytes; grow > 0 {
		b := &buffer{bytes: grow, born: e.clock, label: LabelPacking}
		a := e.newArray([]int{int(grow / 4)}, mx.Float32, b)
		a.pinned = true
		p.bytes = bytes
	}
}
