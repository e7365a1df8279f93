package goeng

import (
	"math"
	"sort"

	"github.com/dgtune/dgtune/mx/internal/dims"

	"github.com/dgtune/dgtune/mx"
)

// toRows moves the given (sorted) axes to the end and returns the tensor with the shape
// of the kept axes and the row length.
func toRows(x *tensor, axes []int) (*tensor, []int, int) {
	nd := len(x.shape)
	isRed := make([]bool, nd)
	for _, a := range axes {
		isRed[a] = true
	}
	perm := make([]int, 0, nd)
	var kept []int
	for i := range nd {
		if !isRed[i] {
			perm = append(perm, i)
			kept = append(kept, x.shape[i])
		}
	}
	rowLen := 1
	for _, a := range axes {
		perm = append(perm, a)
		rowLen *= x.shape[a]
	}
	return transposeKernel(x, perm), kept, rowLen
}

func reduceKernel(op mx.ReduceOp, x *tensor, axes []int, keep bool) *tensor {
	outShape := dims.Reduced(x.shape, axes, keep)
	if op == mx.ReduceSum && x.dt.IsFloat() && len(axes) > 0 && axes[len(axes)-1] < len(x.shape)-1 && dims.Contiguous(axes) {
		return sumMiddle(x, axes, outShape)
	}
	xt, _, rowLen := toRows(x, axes)
	rows := dims.Numel(outShape)
	switch op {
	case mx.ReduceAll, mx.ReduceAny:
		in := xt.bools()
		out := make([]bool, rows)
		for r := range rows {
			row := in[r*rowLen : (r+1)*rowLen]
			v := op == mx.ReduceAll
			for _, b := range row {
				if op == mx.ReduceAll {
					v = v && b
				} else {
					v = v || b
				}
			}
			out[r] = v
		}
		return newTensor(outShape, mx.Bool, out)
	}
	if !x.dt.IsFloat() && op != mx.ReduceLogSumExp {
		in := xt.i64()
		out := make([]int64, rows)
		for r := range rows {
			row := in[r*rowLen : (r+1)*rowLen]
			var v int64
			switch op {
			case mx.ReduceSum:
				for _, a := range row {
					v += a
				}
			case mx.ReduceProd:
				v = 1
				for _, a := range row {
					v *= a
				}
			case mx.ReduceMax:
				v = math.MinInt64
				for _, a := range row {
					v = max(v, a)
				}
			case mx.ReduceMin:
				v = math.MaxInt64
				for _, a := range row {
					v = min(v, a)
				}
			}
			out[r] = v
		}
		dt := x.dt
		if dt == mx.Bool {
			dt = mx.Int32
		}
		return fromI64(outShape, dt, out)
	}
	in := xt.f32()
	out := make([]float32, rows)
	parallelFor(rows, rowLen, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			out[r] = reduceRow(op, in[r*rowLen:(r+1)*rowLen])
		}
	})
	dt := x.dt
	if !dt.IsFloat() {
		dt = mx.Float32
	}
	return fromF32(outShape, dt, out)
}

// sumMiddle sums x [outer, red, inner] over its middle axes (inner > 1, so rows are not
// contiguous) without moving them last: out[o, i] = Σ_r x[o, r, i], accumulated in float64
// in order of r — the same value reduceRow gives the transposed row, without the
// transposed copy.
func sumMiddle(x *tensor, axes []int, outShape []int) *tensor {
	outer := dims.Numel(x.shape[:axes[0]])
	red := dims.Numel(x.shape[axes[0] : axes[len(axes)-1]+1])
	inner := dims.Numel(x.shape[axes[len(axes)-1]+1:])
	in := x.f32()
	out := make([]float32, outer*inner)
	const chunk = 512 // columns per task: a float64 accumulator row that stays in L1
	parts := (inner + chunk - 1) / chunk
	parallelFor(outer*parts, red*min(chunk, inner), func(lo, hi int) {
		acc := make([]float64, min(chunk, inner))
		for t := lo; t < hi; t++ {
			o, c0 := t/parts, (t%parts)*chunk
			c1 := min(c0+chunk, inner)
			a := acc[:c1-c0]
			clear(a)
			for r := range red {
				row := in[(o*red+r)*inner+c0 : (o*red+r)*inner+c1]
				for i, v := range row {
					a[i] += float64(v)
				}
			}
			dst := out[o*inner+c0 : o*inner+c1]
			for i, v := range a {
				dst[i] = float32(v)
			}
		}
	})
	dt := x.dt
	return fromF32(outShape, dt, out)
}

