package mx

import (
	"fmt"
	"slices"
)

// BroadcastShapes returns the NumPy broadcast of the shapes, or an error.
func BroadcastShapes(shapes ...[]int) ([]int, error) {
	nd := 0
	for _, s := range shapes {
		nd = max(nd, len(s))
	}
	out := make([]int, nd)
	for i := range out {
		out[i] = 1
	}
	for _, s := range shapes {
		off := nd - len(s)
		for i, d := range s {
			switch {
			case out[off+i] == d || d == 1:
			case out[off+i] == 1:
				out[off+i] = d
			default:
				return nil, fmt.Errorf("shapes %v do not broadcast", shapes)
			}
		}
	}
	return out, nil
}

func sameEngine(op string, arrays ...*Array) Engine {
	e := arrays[0].e
	for _, a := range arrays[1:] {
		if a.e != e {
			panic(fmt.Sprintf("mx: %s: arrays from engines %s and %s", op, e.Name(), a.e.Name()))
		}
	}
	return e
}

func normAxis(op string, axis, ndim int) int {
	if axis < 0 {
		axis += ndim
	}
	if axis < 0 || axis >= ndim {
		panic(fmt.Sprintf("mx: %s: axis out of range for %d dimensions", op, ndim))
	}
	return axis
}

func normAxes(op string, axes []int, ndim int) []int {
	if axes == nil {
		out := make([]int, ndim)
		for i := range out {
			out[i] = i
		}
		return out
	}
	out := make([]int, len(axes))
	for i, a := range axes {
		out[i] = normAxis(op, a, ndim)
	}
	slices.Sort(out)
	if len(slices.Compact(slices.Clone(out))) != len(out) {
		panic(fmt.Sprintf("mx: %s: repeated axis in %v", op, axes))
	}
	return out
}

func unary(op UnaryOp, x *Array) *Array { return Wrap(x.e, x.e.Unary(op, x.h)) }

func binaryOp(op BinaryOp, a, b *Array) *Array {
	e := sameEngine(op.String(), a, b)
	if _, err := BroadcastShapes(a.Shape(), b.Shape()); err != nil {
		panic(fmt.Sprintf("mx: %s: %v", op, err))
	}
	return Wrap(e, e.Binary(op, a.h, b.h))
}

// Elementwise ops of one argument.
func Negative(x *Array) *Array   { return unary(OpNegative, x) }
func Exp(x *Array) *Array        { return unary(OpExp, x) }
func Log(x *Array) *Array        { return unary(OpLog, x) }
func Sqrt(x *Array) *Array       { return unary(OpSqrt, x) }
func Rsqrt(x *Array) *Array      { return unary(OpRsqrt, x) }
func Tanh(x *Array) *Array       { return unary(OpTanh, x) }
func Sigmoid(x *Array) *Array    { return unary(OpSigmoid, x) }
func Abs(x *Array) *Array        { return unary(OpAbs, x) }
func Square(x *Array) *Array     { return unary(OpSquare, x) }
func Sin(x *Array) *Array        { return unary(OpSin, x) }
func Cos(x *Array) *Array        { return unary(OpCos, x) }
func LogicalNot(x *Array) *Array { return unary(OpLogicalNot, x) }
func Floor(x *Array) *Array      { return unary(OpFloor, x) }
func Erf(x *Array) *Array        { return unary(OpErf, x) }
func Log1p(x *Array) *Array      { return unary(OpLog1p, x) }
func Reciprocal(x *Array) *Array { return unary(OpReciprocal, x) }
func IsNaN(x *Array) *Array      { return unary(OpIsNaN, x) }
func IsInf(x *Array) *Array      { return unary(OpIsInf, x) }
func Sign(x *Array) *Array       { return unary(OpSign, x) }

