//go:build mlx

package mlxeng

// #include "mlx/c/mlx.h"
import "C"

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"

	"github.com/dgtune/dgtune/mx"
)

// fromData copies n elements of MLX dtype src at p into a new array and casts it to dt.
func (e *Engine) fromData(op string, p unsafe.Pointer, shape []int, src C.mlx_dtype, dt mx.DType) *array {
	cs := cints(shape)
	a := e.op(op, func(res *C.mlx_array) C.int {
		return C.mlx_array_set_data(res, p, ptr(cs), C.int(len(cs)), src)
	})
	if a.dt == dt {
		return a
	}
	out := e.astype(a, dt)
	e.free(a)
	return out
}

// FromSlice implements mx.Engine.
func (e *Engine) FromSlice(data any, shape []int, dt mx.DType) mx.Handle {
	var dummy [8]byte
	at := func(n int, p unsafe.Pointer) unsafe.Pointer {
		if n == 0 {
			return unsafe.Pointer(&dummy[0])
		}
		return p
	}
	switch v := data.(type) {
	case []float32:
		return e.fromData("from_slice", at(len(v), unsafe.Pointer(unsafe.SliceData(v))), shape, C.MLX_FLOAT32, dt)
	case []float64:
		if dt != mx.Float64 {
			// The go engine narrows through float32; doing it here also keeps float64,
			// which Metal lacks, off the GPU.
			f := make([]float32, len(v))
			for i, x := range v {
				f[i] = float32(x)
			}
			return e.FromSlice(f, shape, dt)
		}
		return e.fromData("from_slice", at(len(v), unsafe.Pointer(unsafe.SliceData(v))), shape, C.MLX_FLOAT64, dt)
	case []uint16:
		if dt != mx.Float16 && dt != mx.BFloat16 {
			panic(fmt.Sprintf("mlx: from_slice: []uint16 data for dtype %s (only half types)", dt))
		}
		return e.fromData("from_slice", at(len(v), unsafe.Pointer(unsafe.SliceData(v))), shape, toMLX(dt), dt)
	case []int32:
		return e.fromData("from_slice", at(len(v), unsafe.Pointer(unsafe.SliceData(v))), shape, C.MLX_INT32, dt)
	case []int64:
		return e.fromData("from_slice", at(len(v), unsafe.Pointer(unsafe.SliceData(v))), shape, C.MLX_INT64, dt)
	case []uint32:
		return e.fromData("from_slice", at(len(v), unsafe.Pointer(unsafe.SliceData(v))), shape, C.MLX_UINT32, dt)
	case []uint8:
		return e.fromData("from_slice", at(len(v), unsafe.Pointer(unsafe.SliceData(v))), shape, C.MLX_UINT8, dt)
	case []bool:
		// Go's bool is one byte holding 0 or 1, as C's.
		return e.fromData("from_slice", at(len(v), unsafe.Pointer(unsafe.SliceData(v))), shape, C.MLX_BOOL, dt)
	}
	panic(fmt.Sprintf("mlx: from_slice: unsupported %T", data))
}

// FromBytes implements mx.Engine: the bytes are copied, so the caller may unmap them.
func (e *Engine) FromBytes(b []byte, shape []int, dt mx.DType) mx.Handle {
	if dt == mx.Bool {
		// Normalise to 0/1 so a stray byte cannot make an invalid C bool.
		v := make([]bool, len(b))
		for i, x := range b {
			v[i] = x != 0
		}
		return e.FromSlice(v, shape, dt)
	}
	var dummy [8]byte
	p := unsafe.Pointer(&dummy[0])
	if len(b) > 0 {
		p = unsafe.Pointer(&b[0])
	}
	if binary.NativeEndian.Uint16([]byte{1, 0}) != 1 {
		panic("mlx: from_bytes: big-endian hosts are not supported")
	}
	return e.fromData("from_bytes", p, shape, toMLX(dt), dt)
}

