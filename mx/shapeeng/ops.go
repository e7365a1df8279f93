package shapeeng

import (
	"fmt"
	"slices"

	"github.com/dgtune/dgtune/mx/internal/dims"

	"github.com/dgtune/dgtune/mx"
)

// The ops: each makes what goeng's op makes (output shape and dtype by goeng's rules, a
// view where goeng's is one) and records a node whose VJP makes goeng's cotangents.
// Cotangents are float32, as goeng computes them.

// Labels of backward allocations in the usage breakdown.
const labelBackward = "backward"

// unbroadcast sums g over the axes an input of shape was broadcast along (goeng's
// unbroadcast): g itself when the shapes agree, else a fresh array of shape.
func (e *Engine) unbroadcast(g *array, shape []int) *array {
	if slices.Equal(g.shape, shape) {
		return g
	}
	e.read(g)
	return e.fresh(shape, g.dt, labelBackward)
}

// elementwise is a fresh output of op over inputs, counting goeng's float32 views of
// half inputs and the float32 (or int64) values behind a result of another dtype.
func (e *Engine) elementwise(op string, shape []int, dt mx.DType, inputs ...*array) *array {
	e.read(inputs...)
	if dt.IsFloat() {
		e.asF32(op, inputs...)
	} else {
		for _, x := range inputs {
			if x != nil && x.dt != mx.Int64 && !x.dt.IsFloat() {
				e.temp(int64(x.size())*8, op)
			}
		}
	}
	e.convertTemp(shape, dt, op)
	return e.fresh(shape, dt, op)
}

// grad is a fresh float32 cotangent of x's shape, made by a VJP that reads reads.
func (e *Engine) grad(x *array, reads ...*array) *array {
	e.read(reads...)
	return e.fresh(x.shape, mx.Float32, labelBackward)
}

// unaryReadsOut are the unary ops whose derivative is a function of the output.
var unaryReadsOut = map[mx.UnaryOp]bool{mx.OpExp: true, mx.OpSqrt: true, mx.OpRsqrt: true, mx.OpTanh: true, mx.OpSigmoid: true, mx.OpReciprocal: true}

// Unary implements mx.Engine.
func (e *Engine) Unary(op mx.UnaryOp, hx mx.Handle) mx.Handle {
	e.tick()
	x := h(hx)
	switch op {
	case mx.OpLogicalNot, mx.OpIsNaN, mx.OpIsInf:
		return e.elementwise(op.String(), x.shape, mx.Bool, x)
	}
	if !x.dt.IsFloat() {
		switch op {
		case mx.OpNegative, mx.OpAbs, mx.OpSquare, mx.OpSign, mx.OpFloor:
			dt := x.dt
			if dt == mx.Bool {
				dt = mx.Int32
			}
			return e.elementwise(op.String(), x.shape, dt, x)
		}
		e.temp(int64(x.size())*4, op.String()) // cast to float32 first
		return e.elementwise(op.String(), x.shape, mx.Float32, x)
	}
	out := e.elementwise(op.String(), x.shape, x.dt, x)
	return e.record(out, op.String(), []*array{x}, func(g *array) []*array {
		switch op {
		case mx.OpFloor, mx.OpSign:
			return []*array{nil}
		case mx.OpNegative:
			return []*array{e.grad(x, g)}
		}
		if unaryReadsOut[op] {
			return []*array{e.grad(x, g, out)}
		}
		return []*array{e.grad(x, g, x)}
	})
}

// binaryDType is goeng's binaryKernel result dtype.
func binaryDType(op mx.BinaryOp, a, b mx.DType) mx.DType {
	if op.IsComparison() {
		return mx.Bool
	}
	dt := mx.PromoteTypes(a, b)
	if op == mx.OpDivide && !dt.IsFloat() {
		return mx.Float32
	}
	if dt == mx.Bool {
		return mx.Int32
	}
	return dt
}

func broadcast(shapes ...[]int) []int {
	out, err := mx.BroadcastShapes(shapes...)
	if err != nil {
		panic(fmt.Sprintf("shapeeng: %v", err))
	}
	return out
}

