package mx

import (
	"fmt"
	"strings"
)

// Array is an immutable n-dimensional array owned by an Engine.
type Array struct {
	e Engine
	h Handle
}

// Wrap makes an Array from an engine handle. Engines and tests use it; model code
// creates arrays with the constructors below.
func Wrap(e Engine, h Handle) *Array { return &Array{e: e, h: h} }

// Engine returns the engine that owns a.
func (a *Array) Engine() Engine { return a.e }

// Handle returns the engine's handle.
func (a *Array) Handle() Handle { return a.h }

// Shape returns a copy of the shape.
func (a *Array) Shape() []int { return append([]int(nil), a.e.Shape(a.h)...) }

// Dim returns the size of axis i (negative counts from the end).
func (a *Array) Dim(i int) int {
	s := a.e.Shape(a.h)
	if i < 0 {
		i += len(s)
	}
	return s[i]
}

// Ndim returns the number of axes.
func (a *Array) Ndim() int { return len(a.e.Shape(a.h)) }

// Size returns the number of elements.
func (a *Array) Size() int { return prod(a.e.Shape(a.h)) }

// DType returns the element type.
func (a *Array) DType() DType { return a.e.DType(a.h) }

// Free releases the array's memory now. The array must not be used afterwards.
func (a *Array) Free() {
	if a != nil && a.h != nil {
		a.e.Free(a.h)
		a.h = nil
	}
}

func (a *Array) String() string {
	return fmt.Sprintf("array(%v, %s)", a.Shape(), a.DType())
}

// Float32s evaluates a and returns its elements as float32 (converting any dtype).
func (a *Array) Float32s() []float32 {
	switch v := a.e.ToSlice(AsType(a, Float32).h).(type) {
	case []float32:
		return v
	default:
		panic(fmt.Sprintf("mx: engine %s returned %T for float32", a.e.Name(), v))
	}
}

// Int32s evaluates a and returns its elements as int32 (converting any dtype).
func (a *Array) Int32s() []int32 {
	switch v := a.e.ToSlice(AsType(a, Int32).h).(type) {
	case []int32:
		return v
	default:
		panic(fmt.Sprintf("mx: engine %s returned %T for int32", a.e.Name(), v))
	}
}

// Bools evaluates a and returns its elements as bool.
func (a *Array) Bools() []bool {
	switch v := a.e.ToSlice(AsType(a, Bool).h).(type) {
	case []bool:
		return v
	default:
		panic(fmt.Sprintf("mx: engine %s returned %T for bool", a.e.Name(), v))
	}
}

// Item returns the single element of a size-1 array as float64.
func (a *Array) Item() float64 {
	if a.Size() != 1 {
		panic(fmt.Sprintf("mx: Item on array of shape %v", a.Shape()))
	}
	return float64(a.Float32s()[0])
}

// Raw evaluates a and returns its elements as the engine's Go slice for its dtype:
// []float32, []float64, []int32, []int64, []uint32, []uint8, []bool, or []uint16 bits
// for float16/bfloat16.
func (a *Array) Raw() any { return a.e.ToSlice(a.h) }

// FromSlice makes an array from a Go slice; see Engine.FromSlice for the accepted types.
func FromSlice(e Engine, data any, shape []int, dt DType) *Array {
	checkShape("FromSlice", shape)
	n := prod(shape)
	if l := sliceLen(data); l != n {
		panic(fmt.Sprintf("mx: FromSlice: %d elements for shape %v", l, shape))
	}
	return Wrap(e, e.FromSlice(data, shape, dt))
}

// FromFloat32 makes a float32 array.
func FromFloat32(e Engine, data []float32, shape ...int) *Array {
	return FromSlice(e, data, shape, Float32)
}

// FromInt32 makes an int32 array.
func FromInt32(e Engine, data []int32, shape ...int) *Array {
	return FromSlice(e, data, shape, Int32)
}

// FromBool makes a bool array.
func FromBool(e Engine, data []bool, shape ...int) *Array {
	return FromSlice(e, data, shape, Bool)
}

// ValueFree is implemented by an engine that never reads an array's values (the
// shape-only engine, mx/shapeeng): a constructor whose values are computed on the host
// skips computing them for it.
type ValueFree interface {
	ValueFree()
}

// FromBoolFunc makes a bool array of shape whose elements fill writes, row-major, into a
// slice of that many. A ValueFree engine gets its array without fill being called.
func FromBoolFunc(e Engine, fill func([]bool), shape ...int) *Array {
	checkShape("FromBoolFunc", shape)
	if _, ok := e.(ValueFree); ok {
		return Full(e, shape, 0, Bool)
	}
	data := make([]bool, prod(shape))
	fill(data)
	return FromBool(e, data, shape...)
}

