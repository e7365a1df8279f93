package data

import (
	"errors"
	"fmt"
	"math/bits"
	"math/rand/v2"
)

// Position is where an Iterator stands: the epoch and the offset of the next pair in
// that epoch's order. It is all a checkpoint needs to resume the data stream.
type Position struct {
	Epoch  int `json:"epoch"`
	Offset int `json:"offset"`
}

// Iterator hands out batches of pairs, epoch after epoch, forever.
//
// Epoch e visits every pair exactly once, in file order or, when shuffling, in a
// permutation drawn from a PCG generator seeded with (seed, e). Because each epoch's
// order depends only on (seed, e), a Position reached by iterating and the same
// Position reached by Seek continue identically.
//
// Batches never straddle epochs, and the last batch of an epoch is kept even when it
// is short (n mod batchSize pairs). Unlike mlx-lm, which drops it, this guarantees every
// example is trained on once per epoch and makes an epoch's end a Position that does
// not depend on the batch size; the loss is a mean over the batch, so a short batch is
// weighted like the others.
type Iterator struct {
	pairs     []Pair
	batchSize int
	seed      uint64
	shuffle   bool

	pos        Position
	order      []int // order of epoch orderEpoch; nil until needed
	orderEpoch int
}

// NewIterator returns an iterator at Position{0, 0}. It does not copy pairs; they must
// not be modified while it is in use.
func NewIterator(pairs []Pair, batchSize int, seed uint64, shuffle bool) (*Iterator, error) {
	if len(pairs) == 0 {
		return nil, errors.New("data: iterator: no pairs")
	}
	if batchSize < 1 {
		return nil, fmt.Errorf("data: iterator: batch size %d, want at least 1", batchSize)
	}
	return &Iterator{pairs: pairs, batchSize: batchSize, seed: seed, shuffle: shuffle}, nil
}

// BatchesPerEpoch is ⌈pairs / batchSize⌉, counting the short final batch.
func (it *Iterator) BatchesPerEpoch() int {
	return (len(it.pairs) + it.batchSize - 1) / it.batchSize
}

// Next returns the next batch and the position after it — the position to save so
// that a resumed run's first batch is the one that would have followed this one. The
// batch slice is the caller's; the token slices inside are shared.
func (it *Iterator) Next() ([]Pair, Position) {
	order := it.epochOrder(it.pos.Epoch)
	end := min(it.pos.Offset+it.batchSize, len(order))
	batch := make([]Pair, 0, end-it.pos.Offset)
	for _, k := range order[it.pos.Offset:end] {
		batch = append(batch, it.pairs[k])
	}
	it.pos.Offset = end
	if end == len(order) {
		it.pos = Position{Epoch: it.pos.Epoch + 1}
	}
	return batch, it.pos
}

// Seek moves the iterator to pos, as saved from Next or Pos. An offset equal to the
// number of pairs is the start of the next epoch.
func (it *Iterator) Seek(pos Position) error {
	n := len(it.pairs)
	if pos.Epoch < 0 || pos.Offset < 0 || pos.Offset > n {
		return fmt.Errorf("data: iterator: position {epoch %d, offset %d} outside [0, %d] pairs", pos.Epoch, pos.Offset, n)
	}
	if pos.Offset == n {
		pos = Position{Epoch: pos.Epoch + 1}
	}
	it.pos = pos
	return nil
}

// epochOrder returns the visiting order of epoch e, computing it once per epoch.
func (it *Iterator) epochOrder(e int) []int {
	if it.order != nil && it.orderEpoch == e {
		return it.order
	}
	if !it.shuffle {
		if it.order == nil {
			it.order = make([]int, len(it.pairs))
			for i := range it.order {
				it.order[i] = i
			}
		}
		it.orderEpoch = e
		return it.order
	}
	it.order = permutation(len(it.pairs), it.seed, uint64(e))
	it.orderEpoch = e
	return it.order
}

// permutation is a Fisher–Yates shuffle of 0..n-1 driven by PCG(seed, epoch). The
// shuffle is written out rather than taken from rand.Rand so that the order is fixed by
// PCG's specified output and this code alone: a run resumed under a newer Go must see
// the same order. The index j = ⌊x·(i+1) / 2⁶⁴⌋ maps a 64-bit draw x onto [0, i]; its
// bias is below (i+1)/2⁶⁴, negligible for any dataset.
func permutation(n int, seed, epoch uint64) []int {
	src := rand.NewPCG(seed, epoch)
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	for i := n - 1; i > 0; i-- {
		j, _ := bits.Mul64(src.Uint64(), uint64(i+1))
		p[i], p[j] = p[j], p[i]
	}
	return p
}