// Binary implements mx.Engine.
func (e *Engine) Binary(op mx.BinaryOp, ha, hb mx.Handle) mx.Handle {
	e.tick()
	a, b := h(ha), h(hb)
	shape := broadcast(a.shape, b.shape)
	out := e.elementwise(op.String(), shape, binaryDType(op, a.dt, b.dt), a, b)
	if !out.dt.IsFloat() || op == mx.OpFloorDivide {
		return out
	}
	// Each side only when its input is traced, as goeng's binaryVJP.
	side := func(x *array, f func() *array) *array {
		if x.node == nil {
			return nil
		}
		return e.unbroadcast(f(), x.shape)
	}
	// k is a fresh elementwise result of g's shape (kmul, kdiv, kneg, where).
	k := func(g *array, reads ...*array) *array {
		e.read(reads...)
		e.read(g)
		return e.fresh(g.shape, mx.Float32, labelBackward)
	}
	return e.record(out, op.String(), []*array{a, b}, func(g *array) []*array {
		var ga, gb *array
		switch op {
		case mx.OpAdd:
			ga, gb = side(a, func() *array { return g }), side(b, func() *array { return g })
		case mx.OpSubtract:
			ga, gb = side(a, func() *array { return g }), side(b, func() *array { return k(g) })
		case mx.OpMultiply:
			ga, gb = side(a, func() *array { return k(g, b) }), side(b, func() *array { return k(g, a) })
		case mx.OpDivide:
			ga = side(a, func() *array { return k(g, b) })
			gb = side(b, func() *array { k(g, out); k(g, b); return k(g) }) // −(g·out)/b
		case mx.OpMaximum, mx.OpMinimum:
			e.read(a, b)
			e.temp(int64(dims.Numel(shape)), op.String()) // the mask
			ga, gb = side(a, func() *array { return k(g) }), side(b, func() *array { return k(g) })
		case mx.OpPower:
			ga = side(a, func() *array { k(g, a, b); k(g); return k(g) })
			gb = side(b, func() *array { k(g, a); k(g, out); return k(g) })
		case mx.OpRemainder:
			ga = side(a, func() *array { return g })
			gb = side(b, func() *array { k(g, a, b); k(g); return k(g) })
		default:
			panic(fmt.Sprintf("shapeeng: no vjp for %s", op))
		}
		return []*array{ga, gb}
	})
}

// Where implements mx.Engine.
func (e *Engine) Where(hc, ha, hb mx.Handle) mx.Handle {
	e.tick()
	c, a, b := h(hc), h(ha), h(hb)
	shape := broadcast(c.shape, a.shape, b.shape)
	out := e.elementwise("where", shape, mx.PromoteTypes(a.dt, b.dt), c, a, b)
	if !out.dt.IsFloat() {
		return out
	}
	return e.record(out, "where", []*array{c, a, b}, func(g *array) []*array {
		res := []*array{nil, nil, nil}
		for i, x := range []*array{a, b} {
			if x.node != nil {
				e.read(c, g)
				res[i+1] = e.unbroadcast(e.fresh(g.shape, g.dt, labelBackward), x.shape)
			}
		}
		return res
	})
}

// AsType implements mx.Engine (mx calls it only for another dtype).
func (e *Engine) AsType(hx mx.Handle, dt mx.DType) mx.Handle {
	e.tick()
	x := h(hx)
	if x.dt == dt {
		return x
	}
	e.read(x)
	e.asF32("astype", x)
	out := e.fresh(x.shape, dt, "astype")
	if !x.dt.IsFloat() || !dt.IsFloat() {
		return out
	}
	return e.record(out, "astype", []*array{x}, func(g *array) []*array {
		if g.dt == x.dt {
			return []*array{g}
		}
		e.read(g)
		return []*array{e.fresh(x.shape, x.dt, labelBackward)}
	})
}

// Reshape implements mx.Engine: a view (of a pending swap's elements, made first).
func (e *Engine) Reshape(hx mx.Handle, shape []int) mx.Handle {
	e.tick()
	x := h(hx)
	e.use(x)
	out := e.reshaped(x, shape)
	return e.record(out, "reshape", []*array{x}, func(g *array) []*array {
		e.use(g)
		return []*array{e.reshaped(g, x.shape)}
	})
}

// transpose is goeng's transposeKernel: a view for the identity and for a swap of the
// last two axes (pending until read), a fresh copy otherwise.
func (e *Engine) transpose(x *array, axes []int) *array {
	e.use(x)
	identity := true
	for i, a := range axes {
		identity = identity && a == i
	}
	if identity {
		return e.alias(x)
	}
	nd := len(axes)
	shape := make([]int, nd)
	for i, a := range axes {
		shape[i] = x.shape[a]
	}
	if nd >= 2 && axes[nd-2] == nd-1 && axes[nd-1] == nd-2 && dims.IsIdentity(axes[:nd-2]) {
		if x.sv != nil {
			return e.alias(x.sv.src) // swapped twice
		}
		v := e.newArray(shape, x.dt, nil)
		v.sv = &swapView{src: x}
		e.hold(v, x)
		return v
	}
	e.read(x)
	return e.fresh(shape, x.dt, "transpose")
}

