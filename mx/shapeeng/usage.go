package shapeeng

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
)

// Usage is the memory live at one time: buffers made at or before it and dropped at or
// after it, and the scratch of the op running then.
type Usage struct {
	Time int
	// Heap is what Go's heap holds; Mapped the checkpoint pages used in place.
	Heap, Mapped int64
	// Parts splits the total by label (the op that made a buffer, "backward" for the
	// backward pass's, or the label given to Keep and Mapped), largest first.
	Parts []Part
}

// Part is one label's share of a Usage.
type Part struct {
	Label        string
	Heap, Mapped int64
}

// Total is Heap + Mapped.
func (u Usage) Total() int64 { return u.Heap + u.Mapped }

// Label returns the bytes of one label (heap and mapped together).
func (u Usage) Label(label string) int64 {
	for _, p := range u.Parts {
		if p.Label == label {
			return p.Heap + p.Mapped
		}
	}
	return 0
}

// forever is the death of arrays that live to the end.
const forever = math.MaxInt

// settle computes every buffer's death: an array dies after its last read, or with the
// last array that refers to it, whichever is later; kept arrays never do; a buffer dies
// with the last array over it.
func (e *Engine) settle() []*buffer {
	death := make([]int, len(e.arrays))
	var bufs []*buffer
	seen := map[*buffer]bool{}
	addBuf := func(b *buffer) {
		if b != nil && !seen[b] {
			seen[b] = true
			b.death = b.born
			bufs = append(bufs, b)
		}
	}
	for i := len(e.arrays) - 1; i >= 0; i-- {
		a := e.arrays[i]
		d := max(a.born, a.last)
		switch {
		case a.pinned:
			d = forever
		case a.release > 0:
			d = a.release
		default:
			for _, hd := range a.holders {
				if hd.id <= a.id {
					panic(fmt.Sprintf("shapeeng: array %d is held by an older one, %d", a.id, hd.id))
				}
				d = max(d, death[hd.id])
			}
		}
		death[i] = d
	}
	for i, a := range e.arrays {
		for _, b := range []*buffer{a.buf, a.matBuf()} {
			if b != nil {
				addBuf(b)
				b.death = max(b.death, death[i])
			}
		}
	}
	return bufs
}

// matBuf is the materialised elements of a's pending swap, if any.
func (a *array) matBuf() *buffer {
	if a.sv == nil {
		return nil
	}
	return a.sv.mat
}

// At is the memory live at time t.
func (e *Engine) At(t int) Usage {
	return e.usageAt(e.settle(), t)
}

func (e *Engine) usageAt(bufs []*buffer, t int) Usage {
	u := Usage{Time: t}
	parts := map[string]*Part{}
	part := func(label string) *Part {
		p := parts[label]
		if p == nil {
			p = &Part{Label: label}
			parts[label] = p
		}
		return p
	}
	for _, b := range bufs {
		if b.born > t || b.death < t {
			continue
		}
		if b.mapped {
			u.Mapped += b.bytes
			part(b.label).Mapped += b.bytes
		} else {
			u.Heap += b.bytes
			part(b.label).Heap += b.bytes
		}
	}
	for _, s := range e.scratch {
		if s.time == t {
			u.Heap += s.bytes
			part(s.label).Heap += s.bytes
		}
	}
	for _, p := range parts {
		u.Parts = append(u.Parts, *p)
	}
	slices.SortFunc(u.Parts, func(a, b Part) int {
		if c := cmp.Compare(b.Heap+b.Mapped, a.Heap+a.Mapped); c != 0 {
			return c
		}
		return strings.Compare(a.Label, b.Label)
	})
	return u
}

// Peak is the memory live at the time from from on (inclusive) when the most is, the
// earliest such time on a tie.
func (e *Engine) Peak(from int) Usage {
	bufs := e.settle()
	type event struct {
		t     int
		delta int64
	}
	var ev []event
	for _, b := range bufs {
		if b.death < from {
			continue
		}
		ev = append(ev, event{max(b.born, from), b.bytes})
		if b.death != forever {
			ev = append(ev, event{b.death + 1, -b.bytes})
		}
	}
	for _, s := range e.scratch {
		if s.time >= from {
			ev = append(ev, event{s.time, s.bytes}, event{s.time + 1, -s.bytes})
		}
	}
	sort.Slice(ev, func(i, j int) bool { return ev[i].t < ev[j].t })
	var live, best int64
	bestT := from
	for i := 0; i < len(ev); {
		t := ev[i].t
		for ; i < len(ev) && ev[i].t == t; i++ {
			live += ev[i].delta
		}
		if live > best {
			best, bestT = live, t
		}
	}
	return e.usageAt(bufs, bestT)
}