// Elementwise ops of two broadcast arguments.
func Add(a, b *Array) *Array          { return binaryOp(OpAdd, a, b) }
func Subtract(a, b *Array) *Array     { return binaryOp(OpSubtract, a, b) }
func Multiply(a, b *Array) *Array     { return binaryOp(OpMultiply, a, b) }
func Divide(a, b *Array) *Array       { return binaryOp(OpDivide, a, b) }
func Maximum(a, b *Array) *Array      { return binaryOp(OpMaximum, a, b) }
func Minimum(a, b *Array) *Array      { return binaryOp(OpMinimum, a, b) }
func Power(a, b *Array) *Array        { return binaryOp(OpPower, a, b) }
func Equal(a, b *Array) *Array        { return binaryOp(OpEqual, a, b) }
func NotEqual(a, b *Array) *Array     { return binaryOp(OpNotEqual, a, b) }
func Less(a, b *Array) *Array         { return binaryOp(OpLess, a, b) }
func LessEqual(a, b *Array) *Array    { return binaryOp(OpLessEqual, a, b) }
func Greater(a, b *Array) *Array      { return binaryOp(OpGreater, a, b) }
func GreaterEqual(a, b *Array) *Array { return binaryOp(OpGreaterEqual, a, b) }
func LogicalAnd(a, b *Array) *Array   { return binaryOp(OpLogicalAnd, a, b) }
func LogicalOr(a, b *Array) *Array    { return binaryOp(OpLogicalOr, a, b) }
func Remainder(a, b *Array) *Array    { return binaryOp(OpRemainder, a, b) }
func FloorDivide(a, b *Array) *Array  { return binaryOp(OpFloorDivide, a, b) }

// scalarLike makes a 0-d array of v in a's dtype, as MLX does for Python scalars.
func scalarLike(a *Array, v float64) *Array { return Scalar(a.e, v, a.DType()) }

// AddScalar, MulScalar, ... apply a Python-style scalar, cast to a's dtype first
// (MLX semantics: a bfloat16 array times 53.066 multiplies by bfloat16(53.066)).
func AddScalar(a *Array, v float64) *Array { return Add(a, scalarLike(a, v)) }
func MulScalar(a *Array, v float64) *Array { return Multiply(a, scalarLike(a, v)) }
func DivScalar(a *Array, v float64) *Array { return Divide(a, scalarLike(a, v)) }

// Where picks a where cond is true, else b (all three broadcast).
func Where(cond, a, b *Array) *Array {
	e := sameEngine("where", cond, a, b)
	if _, err := BroadcastShapes(cond.Shape(), a.Shape(), b.Shape()); err != nil {
		panic(fmt.Sprintf("mx: where: %v", err))
	}
	return Wrap(e, e.Where(cond.h, a.h, b.h))
}

// AsType casts to dt (returns x itself when the dtype already matches).
func AsType(x *Array, dt DType) *Array {
	if x.DType() == dt {
		return x
	}
	return Wrap(x.e, x.e.AsType(x.h, dt))
}

// Reshape changes the shape; one dimension may be -1.
func Reshape(x *Array, shape ...int) *Array {
	n := x.Size()
	infer, known := -1, 1
	for i, d := range shape {
		if d == -1 {
			if infer >= 0 {
				panic(fmt.Sprintf("mx: reshape: two -1 in %v", shape))
			}
			infer = i
		} else {
			known *= d
		}
	}
	s := slices.Clone(shape)
	if infer >= 0 {
		if known == 0 || n%known != 0 {
			panic(fmt.Sprintf("mx: reshape: cannot reshape %v to %v", x.Shape(), shape))
		}
		s[infer] = n / known
	}
	if prod(s) != n {
		panic(fmt.Sprintf("mx: reshape: cannot reshape %v to %v", x.Shape(), shape))
	}
	return Wrap(x.e, x.e.Reshape(x.h, s))
}

// Flatten reshapes to one dimension.
func Flatten(x *Array) *Array { return Reshape(x, -1) }