// Transpose implements mx.Engine.
func (e *Engine) Transpose(hx mx.Handle, axes []int) mx.Handle {
	e.tick()
	x := h(hx)
	inv := make([]int, len(axes))
	for i, p := range axes {
		inv[p] = i
	}
	return e.record(e.transpose(x, axes), "transpose", []*array{x}, func(g *array) []*array {
		return []*array{e.transpose(g, inv)}
	})
}

// BroadcastTo implements mx.Engine.
func (e *Engine) BroadcastTo(hx mx.Handle, shape []int) mx.Handle {
	e.tick()
	x := h(hx)
	out := x
	if !slices.Equal(x.shape, shape) {
		e.read(x)
		out = e.fresh(shape, x.dt, "broadcast_to")
	}
	return e.record(out, "broadcast_to", []*array{x}, func(g *array) []*array {
		return []*array{e.unbroadcast(g, x.shape)}
	})
}

// Slice implements mx.Engine: a copy; its adjoint is g written into zeros of x's shape.
func (e *Engine) Slice(hx mx.Handle, start, stop, step []int) mx.Handle {
	e.tick()
	x := h(hx)
	e.read(x)
	out := e.fresh(dims.Slice(start, stop, step), x.dt, "slice")
	return e.record(out, "slice", []*array{x}, func(g *array) []*array {
		e.asF32(labelBackward, g)
		return []*array{e.grad(x, g)}
	})
}

// SliceUpdate implements mx.Engine.
func (e *Engine) SliceUpdate(hx, hu mx.Handle, start, stop, step []int) mx.Handle {
	e.tick()
	x, u := h(hx), h(hu)
	e.read(x, u)
	if u.dt != x.dt {
		e.temp(int64(u.size())*int64(x.dt.Size()), "slice_update")
	}
	out := e.fresh(x.shape, x.dt, "slice_update")
	return e.record(out, "slice_update", []*array{x, u}, func(g *array) []*array {
		e.asF32(labelBackward, g)
		e.temp(int64(u.size())*4, labelBackward) // the zeros written over the region
		return []*array{e.grad(x, g), e.grad(u, g)}
	})
}

// Concatenate implements mx.Engine.
func (e *Engine) Concatenate(hs []mx.Handle, axis int) mx.Handle {
	e.tick()
	xs := make([]*array, len(hs))
	for i, x := range hs {
		xs[i] = h(x)
	}
	shape := slices.Clone(xs[0].shape)
	shape[axis] = 0
	for _, x := range xs {
		shape[axis] += x.shape[axis]
	}
	e.read(xs...)
	out := e.fresh(shape, xs[0].dt, "concatenate")
	return e.record(out, "concatenate", xs, func(g *array) []*array {
		res := make([]*array, len(xs))
		for i, x := range xs {
			e.read(g)
			res[i] = e.fresh(x.shape, g.dt, labelBackward)
		}
		return res
	})
}

// rowsTemp counts the copy goeng's toRows makes when the reduced axes are not already
// last (sums over middle axes run in place).
func (e *Engine) rowsTemp(op mx.ReduceOp, x *array, axes []int, label string) {
	nd := len(x.shape)
	if op == mx.ReduceSum && x.dt.IsFloat() && len(axes) > 0 && axes[len(axes)-1] < nd-1 && dims.Contiguous(axes) {
		return
	}
	for i, a := range axes {
		if a != nd-len(axes)+i {
			e.temp(x.bytes(), label)
			return
		}
	}
}