// reduceRow accumulates in float64 so that sums of long rows stay accurate.
func reduceRow(op mx.ReduceOp, row []float32) float32 {
	switch op {
	case mx.ReduceSum:
		var s float64
		for _, v := range row {
			s += float64(v)
		}
		return float32(s)
	case mx.ReduceProd:
		p := 1.0
		for _, v := range row {
			p *= float64(v)
		}
		return float32(p)
	case mx.ReduceMax:
		m := float32(math.Inf(-1))
		for _, v := range row {
			if v > m || v != v {
				m = v
			}
		}
		return m
	case mx.ReduceMin:
		m := float32(math.Inf(1))
		for _, v := range row {
			if v < m || v != v {
				m = v
			}
		}
		return m
	case mx.ReduceLogSumExp:
		return logSumExpRow(row)
	}
	panic("goeng: bad reduce op")
}

// logSumExpRow is max + log Σ e^(x − max), the exponentials taken with expInto (within
// about one float32 ulp, several times faster than math.Exp: the vocabulary-wide
// log-sum-exp of the loss is millions of them per step) in a scratch chunk at a time.
func logSumExpRow(row []float32) float32 {
	m := float32(math.Inf(-1))
	for _, v := range row {
		if v > m || v != v {
			m = v
		}
	}
	if math.IsInf(float64(m), 0) || m != m {
		return m
	}
	var buf [1024]float32
	var s float64
	for lo := 0; lo < len(row); lo += len(buf) {
		chunk := row[lo:min(lo+len(buf), len(row))]
		s += expInto(buf[:len(chunk)], chunk, m)
	}
	return m + float32(math.Log(s))
}

func argKernel(x *tensor, axis int, keep, isMax bool) *tensor {
	outShape := dims.Reduced(x.shape, []int{axis}, keep)
	xt, _ := moveAxisLast(x, axis)
	d := x.shape[axis]
	rows := dims.Numel(outShape)
	out := make([]int32, rows)
	if x.dt.IsFloat() {
		in := xt.f32()
		for r := range rows {
			row := in[r*d : (r+1)*d]
			best := 0
			for i, v := range row {
				if (isMax && v > row[best]) || (!isMax && v < row[best]) || (v != v && row[best] == row[best]) {
					best = i
				}
			}
			out[r] = int32(best)
		}
	} else {
		in := xt.i64()
		for r := range rows {
			row := in[r*d : (r+1)*d]
			best := 0
			for i, v := range row {
				if (isMax && v > row[best]) || (!isMax && v < row[best]) {
					best = i
				}
			}
			out[r] = int32(best)
		}
	}
	return newTensor(outShape, mx.Int32, out)
}

func softmaxKernel(x *tensor, axis int) *tensor {
	xt, inv := moveAxisLast(x, axis)
	d := x.shape[axis]
	in := xt.f32()
	out := make([]float32, len(in))
	rows := len(in) / max(d, 1)
	parallelFor(rows, d, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			softmaxRow(out[r*d:(r+1)*d], in[r*d:(r+1)*d])
		}
	})
	dt := x.dt
	if !dt.IsFloat() {
		dt = mx.Float32
	}
	return restoreAxis(fromF32(xt.shape, dt, out), inv)
}

func softmaxRow(dst, row []float32) {
	m := float32(math.Inf(-1))
	for _, v := range row {
		m = max(m, v)
	}
	var s float64
	for i, v := range row {
		e := math.Exp(float64(v - m))
		dst[i] = float32(e)
		s += e
	}
	inv := float32(1 / s)
	for i := range dst {
		dst[i] *= inv
	}
}

func scanKernel(x *tensor, axis int, reverse, inclusive, isMax bool) *tensor {
	xt, inv := moveAxisLast(x, axis)
	d := x.shape[axis]
	rows := xt.size() / max(d, 1)
	order := func(i int) int {
		if reverse {
			return d - 1 - i
		}
		return i
	}
	if x.dt.IsFloat() {
		in := xt.f32()
		out := make([]float32, len(in))
		for r := range rows {
			row, dst := in[r*d:(r+1)*d], out[r*d:(r+1)*d]
			acc := float32(0)
			if isMax {
				acc = float32(math.Inf(-1))
			}
			for i := range d {
				j := order(i)
				if !inclusive {
					dst[j] = acc
				}
				if isMax {
					acc = max(acc, row[j])
				} else {
					acc += row[j]
				}
				if inclusive {
					dst[j] = acc
				}
			}
		}
		return restoreAxis(fromF32(xt.shape, x.dt, out), inv)
	}
	in := xt.i64()
	out := make([]int64, len(in))
	for r := range rows {
		row, dst := in[r*d:(r+1)*d], out[r*d:(r+1)*d]
		acc := int64(0)
		if isMax {
			acc = minInt(x.dt)
		}
		for i := range d {
			j := order(i)
			if !inclusive {
				dst[j] = acc
			}
			if isMax {
				acc = max(acc, row[j])
			} else {
				acc += row[j]
			}
			if inclusive {
				dst[j] = acc
			}
		}
	}
	dt := x.dt
	if dt == mx.Bool {
		dt = mx.Int32
	}
	return restoreAxis(fromI64(xt.shape, dt, out), inv)
}

