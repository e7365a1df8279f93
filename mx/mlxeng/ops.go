//go:build mlx

package mlxeng

// #include "mlx/c/mlx.h"
import "C"

import (
	"fmt"
	"math"

	"github.com/dgtune/dgtune/mx"
)

// astype returns a new handle of x cast to dt (a new reference even when the dtype
// already matches, so callers can free both).
func (e *Engine) astype(x *array, dt mx.DType) *array {
	return e.op("astype", func(res *C.mlx_array) C.int {
		return C.mlx_astype(res, x.c, toMLX(dt), e.streamFor(x.dt, dt))
	})
}

// cast returns x in dt and a function that frees the cast when one was made.
func (e *Engine) cast(x *array, dt mx.DType) (*array, func()) {
	if x.dt == dt {
		return x, func() {}
	}
	c := e.astype(x, dt)
	return c, func() { e.free(c) }
}

// fix casts a fresh result to the dtype the mx contract names, freeing the original.
func (e *Engine) fix(a *array, dt mx.DType) *array {
	if a.dt == dt {
		return a
	}
	out := e.astype(a, dt)
	e.free(a)
	return out
}

// AsType implements mx.Engine.
func (e *Engine) AsType(h mx.Handle, dt mx.DType) mx.Handle { return e.astype(get(h), dt) }

func (e *Engine) unaryC(op mx.UnaryOp, a C.mlx_array, res *C.mlx_array) C.int {
	s := e.stream
	switch op {
	case mx.OpNegative:
		return C.mlx_negative(res, a, s)
	case mx.OpExp:
		return C.mlx_exp(res, a, s)
	case mx.OpLog:
		return C.mlx_log(res, a, s)
	case mx.OpSqrt:
		return C.mlx_sqrt(res, a, s)
	case mx.OpRsqrt:
		return C.mlx_rsqrt(res, a, s)
	case mx.OpTanh:
		return C.mlx_tanh(res, a, s)
	case mx.OpSigmoid:
		return C.mlx_sigmoid(res, a, s)
	case mx.OpAbs:
		return C.mlx_abs(res, a, s)
	case mx.OpSquare:
		return C.mlx_square(res, a, s)
	case mx.OpSin:
		return C.mlx_sin(res, a, s)
	case mx.OpCos:
		return C.mlx_cos(res, a, s)
	case mx.OpLogicalNot:
		return C.mlx_logical_not(res, a, s)
	case mx.OpFloor:
		return C.mlx_floor(res, a, s)
	case mx.OpErf:
		return C.mlx_erf(res, a, s)
	case mx.OpLog1p:
		return C.mlx_log1p(res, a, s)
	case mx.OpReciprocal:
		return C.mlx_reciprocal(res, a, s)
	case mx.OpIsNaN:
		return C.mlx_isnan(res, a, s)
	case mx.OpIsInf:
		return C.mlx_isinf(res, a, s)
	case mx.OpSign:
		return C.mlx_sign(res, a, s)
	}
	panic(fmt.Sprintf("mlx: unknown unary op %d", int(op)))
}

// Unary implements mx.Engine. Integer inputs follow the go engine: sign-like ops keep
// the integer dtype (bool becomes int32), floor is the identity, and the
// transcendental ops compute in float32.
func (e *Engine) Unary(op mx.UnaryOp, h mx.Handle) mx.Handle {
	x := get(h)
	if !x.dt.IsFloat() {
		switch op {
		case mx.OpLogicalNot:
		case mx.OpIsNaN, mx.OpIsInf:
			return e.Full(x.shape, 0, mx.Bool)
		case mx.OpNegative, mx.OpAbs, mx.OpSquare, mx.OpSign, mx.OpFloor:
			dt := x.dt
			if dt == mx.Bool {
				dt = mx.Int32
			}
			if op == mx.OpFloor {
				return e.astype(x, dt)
			}
			xc, done := e.cast(x, dt)
			defer done()
			x = xc
		default:
			xc, done := e.cast(x, mx.Float32)
			defer done()
			x = xc
		}
	}
	if op == mx.OpGELUTanh {
		return e.geluTanh(x)
	}
	out := e.op(op.String(), func(res *C.mlx_array) C.int { return e.unaryC(op, x.c, res) })
	if op == mx.OpSign && x.dt.IsFloat() {
		// MLX's sign(NaN) is 0; NumPy's and the go engine's is NaN.
		defer e.free(out)
		nan := e.op("sign", func(res *C.mlx_array) C.int { return C.mlx_isnan(res, x.c, e.stream) })
		defer e.free(nan)
		return e.where(nan, x, out)
	}
	return out
}