// Transpose permutes the axes (reverse order when axes is empty).
func Transpose(x *Array, axes ...int) *Array {
	nd := x.Ndim()
	if len(axes) == 0 {
		axes = make([]int, nd)
		for i := range axes {
			axes[i] = nd - 1 - i
		}
	}
	if len(axes) != nd {
		panic(fmt.Sprintf("mx: transpose: axes %v for shape %v", axes, x.Shape()))
	}
	p := make([]int, nd)
	seen := make([]bool, nd)
	for i, a := range axes {
		a = normAxis("transpose", a, nd)
		if seen[a] {
			panic(fmt.Sprintf("mx: transpose: repeated axis in %v", axes))
		}
		seen[a] = true
		p[i] = a
	}
	return Wrap(x.e, x.e.Transpose(x.h, p))
}

// SwapAxes swaps two axes.
func SwapAxes(x *Array, a, b int) *Array {
	nd := x.Ndim()
	p := make([]int, nd)
	for i := range p {
		p[i] = i
	}
	a, b = normAxis("swapaxes", a, nd), normAxis("swapaxes", b, nd)
	p[a], p[b] = p[b], p[a]
	return Transpose(x, p...)
}

// ExpandDims inserts a size-1 axis at position axis.
func ExpandDims(x *Array, axis int) *Array {
	s := x.Shape()
	axis = normAxis("expand_dims", axis, len(s)+1)
	return Reshape(x, slices.Insert(s, axis, 1)...)
}

// Squeeze removes the given size-1 axes (all size-1 axes when none are given).
func Squeeze(x *Array, axes ...int) *Array {
	s := x.Shape()
	drop := make([]bool, len(s))
	if len(axes) == 0 {
		for i, d := range s {
			drop[i] = d == 1
		}
	}
	for _, a := range axes {
		a = normAxis("squeeze", a, len(s))
		if s[a] != 1 {
			panic(fmt.Sprintf("mx: squeeze: axis %d of %v is not 1", a, s))
		}
		drop[a] = true
	}
	var out []int
	for i, d := range s {
		if !drop[i] {
			out = append(out, d)
		}
	}
	return Reshape(x, out...)
}

// BroadcastTo broadcasts x to shape.
func BroadcastTo(x *Array, shape ...int) *Array {
	got, err := BroadcastShapes(x.Shape(), shape)
	if err != nil || !slices.Equal(got, shape) {
		panic(fmt.Sprintf("mx: broadcast_to: %v cannot broadcast to %v", x.Shape(), shape))
	}
	if slices.Equal(x.Shape(), shape) {
		return x
	}
	return Wrap(x.e, x.e.BroadcastTo(x.h, slices.Clone(shape)))
}

// sliceArgs normalises start/stop (negative counts from the end, clamped) for strides > 0.
func sliceArgs(op string, shape, start, stop, strides []int) ([]int, []int, []int) {
	nd := len(shape)
	if len(start) != nd || len(stop) != nd || (strides != nil && len(strides) != nd) {
		panic(fmt.Sprintf("mx: %s: start %v stop %v strides %v for shape %v", op, start, stop, strides, shape))
	}
	st, sp, sd := make([]int, nd), make([]int, nd), make([]int, nd)
	for i := range nd {
		d := shape[i]
		s, e := start[i], stop[i]
		if s < 0 {
			s += d
		}
		if e < 0 {
			e += d
		}
		s, e = min(max(s, 0), d), min(max(e, 0), d)
		if e < s {
			e = s
		}
		st[i], sp[i] = s, e
		sd[i] = 1
		if strides != nil {
			if strides[i] <= 0 {
				panic(fmt.Sprintf("mx: %s: stride %d must be positive", op, strides[i]))
			}
			sd[i] = strides[i]
		}
	}
	return st, sp, sd
}

// Slice returns x[start:stop:strides] (strides nil = 1).
func Slice(x *Array, start, stop, strides []int) *Array {
	st, sp, sd := sliceArgs("slice", x.Shape(), start, stop, strides)
	return Wrap(x.e, x.e.Slice(x.h, st, sp, sd))
}

// SliceAxis returns x[..., lo:hi, ...] along one axis.
func SliceAxis(x *Array, axis, lo, hi int) *Array {
	s := x.Shape()
	axis = normAxis("slice", axis, len(s))
	start := make([]int, len(s))
	stop := slices.Clone(s)
	start[axis], stop[axis] = lo, hi
	return Slice(x, start, stop, nil)
}