// minInt is the identity of max for an integer dtype, where an exclusive cummax starts
// (MLX: numeric_limits<T>::min()). It must fit the dtype: int64's minimum would wrap to
// 0 in int32.
func minInt(dt mx.DType) int64 {
	switch dt {
	case mx.Int32:
		return math.MinInt32
	case mx.Int64:
		return math.MinInt64
	}
	return 0 // unsigned types and bool
}

// argsortKernel sorts stably; NaN sorts last, as in MLX. Argpartition uses it too: a
// full sort is a valid partition for every kth.
func argsortKernel(x *tensor, axis int) *tensor {
	xt, inv := moveAxisLast(x, axis)
	d := x.shape[axis]
	rows := xt.size() / max(d, 1)
	out := make([]int32, xt.size())
	if x.dt.IsFloat() {
		in := xt.f32()
		parallelFor(rows, d*8, func(lo, hi int) {
			for r := lo; r < hi; r++ {
				row, idx := in[r*d:(r+1)*d], out[r*d:(r+1)*d]
				argsortFloatRow(row, idx)
			}
		})
	} else {
		in := xt.i64()
		for r := range rows {
			row, idx := in[r*d:(r+1)*d], out[r*d:(r+1)*d]
			for i := range idx {
				idx[i] = int32(i)
			}
			if !countingArgsort(row, idx) {
				sort.SliceStable(idx, func(a, b int) bool { return row[idx[a]] < row[idx[b]] })
			}
		}
	}
	return restoreAxis(newTensor(xt.shape, mx.Int32, out), inv)
}

// insertionMaxRow is the longest row argsortFloatRow sorts by insertion: a router's
// top-k over its experts, 32 at the bench preset and 128 at the real geometry (384 rows on
// 2 cores: 420 → 90 µs and 2.9 → 1.9 ms against sort.SliceStable and its closure).
const insertionMaxRow = 128

// argsortFloatRow sets idx to the stable argsort of row, NaNs last: ascending by value,
// ties in index order. Stable sorting has one answer, so the insertion sort of short rows
// and sort.SliceStable give the same indices.
func argsortFloatRow(row []float32, idx []int32) {
	for i := range idx {
		idx[i] = int32(i)
	}
	// less is the order: a NaN is never less than anything, and everything else is less
	// than a NaN.
	less := func(va, vb float32) bool { return va == va && (vb != vb || va < vb) }
	if len(row) > insertionMaxRow {
		sort.SliceStable(idx, func(a, b int) bool { return less(row[idx[a]], row[idx[b]]) })
		return
	}
	for i := 1; i < len(idx); i++ {
		cur := idx[i]
		v := row[cur]
		j := i
		for j > 0 && less(v, row[idx[j-1]]) {
			idx[j] = idx[j-1]
			j--
		}
		idx[j] = cur
	}
}

// countingArgsort sets idx to the stable argsort of row (what sort.SliceStable gives) by
// counting, when the values span a range no wider than a few times the row (expert ids
// sorted for the MoE branch: linear time instead of n·log²n comparisons through a
// closure). It reports false, leaving idx alone, for a wider range.
func countingArgsort(row []int64, idx []int32) bool {
	if len(row) == 0 {
		return true
	}
	lo, hi := row[0], row[0]
	for _, v := range row {
		lo, hi = min(lo, v), max(hi, v)
	}
	if uint64(hi-lo) >= uint64(4*len(row)+64) {
		return false
	}
	next := make([]int32, hi-lo+2) // next[v-lo+1] counts v; then next[v-lo] is where v goes
	for _, v := range row {
		next[v-lo+1]++
	}
	for i := 1; i < len(next); i++ {
		next[i] += next[i-1]
	}
	for i, v := range row {
		idx[next[v-lo]] = int32(i)
		next[v-lo]++
	}
	return true
}