// geluTanh composes 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))) from MLX ops in x's
// dtype, the scalars cast to it first, op for op as mx.GELUTanh did before it became
// one op: bf16 activations keep rounding after every op as in MLX Python, which the
// spec's bit-parity notes rely on (mlx-c has no fused GELU). MLX's own autodiff
// differentiates the composition.
func (e *Engine) geluTanh(x *array) *array {
	var tmp []*array
	defer func() {
		for _, a := range tmp {
			e.free(a)
		}
	}()
	keep := func(a *array) *array { tmp = append(tmp, a); return a }
	scalar := func(v float64) *array { return keep(e.scalar(v, x.dt)) }
	mul := func(a, b *array) *array { return keep(e.binary(mx.OpMultiply, a, b)) }
	add := func(a, b *array) *array { return keep(e.binary(mx.OpAdd, a, b)) }
	sq := keep(e.op("gelu_tanh", func(res *C.mlx_array) C.int { return C.mlx_square(res, x.c, e.stream) }))
	inner := mul(add(x, mul(mul(sq, x), scalar(0.044715))), scalar(math.Sqrt(2/math.Pi)))
	th := keep(e.op("gelu_tanh", func(res *C.mlx_array) C.int { return C.mlx_tanh(res, inner.c, e.stream) }))
	return e.binary(mx.OpMultiply, mul(x, scalar(0.5)), add(th, scalar(1)))
}

// GeGLU implements mx.Engine: through the engine's kernels on CUDA (geglu.go), else as
// geluTanh(gate)·up (MLX has no fused op; MLX's autodiff differentiates the composition).
func (e *Engine) GeGLU(hg, hu mx.Handle) mx.Handle {
	gate, up := get(hg), get(hu)
	if e.gegluThroughKernels(gate, up, false) {
		return e.gegluKernel([]mx.Handle{gate, up}, false)
	}
	g := e.geluTanh(gate)
	defer e.free(g)
	return e.binary(mx.OpMultiply, g, up)
}

func (e *Engine) binaryC(op mx.BinaryOp, a, b C.mlx_array, res *C.mlx_array) C.int {
	s := e.stream
	switch op {
	case mx.OpAdd:
		return C.mlx_add(res, a, b, s)
	case mx.OpSubtract:
		return C.mlx_subtract(res, a, b, s)
	case mx.OpMultiply:
		return C.mlx_multiply(res, a, b, s)
	case mx.OpDivide:
		return C.mlx_divide(res, a, b, s)
	case mx.OpMaximum:
		return C.mlx_maximum(res, a, b, s)
	case mx.OpMinimum:
		return C.mlx_minimum(res, a, b, s)
	case mx.OpPower:
		return C.mlx_power(res, a, b, s)
	case mx.OpEqual:
		return C.mlx_equal(res, a, b, s)
	case mx.OpNotEqual:
		return C.mlx_not_equal(res, a, b, s)
	case mx.OpLess:
		return C.mlx_less(res, a, b, s)
	case mx.OpLessEqual:
		return C.mlx_less_equal(res, a, b, s)
	case mx.OpGreater:
		return C.mlx_greater(res, a, b, s)
	case mx.OpGreaterEqual:
		return C.mlx_greater_equal(res, a, b, s)
	case mx.OpLogicalAnd:
		return C.mlx_logical_and(res, a, b, s)
	case mx.OpLogicalOr:
		return C.mlx_logical_or(res, a, b, s)
	case mx.OpRemainder:
		return C.mlx_remainder(res, a, b, s)
	case mx.OpFloorDivide:
		return C.mlx_floor_divide(res, a, b, s)
	}
	panic(fmt.Sprintf("mlx: unknown binary op %d", int(op)))
}

func (e *Engine) binary(op mx.BinaryOp, a, b *array) *array {
	return e.op(op.String(), func(res *C.mlx_array) C.int { return e.binaryC(op, a.c, b.c, res) })
}