// SliceUpdate returns x with x[start:stop:strides] replaced by update.
func SliceUpdate(x, update *Array, start, stop, strides []int) *Array {
	e := sameEngine("slice_update", x, update)
	st, sp, sd := sliceArgs("slice_update", x.Shape(), start, stop, strides)
	want := make([]int, len(st))
	for i := range st {
		want[i] = (sp[i] - st[i] + sd[i] - 1) / sd[i]
	}
	if !slices.Equal(update.Shape(), want) {
		panic(fmt.Sprintf("mx: slice_update: update %v for region %v", update.Shape(), want))
	}
	return Wrap(e, e.SliceUpdate(x.h, update.h, st, sp, sd))
}

// Concatenate joins arrays along axis.
func Concatenate(xs []*Array, axis int) *Array {
	if len(xs) == 0 {
		panic("mx: concatenate: no arrays")
	}
	e := sameEngine("concatenate", xs...)
	s0 := xs[0].Shape()
	axis = normAxis("concatenate", axis, len(s0))
	hs := make([]Handle, len(xs))
	for i, x := range xs {
		s := x.Shape()
		if len(s) != len(s0) {
			panic(fmt.Sprintf("mx: concatenate: shapes %s", shapeString(xs...)))
		}
		for j := range s {
			if j != axis && s[j] != s0[j] {
				panic(fmt.Sprintf("mx: concatenate: shapes %s", shapeString(xs...)))
			}
		}
		if x.DType() != xs[0].DType() {
			panic(fmt.Sprintf("mx: concatenate: dtypes %s and %s", xs[0].DType(), x.DType()))
		}
		hs[i] = x.h
	}
	if len(xs) == 1 {
		return xs[0]
	}
	return Wrap(e, e.Concatenate(hs, axis))
}

// Splitter is the optional capability of an engine that cuts an array into consecutive
// parts as one op, whose VJP joins the parts' cotangents (MLX's split: its VJP is one
// concatenate, where each slice's is a zero-filled array with the slice written into it,
// and the parts' then summed).
type Splitter interface {
	Split(x Handle, indices []int, axis int) []Handle
}

// Split cuts x along axis at the given indices (like numpy.split with indices, which
// must be non-decreasing within the axis), as one op on an engine that has it
// (Splitter); elsewhere as slices. Both give the same values.
func Split(x *Array, indices []int, axis int) []*Array {
	axis = normAxis("split", axis, x.Ndim())
	d := x.Dim(axis)
	bounds := append(append([]int{0}, indices...), d)
	for i := 0; i+1 < len(bounds); i++ {
		if bounds[i] < 0 || bounds[i] > bounds[i+1] || bounds[i+1] > d {
			panic(fmt.Sprintf("mx: split: indices %v for axis %d of size %d", indices, axis, d))
		}
	}
	if s, ok := x.e.(Splitter); ok {
		hs := s.Split(x.h, indices, axis)
		out := make([]*Array, len(hs))
		for i, h := range hs {
			out[i] = Wrap(x.e, h)
		}
		return out
	}
	out := make([]*Array, 0, len(bounds)-1)
	for i := 0; i+1 < len(bounds); i++ {
		out = append(out, SliceAxis(x, axis, bounds[i], bounds[i+1]))
	}
	return out
}

// SplitEqual cuts x into n equal parts along axis.
func SplitEqual(x *Array, n, axis int) []*Array {
	d := x.Dim(axis)
	if n <= 0 || d%n != 0 {
		panic(fmt.Sprintf("mx: split: %d parts of axis size %d", n, d))
	}
	idx := make([]int, n-1)
	for i := range idx {
		idx[i] = (i + 1) * d / n
	}
	return Split(x, idx, axis)
}

func reduce(op ReduceOp, x *Array, keepDims bool, axes []int) *Array {
	ax := normAxes(op.String(), axes, x.Ndim())
	return Wrap(x.e, x.e.Reduce(op, x.h, ax, keepDims))
}