// FromBytes makes an array from little-endian raw elements (the safetensors layout).
func FromBytes(e Engine, b []byte, shape []int, dt DType) *Array {
	checkShape("FromBytes", shape)
	if len(b) != prod(shape)*dt.Size() {
		panic(fmt.Sprintf("mx: FromBytes: %d bytes for %v %s", len(b), shape, dt))
	}
	return Wrap(e, e.FromBytes(b, shape, dt))
}

// Full makes an array filled with value.
func Full(e Engine, shape []int, value float64, dt DType) *Array {
	checkShape("Full", shape)
	return Wrap(e, e.Full(shape, value, dt))
}

// Zeros makes an array of zeros.
func Zeros(e Engine, shape []int, dt DType) *Array { return Full(e, shape, 0, dt) }

// Ones makes an array of ones.
func Ones(e Engine, shape []int, dt DType) *Array { return Full(e, shape, 1, dt) }

// Scalar makes a 0-d array.
func Scalar(e Engine, v float64, dt DType) *Array { return Full(e, nil, v, dt) }

// ZerosLike makes zeros of a's shape and dtype.
func ZerosLike(a *Array) *Array { return Full(a.e, a.Shape(), 0, a.DType()) }

// Arange makes [start, start+step, ...) below stop.
func Arange(e Engine, start, stop, step float64, dt DType) *Array {
	if step == 0 {
		panic("mx: Arange: step 0")
	}
	return Wrap(e, e.Arange(start, stop, step, dt))
}

// Eval forces evaluation of lazy arrays (a no-op on eager engines).
func Eval(arrays ...*Array) {
	if e, hs := nonNilHandles(arrays); e != nil {
		e.Eval(hs...)
	}
}

// nonNilHandles is the non-nil arrays' handles (handles' for lists that may hold nil)
// and their engine, nil when there are none.
func nonNilHandles(arrays []*Array) (Engine, []Handle) {
	var e Engine
	hs := make([]Handle, 0, len(arrays))
	for _, a := range arrays {
		if a != nil {
			e = a.e
			hs = append(hs, a.h)
		}
	}
	return e, hs
}

// AsyncEvaluator is the optional capability of a lazy engine to start evaluating arrays
// without waiting for them (MLX's async_eval): the host goes on building the next graph
// while the device computes, and a later Eval of the same arrays waits for them.
type AsyncEvaluator interface {
	AsyncEval(hs ...Handle)
}

// AsyncEval starts evaluating arrays and returns without waiting where the engine can
// (AsyncEvaluator); elsewhere it is Eval.
func AsyncEval(arrays ...*Array) {
	e, hs := nonNilHandles(arrays)
	if e == nil {
		return
	}
	if ae, ok := e.(AsyncEvaluator); ok {
		ae.AsyncEval(hs...)
		return
	}
	e.Eval(hs...)
}

// Tidy runs fn and frees every array the engine created during fn except the ones fn
// returns (and arrays that existed before). Nest freely.
func Tidy(e Engine, fn func() []*Array) []*Array {
	e.PushScope()
	var out []*Array
	defer func() {
		keep := make([]Handle, 0, len(out))
		for _, a := range out {
			if a != nil {
				keep = append(keep, a.h)
			}
		}
		e.PopScope(keep)
	}()
	out = fn()
	return out
}

func prod(s []int) int {
	n := 1
	for _, d := range s {
		n *= d
	}
	return n
}

func checkShape(op string, shape []int) {
	for _, d := range shape {
		if d < 0 {
			panic(fmt.Sprintf("mx: %s: negative dimension in shape %v", op, shape))
		}
	}
}

func sliceLen(data any) int {
	switch v := data.(type) {
	case []float32:
		return len(v)
	case []float64:
		return len(v)
	case []int32:
		return len(v)
	case []int64:
		return len(v)
	case []uint32:
		return len(v)
	case []uint8:
		return len(v)
	case []bool:
		return len(v)
	case []uint16:
		return len(v)
	}
	panic(fmt.Sprintf("mx: unsupported slice type %T", data))
}

func shapeString(arrays ...*Array) string {
	parts := make([]string, len(arrays))
	for i, a := range arrays {
		parts[i] = fmt.Sprint(a.Shape())
	}
	return strings.Join(parts, " and ")
}