// scalar makes a 0-d array of dt holding v converted as the go engine converts: floats
// through float32, integers through int64 with wrap-around.
func (e *Engine) scalar(v float64, dt mx.DType) *array {
	switch {
	case dt.IsFloat():
		f := []float32{float32(v)}
		return e.FromSlice(f, nil, dt).(*array)
	case dt == mx.Bool:
		return e.FromSlice([]bool{int64(v) != 0}, nil, dt).(*array)
	default:
		return e.FromSlice([]int64{int64(v)}, nil, dt).(*array)
	}
}

// Full implements mx.Engine.
func (e *Engine) Full(shape []int, value float64, dt mx.DType) mx.Handle {
	s := e.scalar(value, dt)
	defer e.free(s)
	cs := cints(shape)
	return e.op("full", func(res *C.mlx_array) C.int {
		return C.mlx_full(res, ptr(cs), C.size_t(len(cs)), s.c, toMLX(dt), e.streamFor(dt))
	})
}

// Arange implements mx.Engine.
func (e *Engine) Arange(start, stop, step float64, dt mx.DType) mx.Handle {
	if dt == mx.Bool {
		// MLX has no bool arange; the go engine gives start != 0, then true.
		n := max(int(math.Ceil((stop-start)/step)), 0)
		v := make([]bool, n)
		for i := range v {
			v[i] = int64(start+float64(i)*step) != 0
		}
		return e.FromSlice(v, []int{n}, dt)
	}
	return e.op("arange", func(res *C.mlx_array) C.int {
		return C.mlx_arange(res, C.double(start), C.double(stop), C.double(step), toMLX(dt), e.stream)
	})
}

// Shape implements mx.Engine. Shape and dtype stay readable after the array is freed:
// they are Go values, and code that swaps traced arrays back out after ValueAndGrad
// (lora.Adapter.SetParams) checks the shapes of the arrays it replaces.
func (e *Engine) Shape(h mx.Handle) []int { return meta(h).shape }

// DType implements mx.Engine.
func (e *Engine) DType(h mx.Handle) mx.DType { return meta(h).dt }

// Eval implements mx.Engine.
func (e *Engine) Eval(hs ...mx.Handle) {
	v := vector(hs)
	defer C.mlx_vector_array_free(v)
	e.atHome(func() { e.run("eval", func() C.int { return C.mlx_eval(v) }) })
}

// ToSlice implements mx.Engine: it evaluates and copies into a fresh Go slice.
func (e *Engine) ToSlice(h mx.Handle) any {
	a := get(h)
	n := 1
	for _, d := range a.shape {
		n *= d
	}
	var out any
	var p unsafe.Pointer
	switch a.dt {
	case mx.Float32:
		s := make([]float32, n)
		out, p = s, unsafe.Pointer(unsafe.SliceData(s))
	case mx.Float64:
		s := make([]float64, n)
		out, p = s, unsafe.Pointer(unsafe.SliceData(s))
	case mx.Float16, mx.BFloat16:
		s := make([]uint16, n)
		out, p = s, unsafe.Pointer(unsafe.SliceData(s))
	case mx.Int32:
		s := make([]int32, n)
		out, p = s, unsafe.Pointer(unsafe.SliceData(s))
	case mx.Int64:
		s := make([]int64, n)
		out, p = s, unsafe.Pointer(unsafe.SliceData(s))
	case mx.Uint32:
		s := make([]uint32, n)
		out, p = s, unsafe.Pointer(unsafe.SliceData(s))
	case mx.Uint8:
		s := make([]uint8, n)
		out, p = s, unsafe.Pointer(unsafe.SliceData(s))
	case mx.Bool:
		s := make([]bool, n)
		out, p = s, unsafe.Pointer(unsafe.SliceData(s))
	default:
		panic(fmt.Sprintf("mlx: to_slice: dtype %s", a.dt))
	}
	if n == 0 {
		return out
	}
	e.read(a, p, n*a.dt.Size())
	return out
}
