package goeng

import (
	"fmt"
	"slices"

	"github.com/dgtune/dgtune/mx/internal/dims"
)

// stridedCopy fills the contiguous dst (of shape) from src read at
// off + Σ idx[d]·st[d]; with scatter it writes dst's elements into src's positions
// instead. It is the one loop behind transpose, broadcast, slice, slice-update and
// concatenate.
func stridedCopy[T any](dst, src []T, shape, st []int, off int, scatter bool) {
	nd := len(shape)
	n := dims.Numel(shape)
	if n == 0 {
		return
	}
	if nd == 0 {
		if scatter {
			src[off] = dst[0]
		} else {
			dst[0] = src[off]
		}
		return
	}
	last, ls := shape[nd-1], st[nd-1]
	rows := n / last
	parallelFor(rows, last, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			o, rem := off, r
			for d := nd - 2; d >= 0; d-- {
				o += (rem % shape[d]) * st[d]
				rem /= shape[d]
			}
			row := dst[r*last : (r+1)*last]
			switch {
			case ls == 1 && scatter:
				copy(src[o:o+last], row)
			case ls == 1:
				copy(row, src[o:o+last])
			case scatter:
				for i := range row {
					src[o+i*ls] = row[i]
				}
			default:
				for i := range row {
					row[i] = src[o+i*ls]
				}
			}
		}
	})
}

// copyInto dispatches stridedCopy on the element type of the data slices.
func copyInto(dst, src any, shape, st []int, off int, scatter bool) {
	switch d := dst.(type) {
	case []float32:
		stridedCopy(d, src.([]float32), shape, st, off, scatter)
	case []float64:
		stridedCopy(d, src.([]float64), shape, st, off, scatter)
	case []uint16:
		stridedCopy(d, src.([]uint16), shape, st, off, scatter)
	case []int32:
		stridedCopy(d, src.([]int32), shape, st, off, scatter)
	case []int64:
		stridedCopy(d, src.([]int64), shape, st, off, scatter)
	case []uint32:
		stridedCopy(d, src.([]uint32), shape, st, off, scatter)
	case []uint8:
		stridedCopy(d, src.([]uint8), shape, st, off, scatter)
	case []bool:
		stridedCopy(d, src.([]bool), shape, st, off, scatter)
	default:
		panic(fmt.Sprintf("goeng: bad data %T", dst))
	}
}

// view materialises x read through strides st at offset off as a tensor of shape.
func view(x *tensor, shape, st []int, off int) *tensor {
	data := makeData(x.dt, dims.Numel(shape))
	copyInto(data, x.raw(), shape, st, off, false)
	return newTensor(shape, x.dt, data)
}

func reshapeKernel(x *tensor, shape []int) *tensor {
	if dims.Numel(shape) != x.size() {
		panic(fmt.Sprintf("goeng: reshape %v to %v", x.shape, shape))
	}
	return newTensor(shape, x.dt, x.raw())
}

func transposeKernel(x *tensor, axes []int) *tensor {
	identity := true
	for i, a := range axes {
		identity = identity && a == i
	}
	if identity {
		return x.alias()
	}
	if nd := len(axes); nd >= 2 && axes[nd-2] == nd-1 && axes[nd-1] == nd-2 && dims.IsIdentity(axes[:nd-2]) {
		// A swap of the last two axes is pending until something reads the elements.
		if src := x.swapped(); src != nil {
			return src.alias() // swapped twice
		}
		shape := slices.Clone(x.shape)
		shape[nd-2], shape[nd-1] = shape[nd-1], shape[nd-2]
		return &tensor{shape: shape, dt: x.dt, swap: &swapView{src: x}}
	}
	st := strides(x.shape)
	shape := make([]int, len(axes))
	pst := make([]int, len(axes))
	for i, a := range axes {
		shape[i] = x.shape[a]
		pst[i] = st[a]
	}
	return view(x, shape, pst, 0)
}

func broadcastKernel(x *tensor, shape []int) *tensor {
	if slices.Equal(x.shape, shape) {
		return x
	}
	return view(x, shape, broadcastStrides(x.shape, shape), 0)
}

func sliceKernel(x *tensor, start, stop, step []int) *tensor {
	st := strides(x.shape)
	off := 0
	sst := make([]int, len(st))
	for i := range st {
		off += start[i] * st[i]
		sst[i] = st[i] * step[i]
	}
	return view(x, dims.Slice(start, stop, step), sst, off)
}

func sliceUpdateKernel(x, upd *tensor, start, stop, step []int) *tensor {
	if upd.dt != x.dt {
		upd = castTensor(upd, x.dt)
	}
	out := newTensor(x.shape, x.dt, makeData(x.dt, x.size()))
	copyInto(out.data, x.raw(), x.shape, strides(x.shape), 0, false) // in parallel, unlike a clone
	scatterSlice(out, upd, start, stop, step)
	return out
}

// scatterSlice writes upd (of out's dtype) into the region start:stop:step of out, which
// the caller owns.
func scatterSlice(out, upd *tensor, start, stop, step []int) {
	st := strides(out.shape)
	off := 0
	sst := make([]int, len(st))
	for i := range st {
		off += start[i] * st[i]
		sst[i] = st[i] * step[i]
	}
	copyInto(upd.raw(), out.data, dims.Slice(start, stop, step), sst, off, true)
}

func concatKernel(xs []*tensor, axis int) *tensor {
	shape := slices.Clone(xs[0].shape)
	shape[axis] = 0
	for _, x := range xs {
		shape[axis] += x.shape[axis]
	}
	dt := xs[0].dt
	data := makeData(dt, dims.Numel(shape))
	st := strides(shape)
	pos := 0
	for _, x := range xs {
		if x.dt != dt {
			x = castTensor(x, dt)
		}
		copyInto(x.raw(), data, x.shape, st, pos*st[axis], true)
		pos += x.shape[axis]
	}
	return newTensor(shape, dt, data)
}

// moveAxisLast returns x with axis moved to the end, and the permutation that undoes it.
func moveAxisLast(x *tensor, axis int) (*tensor, []int) {
	nd := len(x.shape)
	if axis == nd-1 {
		return x, nil
	}
	perm := make([]int, 0, nd)
	for i := range nd {
		if i != axis {
			perm = append(perm, i)
		}
	}
	perm = append(perm, axis)
	inv := make([]int, nd)
	for i, p := range perm {
		inv[p] = i
	}
	return transposeKernel(x, perm), inv
}

func restoreAxis(x *tensor, inv []int) *tensor {
	if inv == nil {
		return x
	}
	return transposeKernel(x, inv)
}