// Binary implements mx.Engine. Arithmetic on two bools is int32 arithmetic; integer
// floor division floors (MLX's truncates toward zero); integer floor division and
// remainder by zero give 0 (C would trap). All three as on the go engine.
func (e *Engine) Binary(op mx.BinaryOp, ha, hb mx.Handle) mx.Handle {
	a, b := get(ha), get(hb)
	if op.IsComparison() {
		return e.binary(op, a, b)
	}
	dt := mx.PromoteTypes(a.dt, b.dt)
	if dt == mx.Bool {
		dt = mx.Int32
		ac, doneA := e.cast(a, dt)
		defer doneA()
		bc, doneB := e.cast(b, dt)
		defer doneB()
		a, b = ac, bc
	}
	if (op == mx.OpFloorDivide || op == mx.OpRemainder) && !dt.IsFloat() {
		zero := e.scalar(0, b.dt)
		defer e.free(zero)
		one := e.scalar(1, b.dt)
		defer e.free(one)
		isZero := e.binary(mx.OpEqual, b, zero)
		defer e.free(isZero)
		safe := e.where(isZero, one, b)
		defer e.free(safe)
		var q *array
		if op == mx.OpRemainder {
			q = e.binary(op, a, safe)
		} else {
			// MLX's remainder follows the divisor's sign (Python's rule), so a − r is an
			// exact multiple of b and the truncating division of it is the floor.
			r := e.binary(mx.OpRemainder, a, safe)
			defer e.free(r)
			d := e.binary(mx.OpSubtract, a, r)
			defer e.free(d)
			q = e.binary(op, d, safe)
		}
		defer e.free(q)
		z := e.scalar(0, q.dt)
		defer e.free(z)
		return e.where(isZero, z, q)
	}
	return e.binary(op, a, b)
}

func (e *Engine) where(c, a, b *array) *array {
	return e.op("where", func(res *C.mlx_array) C.int { return C.mlx_where(res, c.c, a.c, b.c, e.stream) })
}

// Where implements mx.Engine.
func (e *Engine) Where(hc, ha, hb mx.Handle) mx.Handle {
	return e.where(get(hc), get(ha), get(hb))
}

// Reshape implements mx.Engine.
func (e *Engine) Reshape(h mx.Handle, shape []int) mx.Handle {
	x := get(h)
	cs := cints(shape)
	return e.op("reshape", func(res *C.mlx_array) C.int {
		return C.mlx_reshape(res, x.c, ptr(cs), C.size_t(len(cs)), e.stream)
	})
}

func (e *Engine) reshape(x *array, shape []int) *array { return e.Reshape(x, shape).(*array) }

// Transpose implements mx.Engine.
func (e *Engine) Transpose(h mx.Handle, axes []int) mx.Handle {
	x := get(h)
	cs := cints(axes)
	return e.op("transpose", func(res *C.mlx_array) C.int {
		return C.mlx_transpose_axes(res, x.c, ptr(cs), C.size_t(len(cs)), e.stream)
	})
}

// BroadcastTo implements mx.Engine.
func (e *Engine) BroadcastTo(h mx.Handle, shape []int) mx.Handle {
	x := get(h)
	cs := cints(shape)
	return e.op("broadcast_to", func(res *C.mlx_array) C.int {
		return C.mlx_broadcast_to(res, x.c, ptr(cs), C.size_t(len(cs)), e.stream)
	})
}

// Slice implements mx.Engine.
func (e *Engine) Slice(h mx.Handle, start, stop, strides []int) mx.Handle {
	x := get(h)
	st, sp, sd := cints(start), cints(stop), cints(strides)
	return e.op("slice", func(res *C.mlx_array) C.int {
		return C.mlx_slice(res, x.c, ptr(st), C.size_t(len(st)), ptr(sp), C.size_t(len(sp)), ptr(sd), C.size_t(len(sd)), e.stream)
	})
}

// SliceUpdate implements mx.Engine; the update takes x's dtype.
func (e *Engine) SliceUpdate(h, hu mx.Handle, start, stop, strides []int) mx.Handle {
	x := get(h)
	u, done := e.cast(get(hu), x.dt)
	defer done()
	st, sp, sd := cints(start), cints(stop), cints(strides)
	return e.op("slice_update", func(res *C.mlx_array) C.int {
		return C.mlx_slice_update(res, x.c, u.c, ptr(st), C.size_t(len(st)), ptr(sp), C.size_t(len(sp)), ptr(sd), C.size_t(len(sd)), e.stream)
	})
}