// Reduce implements mx.Engine.
func (e *Engine) Reduce(op mx.ReduceOp, hx mx.Handle, axes []int, keep bool) mx.Handle {
	e.tick()
	x := h(hx)
	shape := dims.Reduced(x.shape, axes, keep)
	kept := dims.Reduced(x.shape, axes, true)
	e.rowsTemp(op, x, axes, op.String())
	var dt mx.DType
	switch {
	case op == mx.ReduceAll || op == mx.ReduceAny:
		dt = mx.Bool
	case !x.dt.IsFloat() && op != mx.ReduceLogSumExp:
		dt = x.dt
		if dt == mx.Bool {
			dt = mx.Int32
		}
	default:
		dt = x.dt
		if !dt.IsFloat() {
			dt = mx.Float32
		}
	}
	out := e.elementwise(op.String(), shape, dt, x)
	if !out.dt.IsFloat() {
		return out
	}
	return e.record(out, op.String(), []*array{x}, func(g *array) []*array {
		// back(t) is t reshaped to the kept shape and broadcast to x's: a copy unless
		// nothing was reduced.
		back := func(t *array) *array {
			e.use(t)
			if dims.Numel(kept) == x.size() {
				return e.reshaped(t, x.shape)
			}
			e.read(t)
			return e.fresh(x.shape, t.dt, labelBackward)
		}
		switch op {
		case mx.ReduceSum:
			return []*array{back(g)}
		case mx.ReduceMax, mx.ReduceMin:
			e.read(x, out, g)
			e.temp(int64(x.size())*5, labelBackward) // the mask and its float32 copy
			return []*array{e.fresh(x.shape, mx.Float32, labelBackward)}
		case mx.ReduceProd:
			e.read(x, out, g)
			e.temp(3*int64(x.size())*4, labelBackward)
			return []*array{e.fresh(x.shape, mx.Float32, labelBackward)}
		case mx.ReduceLogSumExp:
			// One pass over float32 rows reduced along the last axis (lseRowGrad); the
			// composition's two temporaries otherwise.
			if !(len(axes) == 1 && axes[0] == len(x.shape)-1 && x.dt == mx.Float32 && x.sv == nil) {
				e.temp(2*int64(x.size())*4, labelBackward)
			}
			return []*array{e.grad(x, x, out, g)}
		}
		panic(fmt.Sprintf("shapeeng: no vjp for %s", op))
	})
}

// argResult is the int32 result of an op that records no node (argmax, argsort).
func (e *Engine) argResult(op string, x *array, shape []int) *array {
	e.tick()
	e.read(x)
	e.asF32(op, x)
	return e.fresh(shape, mx.Int32, op)
}

// Argmax implements mx.Engine.
func (e *Engine) Argmax(hx mx.Handle, axis int, keep bool) mx.Handle {
	x := h(hx)
	return e.argResult("argmax", x, dims.Reduced(x.shape, []int{axis}, keep))
}

// Argmin implements mx.Engine.
func (e *Engine) Argmin(hx mx.Handle, axis int, keep bool) mx.Handle {
	x := h(hx)
	return e.argResult("argmin", x, dims.Reduced(x.shape, []int{axis}, keep))
}

// Argsort implements mx.Engine.
func (e *Engine) Argsort(hx mx.Handle, axis int) mx.Handle {
	x := h(hx)
	return e.argResult("argsort", x, x.shape)
}

// Argpartition implements mx.Engine.
func (e *Engine) Argpartition(hx mx.Handle, kth, axis int) mx.Handle {
	x := h(hx)
	return e.argResult("argpartition", x, x.shape)
}

// moveTemp counts the copy goeng makes to move axis last (and back).
func (e *Engine) moveTemp(x *array, axis int, label string) {
	if axis != len(x.shape)-1 {
		e.temp(2*x.bytes(), label)
	}
}

// Softmax implements mx.Engine; its VJP is s ⊙ (g − Σ g⊙s) with two temporaries.
func (e *Engine) Softmax(hx mx.Handle, axis int) mx.Handle {
	e.tick()
	x := h(hx)
	e.moveTemp(x, axis, "softmax")
	dt := x.dt
	if !dt.IsFloat() {
		dt = mx.Float32
	}
	out := e.elementwise("softmax", x.shape, dt, x)
	return e.record(out, "softmax", []*array{x}, func(g *array) []*array {
		e.temp(2*int64(x.size())*4, labelBackward)
		return []*array{e.grad(x, out, g)}
	})
}

// scan is cumsum and cummax.
func (e *Engine) scan(op string, x *array, axis int) *array {
	e.tick()
	e.moveTemp(x, axis, op)
	return e.elementwise(op, x.shape, x.dt, x)
}

// Cumsum implements mx.Engine.
func (e *Engine) Cumsum(hx mx.Handle, axis int, reverse, inclusive bool) mx.Handle {
	x := h(hx)
	out := e.scan("cumsum", x, axis)
	if !out.dt.IsFloat() {
		return out
	}
	return e.record(out, "cumsum", []*array{x}, func(g *array) []*array {
		e.moveTemp(g, axis, labelBackward)
		return []*array{e.grad(x, g)}
	})
}

// Cummax implements mx.Engine (no VJP, as in goeng).
func (e *Engine) Cummax(hx mx.Handle, axis int, reverse, inclusive bool) mx.Handle {
	x := h(hx)
	return e.record(e.scan("cummax", x, axis), "cummax", []*array{x}, nil)
}
