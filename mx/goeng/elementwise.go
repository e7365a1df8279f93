package goeng

import (
	"fmt"
	"math"

	"github.com/dgtune/dgtune/mx/internal/dims"

	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/internal/uninit"
)

// bcastRows calls f(o, ia, ib, n, da, db) for runs of n output elements starting at flat
// output offset o, where the inputs start at ia and ib and advance by da and db. Axes that
// both inputs traverse contiguously (or both broadcast) are merged first, so a same-shape
// or scalar operation is one long run rather than a run per row of its last axis; long
// runs are cut into chunks so that they still spread over the cores.
func bcastRows(out []int, sa, sb []int, f func(o, ia, ib, n, da, db int)) {
	out, sa, sb = coalesceAxes(out, sa, sb)
	nd := len(out)
	if nd == 0 {
		f(0, 0, 0, 1, 0, 0)
		return
	}
	last := out[nd-1]
	rows := dims.Numel(out[:nd-1])
	da, db := sa[nd-1], sb[nd-1]
	// A row longer than rowChunk is several work items, each a contiguous part of it.
	const rowChunk = 1 << 14
	parts := max(1, (last+rowChunk-1)/rowChunk)
	partLen := (last + parts - 1) / parts
	parallelFor(rows*parts, min(last, partLen), func(lo, hi int) {
		for item := lo; item < hi; item++ {
			r, part := item/parts, item%parts
			ia, ib, rem := 0, 0, r
			for d := nd - 2; d >= 0; d-- {
				c := rem % out[d]
				rem /= out[d]
				ia += c * sa[d]
				ib += c * sb[d]
			}
			c0 := part * partLen
			n := min(partLen, last-c0)
			f(r*last+c0, ia+c0*da, ib+c0*db, n, da, db)
		}
	})
}

// coalesceAxes merges each axis into the one after it wherever both inputs step over the
// pair as over one axis (stride[d] = stride[d+1]·size[d+1], which covers broadcast axes
// with stride 0 on both sides too), and drops axes of size 1. The element order, and so
// every offset, is unchanged.
func coalesceAxes(out, sa, sb []int) ([]int, []int, []int) {
	var o, a, b []int
	for d := range out {
		if out[d] == 1 {
			continue
		}
		if k := len(o) - 1; k >= 0 && a[k] == sa[d]*out[d] && b[k] == sb[d]*out[d] {
			o[k] *= out[d]
			a[k], b[k] = sa[d], sb[d]
			continue
		}
		o, a, b = append(o, out[d]), append(a, sa[d]), append(b, sb[d])
	}
	return o, a, b
}

// binaryF32 applies fn elementwise with broadcasting. arith, when not nil, is the same
// op as a whole-row loop; same-shape rows use it, and rows against one value use inline
// loops for add and multiply, to avoid a call per element.
func binaryF32(op mx.BinaryOp, out []int, as, bs []int, a, b []float32, fn func(x, y float32) float32, arith func(dst, x, y []float32)) []float32 {
	res := uninit.Float32s(dims.Numel(out)) // bcastRows visits every element once
	sa, sb := broadcastStrides(as, out), broadcastStrides(bs, out)
	bcastRows(out, sa, sb, func(o, ia, ib, n, da, db int) {
		dst := res[o : o+n]
		// The AVX2 kernels take the leading multiple of 8 of a run of add, subtract,
		// multiply or divide; the loops below do the rest (or all of it without them).
		switch {
		case da == 1 && db == 1:
			if done := vecVV(op, dst, a[ia:ia+n], b[ib:ib+n]); done > 0 {
				dst, ia, ib, n = dst[done:], ia+done, ib+done, n-done
			}
		case da == 1 && db == 0:
			if done := vecVS(op, dst, a[ia:ia+n], b[ib]); done > 0 {
				dst, ia, n = dst[done:], ia+done, n-done
			}
		case da == 0 && db == 1:
			if done := vecSV(op, dst, a[ia], b[ib:ib+n]); done > 0 {
				dst, ib, n = dst[done:], ib+done, n-done
			}
		}
		switch {
		case da == 1 && db == 1 && arith != nil:
			arith(dst, a[ia:ia+n], b[ib:ib+n])
		case da == 1 && db == 1:
			x, y := a[ia:ia+n], b[ib:ib+n]
			for i := range dst {
				dst[i] = fn(x[i], y[i])
			}
		case da == 1 && db == 0 && op == mx.OpMultiply:
			x, y := a[ia:ia+n], b[ib]
			for i := range dst {
				dst[i] = x[i] * y
			}
		case da == 1 && db == 0 && op == mx.OpAdd:
			x, y := a[ia:ia+n], b[ib]
			for i := range dst {
				dst[i] = x[i] + y
			}
		case da == 1 && db == 0:
			x, y := a[ia:ia+n], b[ib]
			for i := range dst {
				dst[i] = fn(x[i], y)
			}
		case da == 0 && db == 1:
			x, y := a[ia], b[ib:ib+n]
			for i := range dst {
				dst[i] = fn(x, y[i])
			}
		default:
			for i := range dst {
				dst[i] = fn(a[ia+i*da], b[ib+i*db])
			}
		}
	})
	return res
}