// Reductions over the given axes (all axes when none are given).
func Sum(x *Array, keepDims bool, axes ...int) *Array {
	return reduce(ReduceSum, x, keepDims, nilIfEmpty(axes))
}
func Max(x *Array, keepDims bool, axes ...int) *Array {
	return reduce(ReduceMax, x, keepDims, nilIfEmpty(axes))
}
func Min(x *Array, keepDims bool, axes ...int) *Array {
	return reduce(ReduceMin, x, keepDims, nilIfEmpty(axes))
}
func Prod(x *Array, keepDims bool, axes ...int) *Array {
	return reduce(ReduceProd, x, keepDims, nilIfEmpty(axes))
}
func All(x *Array, keepDims bool, axes ...int) *Array {
	return reduce(ReduceAll, x, keepDims, nilIfEmpty(axes))
}
func Any(x *Array, keepDims bool, axes ...int) *Array {
	return reduce(ReduceAny, x, keepDims, nilIfEmpty(axes))
}

// LogSumExp is log(sum(exp(x))) computed stably.
func LogSumExp(x *Array, keepDims bool, axes ...int) *Array {
	return reduce(ReduceLogSumExp, x, keepDims, nilIfEmpty(axes))
}

// Mean averages over the given axes (all when none).
func Mean(x *Array, keepDims bool, axes ...int) *Array {
	ax := normAxes("mean", nilIfEmpty(axes), x.Ndim())
	n := 1
	s := x.Shape()
	for _, a := range ax {
		n *= s[a]
	}
	sum := Wrap(x.e, x.e.Reduce(ReduceSum, x.h, ax, keepDims))
	return DivScalar(sum, float64(n))
}

func nilIfEmpty(a []int) []int {
	if len(a) == 0 {
		return nil
	}
	return a
}

// Argmax returns int32 indices of the maximum along axis (first on ties).
func Argmax(x *Array, axis int, keepDims bool) *Array {
	axis = normAxis("argmax", axis, x.Ndim())
	return Wrap(x.e, x.e.Argmax(x.h, axis, keepDims))
}

// Argmin returns int32 indices of the minimum along axis (first on ties).
func Argmin(x *Array, axis int, keepDims bool) *Array {
	axis = normAxis("argmin", axis, x.Ndim())
	return Wrap(x.e, x.e.Argmin(x.h, axis, keepDims))
}

// Softmax along axis, computed in float32 even for half inputs ("precise").
func Softmax(x *Array, axis int) *Array {
	axis = normAxis("softmax", axis, x.Ndim())
	return Wrap(x.e, x.e.Softmax(x.h, axis))
}

// Cumsum is the cumulative sum along axis.
func Cumsum(x *Array, axis int, reverse, inclusive bool) *Array {
	axis = normAxis("cumsum", axis, x.Ndim())
	return Wrap(x.e, x.e.Cumsum(x.h, axis, reverse, inclusive))
}

// Cummax is the cumulative maximum along axis.
func Cummax(x *Array, axis int, reverse, inclusive bool) *Array {
	axis = normAxis("cummax", axis, x.Ndim())
	return Wrap(x.e, x.e.Cummax(x.h, axis, reverse, inclusive))
}

// Argsort returns the int32 indices that sort x ascending along axis (stable).
func Argsort(x *Array, axis int) *Array {
	axis = normAxis("argsort", axis, x.Ndim())
	return Wrap(x.e, x.e.Argsort(x.h, axis))
}

// Argpartition returns int32 indices such that the element at kth is in sorted
// position, smaller ones before it and larger ones after (order otherwise unspecified).
func Argpartition(x *Array, kth, axis int) *Array {
	axis = normAxis("argpartition", axis, x.Ndim())
	d := x.Dim(axis)
	if kth < 0 {
		kth += d
	}
	if kth < 0 || kth >= d {
		panic(fmt.Sprintf("mx: argpartition: kth %d for axis of size %d", kth, d))
	}
	return Wrap(x.e, x.e.Argpartition(x.h, kth, axis))
}