// Split implements mx.Splitter with MLX's split: one op whose VJP concatenates the
// parts' cotangents, where slices' VJPs each write their cotangent into a zero-filled
// array and then sum them (on MLX-CUDA, fills, copies and an add for each).
func (e *Engine) Split(h mx.Handle, indices []int, axis int) []mx.Handle {
	x := get(h)
	idx := cints(indices)
	res := C.mlx_vector_array_new()
	defer C.mlx_vector_array_free(res)
	e.run("split", func() C.int {
		return C.mlx_split_sections(&res, x.c, ptr(idx), C.size_t(len(idx)), C.int(axis), e.stream)
	})
	return handles(e.unpack("split", res))
}

// Concatenate implements mx.Engine.
func (e *Engine) Concatenate(hs []mx.Handle, axis int) mx.Handle {
	v := vector(hs)
	defer C.mlx_vector_array_free(v)
	return e.op("concatenate", func(res *C.mlx_array) C.int {
		return C.mlx_concatenate_axis(res, v, C.int(axis), e.stream)
	})
}

// Reduce implements mx.Engine. Integer sums, products and extrema keep the input's
// integer dtype (bool becomes int32); logsumexp of integers is float32.
func (e *Engine) Reduce(op mx.ReduceOp, h mx.Handle, axes []int, keep bool) mx.Handle {
	x := get(h)
	want := x.dt
	switch op {
	case mx.ReduceAll, mx.ReduceAny:
		want = mx.Bool
	case mx.ReduceLogSumExp:
		if !x.dt.IsFloat() {
			want = mx.Float32
		}
	default:
		if x.dt == mx.Bool {
			want = mx.Int32
		}
	}
	if op != mx.ReduceAll && op != mx.ReduceAny {
		xc, done := e.cast(x, want)
		defer done()
		x = xc
	}
	cs := cints(axes)
	k := C.bool(keep)
	out := e.op(op.String(), func(res *C.mlx_array) C.int {
		p, n, s := ptr(cs), C.size_t(len(cs)), e.stream
		switch op {
		case mx.ReduceSum:
			return C.mlx_sum_axes(res, x.c, p, n, k, s)
		case mx.ReduceMax:
			return C.mlx_max_axes(res, x.c, p, n, k, s)
		case mx.ReduceMin:
			return C.mlx_min_axes(res, x.c, p, n, k, s)
		case mx.ReduceProd:
			return C.mlx_prod_axes(res, x.c, p, n, k, s)
		case mx.ReduceLogSumExp:
			return C.mlx_logsumexp_axes(res, x.c, p, n, k, s)
		case mx.ReduceAll:
			return C.mlx_all_axes(res, x.c, p, n, k, s)
		case mx.ReduceAny:
			return C.mlx_any_axes(res, x.c, p, n, k, s)
		}
		panic(fmt.Sprintf("mlx: unknown reduction %d", int(op)))
	})
	return e.fix(out, want)
}

// Argmax implements mx.Engine (int32 indices; MLX's are uint32).
func (e *Engine) Argmax(h mx.Handle, axis int, keep bool) mx.Handle {
	x := get(h)
	out := e.op("argmax", func(res *C.mlx_array) C.int {
		return C.mlx_argmax_axis(res, x.c, C.int(axis), C.bool(keep), e.stream)
	})
	return e.fix(out, mx.Int32)
}

// Argmin implements mx.Engine.
func (e *Engine) Argmin(h mx.Handle, axis int, keep bool) mx.Handle {
	x := get(h)
	out := e.op("argmin", func(res *C.mlx_array) C.int {
		return C.mlx_argmin_axis(res, x.c, C.int(axis), C.bool(keep), e.stream)
	})
	return e.fix(out, mx.Int32)
}