func binaryGeneric[T, U any](out []int, as, bs []int, a, b []T, fn func(x, y T) U) []U {
	res := make([]U, dims.Numel(out))
	sa, sb := broadcastStrides(as, out), broadcastStrides(bs, out)
	bcastRows(out, sa, sb, func(o, ia, ib, n, da, db int) {
		for i := range n {
			res[o+i] = fn(a[ia+i*da], b[ib+i*db])
		}
	})
	return res
}

func f32Func(op mx.BinaryOp) func(x, y float32) float32 {
	switch op {
	case mx.OpAdd:
		return func(x, y float32) float32 { return x + y }
	case mx.OpSubtract:
		return func(x, y float32) float32 { return x - y }
	case mx.OpMultiply:
		return func(x, y float32) float32 { return x * y }
	case mx.OpDivide:
		return func(x, y float32) float32 { return x / y }
	case mx.OpMaximum:
		return func(x, y float32) float32 {
			if x != x || y != y {
				return float32(math.NaN())
			}
			return max(x, y)
		}
	case mx.OpMinimum:
		return func(x, y float32) float32 {
			if x != x || y != y {
				return float32(math.NaN())
			}
			return min(x, y)
		}
	case mx.OpPower:
		return func(x, y float32) float32 { return float32(math.Pow(float64(x), float64(y))) }
	case mx.OpRemainder:
		return func(x, y float32) float32 {
			r := float32(math.Mod(float64(x), float64(y)))
			if r != 0 && (r < 0) != (y < 0) {
				r += y
			}
			return r
		}
	case mx.OpFloorDivide:
		return func(x, y float32) float32 { return float32(math.Floor(float64(x / y))) }
	}
	return nil
}

func cmpF32(op mx.BinaryOp) func(x, y float32) bool {
	switch op {
	case mx.OpEqual:
		return func(x, y float32) bool { return x == y }
	case mx.OpNotEqual:
		return func(x, y float32) bool { return x != y }
	case mx.OpLess:
		return func(x, y float32) bool { return x < y }
	case mx.OpLessEqual:
		return func(x, y float32) bool { return x <= y }
	case mx.OpGreater:
		return func(x, y float32) bool { return x > y }
	case mx.OpGreaterEqual:
		return func(x, y float32) bool { return x >= y }
	case mx.OpLogicalAnd:
		return func(x, y float32) bool { return x != 0 && y != 0 }
	case mx.OpLogicalOr:
		return func(x, y float32) bool { return x != 0 || y != 0 }
	}
	return nil
}

func cmpI64(op mx.BinaryOp) func(x, y int64) bool {
	switch op {
	case mx.OpEqual:
		return func(x, y int64) bool { return x == y }
	case mx.OpNotEqual:
		return func(x, y int64) bool { return x != y }
	case mx.OpLess:
		return func(x, y int64) bool { return x < y }
	case mx.OpLessEqual:
		return func(x, y int64) bool { return x <= y }
	case mx.OpGreater:
		return func(x, y int64) bool { return x > y }
	case mx.OpGreaterEqual:
		return func(x, y int64) bool { return x >= y }
	case mx.OpLogicalAnd:
		return func(x, y int64) bool { return x != 0 && y != 0 }
	case mx.OpLogicalOr:
		return func(x, y int64) bool { return x != 0 || y != 0 }
	}
	return nil
}

func i64Func(op mx.BinaryOp) func(x, y int64) int64 {
	switch op {
	case mx.OpAdd:
		return func(x, y int64) int64 { return x + y }
	case mx.OpSubtract:
		return func(x, y int64) int64 { return x - y }
	case mx.OpMultiply:
		return func(x, y int64) int64 { return x * y }
	case mx.OpMaximum:
		return func(x, y int64) int64 { return max(x, y) }
	case mx.OpMinimum:
		return func(x, y int64) int64 { return min(x, y) }
	case mx.OpRemainder:
		return func(x, y int64) int64 {
			if y == 0 {
				return 0
			}
			r := x % y
			if r != 0 && (r < 0) != (y < 0) {
				r += y
			}
			return r
		}
	case mx.OpFloorDivide:
		return func(x, y int64) int64 {
			if y == 0 {
				return 0
			}
			q := x / y
			if (x%y != 0) && ((x < 0) != (y < 0)) {
				q--
			}
			return q
		}
	case mx.OpPower:
		return func(x, y int64) int64 {
			r := int64(1)
			for range y {
				r *= x
			}
			return r
		}
	}
	return nil
}