// TopK returns the k largest values along the last axis (unordered, as MLX).
func TopK(x *Array, k int) *Array {
	d := x.Dim(-1)
	idx := SliceAxis(Argpartition(x, d-k, -1), -1, d-k, d)
	return TakeAlongAxis(x, idx, -1)
}

// Matmul multiplies the last two axes with NumPy broadcasting of the rest.
// 1-D operands are promoted as in NumPy.
func Matmul(a, b *Array) *Array {
	e := sameEngine("matmul", a, b)
	as, bs := a.Shape(), b.Shape()
	if len(as) == 0 || len(bs) == 0 {
		panic("mx: matmul: scalar operand")
	}
	va, vb := a, b
	if len(as) == 1 {
		va = Reshape(a, 1, as[0])
	}
	if len(bs) == 1 {
		vb = Reshape(b, bs[0], 1)
	}
	sa, sb := va.Shape(), vb.Shape()
	if sa[len(sa)-1] != sb[len(sb)-2] {
		panic(fmt.Sprintf("mx: matmul: shapes %v and %v", as, bs))
	}
	if _, err := BroadcastShapes(sa[:len(sa)-2], sb[:len(sb)-2]); err != nil {
		panic(fmt.Sprintf("mx: matmul: batch shapes %v and %v", as, bs))
	}
	out := Wrap(e, e.Matmul(va.h, vb.h))
	if len(as) == 1 {
		out = Squeeze(out, -2)
	}
	if len(bs) == 1 {
		out = Squeeze(out, -1)
	}
	return out
}

// AddMM is MLX's addmm: beta·c + alpha·(a·b), with a·b as Matmul computes it (operands
// of at least two axes) and c broadcast to its shape. It is one op: the go engine adds
// c and scales in the product's own buffer, where a·b, its scaling and the sum as
// separate ops would each make an array (a LoRA linear's base(x) + s·(x·A)·B).
func AddMM(c, a, b *Array, alpha, beta float64) *Array {
	e := sameEngine("addmm", c, a, b)
	as, bs := a.Shape(), b.Shape()
	if len(as) < 2 || len(bs) < 2 || as[len(as)-1] != bs[len(bs)-2] {
		panic(fmt.Sprintf("mx: addmm: shapes %v and %v", as, bs))
	}
	batch, err := BroadcastShapes(as[:len(as)-2], bs[:len(bs)-2])
	if err != nil {
		panic(fmt.Sprintf("mx: addmm: batch shapes %v and %v", as, bs))
	}
	out := append(batch, as[len(as)-2], bs[len(bs)-1])
	if got, err := BroadcastShapes(c.Shape(), out); err != nil || !slices.Equal(got, out) {
		panic(fmt.Sprintf("mx: addmm: c %v does not broadcast to the product %v", c.Shape(), out))
	}
	return Wrap(e, e.AddMM(c.h, a.h, b.h, alpha, beta))
}

// Take gathers along axis with integer indices of any shape: the result replaces axis
// by the indices' shape. Out-of-range indices panic on the go engine.
func Take(x, indices *Array, axis int) *Array {
	e := sameEngine("take", x, indices)
	axis = normAxis("take", axis, x.Ndim())
	if !indices.DType().IsInteger() {
		panic(fmt.Sprintf("mx: take: indices of dtype %s", indices.DType()))
	}
	return Wrap(e, e.Take(x.h, indices.h, axis))
}

// TakeAlongAxis gathers x[..., idx[...], ...] along axis; indices broadcast against x
// on the other axes.
func TakeAlongAxis(x, indices *Array, axis int) *Array {
	e := sameEngine("take_along_axis", x, indices)
	axis = normAxis("take_along_axis", axis, x.Ndim())
	if indices.Ndim() != x.Ndim() || !indices.DType().IsInteger() {
		panic(fmt.Sprintf("mx: take_along_axis: indices %v %s for x %v", indices.Shape(), indices.DType(), x.Shape()))
	}
	return Wrap(e, e.TakeAlongAxis(x.h, indices.h, axis))
}

// StopGradient is the identity whose derivative is zero.
func StopGradient(x *Array) *Array { return Wrap(x.e, x.e.StopGradient(x.h)) }