// Softmax implements mx.Engine with MLX's precise softmax (float32 accumulation).
func (e *Engine) Softmax(h mx.Handle, axis int) mx.Handle {
	x := get(h)
	if !x.dt.IsFloat() {
		xc, done := e.cast(x, mx.Float32)
		defer done()
		x = xc
	}
	ax := []C.int{C.int(axis)}
	return e.op("softmax", func(res *C.mlx_array) C.int {
		return C.mlx_softmax_axes(res, x.c, &ax[0], 1, true, e.stream)
	})
}

// scanInput gives bools to the scans as int32, as the go engine does.
func (e *Engine) scanInput(h mx.Handle) (*array, func()) {
	x := get(h)
	if x.dt == mx.Bool {
		return e.cast(x, mx.Int32)
	}
	return x, func() {}
}

// Cumsum implements mx.Engine.
func (e *Engine) Cumsum(h mx.Handle, axis int, reverse, inclusive bool) mx.Handle {
	x, done := e.scanInput(h)
	defer done()
	out := e.op("cumsum", func(res *C.mlx_array) C.int {
		return C.mlx_cumsum(res, x.c, C.int(axis), C.bool(reverse), C.bool(inclusive), e.stream)
	})
	return e.fix(out, x.dt)
}

// Cummax implements mx.Engine.
func (e *Engine) Cummax(h mx.Handle, axis int, reverse, inclusive bool) mx.Handle {
	x, done := e.scanInput(h)
	defer done()
	return e.op("cummax", func(res *C.mlx_array) C.int {
		return C.mlx_cummax(res, x.c, C.int(axis), C.bool(reverse), C.bool(inclusive), e.stream)
	})
}

// Argsort implements mx.Engine.
func (e *Engine) Argsort(h mx.Handle, axis int) mx.Handle {
	x := get(h)
	out := e.op("argsort", func(res *C.mlx_array) C.int {
		return C.mlx_argsort_axis(res, x.c, C.int(axis), e.stream)
	})
	return e.fix(out, mx.Int32)
}

// Argpartition implements mx.Engine.
func (e *Engine) Argpartition(h mx.Handle, kth, axis int) mx.Handle {
	x := get(h)
	out := e.op("argpartition", func(res *C.mlx_array) C.int {
		return C.mlx_argpartition_axis(res, x.c, C.int(kth), C.int(axis), e.stream)
	})
	return e.fix(out, mx.Int32)
}

// Matmul implements mx.Engine; integer operands multiply in float32.
func (e *Engine) Matmul(ha, hb mx.Handle) mx.Handle {
	a, b := get(ha), get(hb)
	if !mx.PromoteTypes(a.dt, b.dt).IsFloat() {
		ac, doneA := e.cast(a, mx.Float32)
		defer doneA()
		bc, doneB := e.cast(b, mx.Float32)
		defer doneB()
		a, b = ac, bc
	}
	return e.op("matmul", func(res *C.mlx_array) C.int { return C.mlx_matmul(res, a.c, b.c, e.stream) })
}

// AddMM implements mx.Engine with mlx.addmm.
func (e *Engine) AddMM(hc, ha, hb mx.Handle, alpha, beta float64) mx.Handle {
	c, a, b := get(hc), get(ha), get(hb)
	return e.op("addmm", func(res *C.mlx_array) C.int {
		return C.mlx_addmm(res, c.c, a.c, b.c, C.float(alpha), C.float(beta), e.stream)
	})
}

// Take implements mx.Engine.
func (e *Engine) Take(h, hi mx.Handle, axis int) mx.Handle {
	x, idx := get(h), get(hi)
	if e.takesRows(x, idx, axis) {
		return e.takeRows(x, idx)
	}
	return e.op("take", func(res *C.mlx_array) C.int {
		return C.mlx_take_axis(res, x.c, idx.c, C.int(axis), e.stream)
	})
}

// TakeAlongAxis implements mx.Engine.
func (e *Engine) TakeAlongAxis(h, hi mx.Handle, axis int) mx.Handle {
	x, idx := get(h), get(hi)
	return e.op("take_along_axis", func(res *C.mlx_array) C.int {
		return C.mlx_take_along_axis(res, x.c, idx.c, C.int(axis), e.stream)
	})
}

// StopGradient implements mx.Engine.
func (e *Engine) StopGradient(h mx.Handle) mx.Handle {
	x := get(h)
	return e.op("stop_gradient", func(res *C.mlx_array) C.int { return C.mlx_stop_gradient(res, x.c, e.stream) })
}