// binaryKernel computes op with MLX's type rules: comparisons give bool; integer
// division and integer power of negative exponents give float32.
func binaryKernel(op mx.BinaryOp, a, b *tensor) *tensor {
	out, err := mx.BroadcastShapes(a.shape, b.shape)
	if err != nil {
		panic(fmt.Sprintf("goeng: %s: %v", op, err))
	}
	dt := mx.PromoteTypes(a.dt, b.dt)
	if op.IsComparison() {
		if dt.IsFloat() {
			return newTensor(out, mx.Bool, binaryGeneric(out, a.shape, b.shape, a.f32(), b.f32(), cmpF32(op)))
		}
		return newTensor(out, mx.Bool, binaryGeneric(out, a.shape, b.shape, a.i64(), b.i64(), cmpI64(op)))
	}
	if op == mx.OpDivide && !dt.IsFloat() {
		dt = mx.Float32
	}
	if dt == mx.Bool {
		dt = mx.Int32 // arithmetic on bools
	}
	if dt.IsFloat() {
		return fromF32(out, dt, binaryF32(op, out, a.shape, b.shape, a.f32(), b.f32(), f32Func(op), f32Rows(op)))
	}
	return fromI64(out, dt, binaryGeneric(out, a.shape, b.shape, a.i64(), b.i64(), i64Func(op)))
}

func unaryF32Func(op mx.UnaryOp) func(x float32) float32 {
	switch op {
	case mx.OpNegative:
		return func(x float32) float32 { return -x }
	case mx.OpExp:
		return func(x float32) float32 { return float32(math.Exp(float64(x))) }
	case mx.OpLog:
		return func(x float32) float32 { return float32(math.Log(float64(x))) }
	case mx.OpSqrt:
		return func(x float32) float32 { return float32(math.Sqrt(float64(x))) }
	case mx.OpRsqrt:
		return func(x float32) float32 { return float32(1 / math.Sqrt(float64(x))) }
	case mx.OpTanh:
		return tanhF32
	case mx.OpSigmoid:
		return func(x float32) float32 { return float32(1 / (1 + math.Exp(-float64(x)))) }
	case mx.OpAbs:
		return func(x float32) float32 { return float32(math.Abs(float64(x))) }
	case mx.OpSquare:
		return func(x float32) float32 { return x * x }
	case mx.OpSin:
		return func(x float32) float32 { return float32(math.Sin(float64(x))) }
	case mx.OpCos:
		return func(x float32) float32 { return float32(math.Cos(float64(x))) }
	case mx.OpFloor:
		return func(x float32) float32 { return float32(math.Floor(float64(x))) }
	case mx.OpErf:
		return func(x float32) float32 { return float32(math.Erf(float64(x))) }
	case mx.OpLog1p:
		return func(x float32) float32 { return float32(math.Log1p(float64(x))) }
	case mx.OpReciprocal:
		return func(x float32) float32 { return 1 / x }
	case mx.OpGELUTanh:
		return geluTanh
	case mx.OpSign:
		return func(x float32) float32 {
			switch {
			case x > 0:
				return 1
			case x < 0:
				return -1
			}
			return x
		}
	}
	return nil
}

func unaryKernel(op mx.UnaryOp, x *tensor) *tensor {
	switch op {
	case mx.OpLogicalNot:
		in := x.bools()
		out := make([]bool, len(in))
		for i, v := range in {
			out[i] = !v
		}
		return newTensor(x.shape, mx.Bool, out)
	case mx.OpIsNaN, mx.OpIsInf:
		out := make([]bool, x.size())
		if x.dt.IsFloat() {
			for i, v := range x.f32() {
				if op == mx.OpIsNaN {
					out[i] = v != v
				} else {
					out[i] = math.IsInf(float64(v), 0)
				}
			}
		}
		return newTensor(x.shape, mx.Bool, out)
	}
	if !x.dt.IsFloat() {
		switch op {
		case mx.OpNegative, mx.OpAbs, mx.OpSquare, mx.OpSign, mx.OpFloor:
			in := x.i64()
			for i, v := range in {
				switch op {
				case mx.OpNegative:
					in[i] = -v
				case mx.OpAbs:
					in[i] = max(v, -v)
				case mx.OpSquare:
					in[i] = v * v
				case mx.OpSign:
					in[i] = b2i(v > 0) - b2i(v < 0)
				}
			}
			dt := x.dt
			if dt == mx.Bool {
				dt = mx.Int32
			}
			return fromI64(x.shape, dt, in)
		}
		return unaryKernel(op, castTensor(x, mx.Float32))
	}
	fn := unaryF32Func(op)
	in := x.f32()
	out := uninit.Float32s(len(in))
	switch op {
	case mx.OpGELUTanh:
		parallelRows(len(in), func(lo, hi int) { geluRows(out[lo:hi], in[lo:hi]) })
		return fromF32(x.shape, x.dt, out)
	case mx.OpTanh:
		parallelRows(len(in), func(lo, hi int) { tanhRows(out[lo:hi], in[lo:hi]) })
		return fromF32(x.shape, x.dt, out)
	}
	cost := 8
	parallelFor(len(in), cost, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			out[i] = fn(in[i])
		}
	})
	return fromF32(x.shape, x.dt, out)
}

func whereKernel(c, a, b *tensor) *tensor {
	out, err := mx.BroadcastShapes(c.shape, a.shape, b.shape)
	if err != nil {
		panic(fmt.Sprintf("goeng: where: %v", err))
	}
	dt := mx.PromoteTypes(a.dt, b.dt)
	cond := c.bools()
	sc, sa, sb := broadcastStrides(c.shape, out), broadcastStrides(a.shape, out), broadcastStrides(b.shape, out)
	n := dims.Numel(out)
	pick := func(f func(i, ia, ib int)) {
		nd := len(out)
		parallelFor(n, 2, func(lo, hi int) {
			idx := make([]int, nd)
			rem := lo
			for d := nd - 1; d >= 0; d-- {
				idx[d] = rem % out[d]
				rem /= out[d]
			}
			for i := lo; i < hi; i++ {
				ic, ia, ib := 0, 0, 0
				for d := range nd {
					ic += idx[d] * sc[d]
					ia += idx[d] * sa[d]
					ib += idx[d] * sb[d]
				}
				if cond[ic] {
					f(i, ia, -1)
				} else {
					f(i, -1, ib)
				}
				for d := nd - 1; d >= 0; d-- {
					idx[d]++
					if idx[d] < out[d] {
						break
					}
					idx[d] = 0
				}
			}
		})
	}
	switch {
	case dt.IsFloat():
		av, bv := a.f32(), b.f32()
		res := make([]float32, n)
		pick(func(i, ia, ib int) {
			if ia >= 0 {
				res[i] = av[ia]
			} else {
				res[i] = bv[ib]
			}
		})
		return fromF32(out, dt, res)
	case dt == mx.Bool:
		av, bv := a.bools(), b.bools()
		res := make([]bool, n)
		pick(func(i, ia, ib int) {
			if ia >= 0 {
				res[i] = av[ia]
			} else {
				res[i] = bv[ib]
			}
		})
		return newTensor(out, dt, res)
	default:
		av, bv := a.i64(), b.i64()
		res := make([]int64, n)
		pick(func(i, ia, ib int) {
			if ia >= 0 {
				res[i] = av[ia]
			} else {
				res[i] = bv[ib]
			}
		})
		return fromI64(out, dt, res)
	}
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// f32Rows returns whole-row loops for the ops that dominate training (the residual
// stream, norms, GeGLU, gradient accumulation); nil for the rest.
func f32Rows(op mx.BinaryOp) func(dst, x, y []float32) {
	switch op {
	case mx.OpAdd:
		return func(dst, x, y []float32) {
			y = y[:len(dst)]
			x = x[:len(dst)]
			for i := range dst {
				dst[i] = x[i] + y[i]
			}
		}
	case mx.OpSubtract:
		return func(dst, x, y []float32) {
			y = y[:len(dst)]
			x = x[:len(dst)]
			for i := range dst {
				dst[i] = x[i] - y[i]
			}
		}
	case mx.OpMultiply:
		return func(dst, x, y []float32) {
			y = y[:len(dst)]
			x = x[:len(dst)]
			for i := range dst {
				dst[i] = x[i] * y[i]
			}
		}
	case mx.OpDivide:
		return func(dst, x, y []float32) {
			y = y[:len(dst)]
			x = x[:len(dst)]
			for i := range dst {
				dst[i] = x[i] / y[i]
			}
		}
	}
	return nil
}
