package goeng

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"sync"
	"unsafe"

	"github.com/dgtune/dgtune/mx/internal/dims"

	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/internal/half"
	"github.com/dgtune/dgtune/mx/internal/par"
	"github.com/dgtune/dgtune/mx/internal/uninit"
)

// tensor is the go engine's array: immutable, contiguous, row-major.
type tensor struct {
	shape []int
	dt    mx.DType
	// data is []float32, []float64, []uint16 (float16/bfloat16 bits), []int32, []int64,
	// []uint32, []uint8 or []bool, matching dt. It is nil while swap is pending: read the
	// elements through raw.
	data any
	// swap, when set, means the elements have not been computed: the tensor is swap.src
	// with its last two axes swapped (see transposeKernel).
	swap *swapView
	// node is set while the tensor is part of a traced computation (see autodiff.go).
	node *node
}

// swapView is a transpose of the last two axes whose elements are computed on first
// use. Products read src with the other transpose flag instead (sgemm takes either
// layout at the same speed), so a Dense linear's x·Wᵀ, its VJP and an expert stack's
// swapped view never copy the weight.
type swapView struct {
	src  *tensor
	once sync.Once
	data any
}

// raw returns the elements, computing a pending swap once (safe from several
// goroutines).
func (t *tensor) raw() any {
	if t.swap == nil {
		return t.data
	}
	v := t.swap
	v.once.Do(func() {
		nd := len(v.src.shape)
		st := strides(v.src.shape)
		st[nd-2], st[nd-1] = st[nd-1], st[nd-2]
		v.data = view(v.src, t.shape, st, 0).data
	})
	return v.data
}

// swapped returns the tensor t is the last-two-axes transpose of, or nil when t holds
// its own elements.
func (t *tensor) swapped() *tensor {
	if t.swap == nil {
		return nil
	}
	return t.swap.src
}

// alias is a new tensor (no node) sharing t's elements.
func (t *tensor) alias() *tensor {
	return &tensor{shape: t.shape, dt: t.dt, data: t.data, swap: t.swap}
}

func (t *tensor) size() int { return dims.Numel(t.shape) }

func tt(h mx.Handle) *tensor {
	t, ok := h.(*tensor)
	if !ok {
		panic(fmt.Sprintf("goeng: foreign handle %T", h))
	}
	return t
}

func newTensor(shape []int, dt mx.DType, data any) *tensor {
	return &tensor{shape: slices.Clone(shape), dt: dt, data: data}
}

func makeData(dt mx.DType, n int) any {
	switch dt {
	case mx.Float32:
		// Every caller (view, take, concatenate, slice_update, the casts) writes all n.
		return uninit.Float32s(n)
	case mx.Float64:
		return make([]float64, n)
	case mx.Float16, mx.BFloat16:
		return make([]uint16, n)
	case mx.Int32:
		return make([]int32, n)
	case mx.Int64:
		return make([]int64, n)
	case mx.Uint32:
		return make([]uint32, n)
	case mx.Uint8:
		return make([]uint8, n)
	case mx.Bool:
		return make([]bool, n)
	}
	panic(fmt.Sprintf("goeng: unknown dtype %v", dt))
}

// f32 returns the elements as float32, converting (into a new slice) unless the tensor
// already is float32; the caller must not modify the result.
func (t *tensor) f32() []float32 {
	switch v := t.raw().(type) {
	case []float32:
		return v
	case []uint16:
		out := make([]float32, len(v))
		widen := half.F16ToF32
		if t.dt == mx.BFloat16 {
			widen = half.BF16ToF32
		}
		// Element by element, so split across cores: a 64 MiB chunk of a bf16 checkpoint
		// being quantized is widened here.
		par.For(len(v), 2, func(lo, hi int) { widen(out[lo:hi], v[lo:hi]) })
		return out
	case []float64:
		out := make([]float32, len(v))
		for i, x := range v {
			out[i] = float32(x)
		}
		return out
	case []int32:
		out := make([]float32, len(v))
		for i, x := range v {
			out[i] = float32(x)
		}
		return out
	case []int64:
		out := make([]float32, len(v))
		for i, x := range v {
			out[i] = float32(x)
		}
		return out
	case []uint32:
		out := make([]float32, len(v))
		for i, x := range v {
			out[i] = float32(x)
		}
		return out
	case []uint8:
		out := make([]float32, len(v))
		for i, x := range v {
			out[i] = float32(x)
		}
		return out
	case []bool:
		out := make([]float32, len(v))
		for i, x := range v {
			if x {
				out[i] = 1
			}
		}
		return out
	}
	panic(fmt.Sprintf("goeng: bad data %T", t.raw()))
}

// i64 returns the elements as int64 (floats truncate toward zero).
func (t *tensor) i64() []int64 {
	out := make([]int64, t.size())
	switch v := t.raw().(type) {
	case []int32:
		for i, x := range v {
			out[i] = int64(x)
		}
	case []int64:
		copy(out, v)
	case []uint32:
		for i, x := range v {
			out[i] = int64(x)
		}
	case []uint8:
		for i, x := range v {
			out[i] = int64(x)
		}
	case []bool:
		for i, x := range v {
			if x {
				out[i] = 1
			}
		}
	case []float64:
		for i, x := range v {
			out[i] = int64(x)
		}
	default:
		for i, x := range t.f32() {
			out[i] = int64(x)
		}
	}
	return out
}

// bools returns the elements as bool (non-zero is true).
func (t *tensor) bools() []bool {
	if v, ok := t.raw().([]bool); ok {
		return v
	}
	out := make([]bool, t.size())
	if t.dt.IsFloat() {
		for i, x := range t.f32() {
			out[i] = x != 0
		}
		return out
	}
	for i, x := range t.i64() {
		out[i] = x != 0
	}
	return out
}

// fromF32 makes a tensor of dtype dt (a float type) from float32 values, rounding to
// half precision when dt asks for it. vals may be adopted.
func fromF32(shape []int, dt mx.DType, vals []float32) *tensor {
	switch dt {
	case mx.Float32:
		return newTensor(shape, dt, vals)
	case mx.BFloat16:
		out := make([]uint16, len(vals))
		half.F32ToBF16(out, vals)
		return newTensor(shape, dt, out)
	case mx.Float16:
		out := make([]uint16, len(vals))
		half.F32ToF16(out, vals)
		return newTensor(shape, dt, out)
	case mx.Float64:
		out := make([]float64, len(vals))
		for i, x := range vals {
			out[i] = float64(x)
		}
		return newTensor(shape, dt, out)
	}
	return fromI64(shape, dt, f32ToI64(vals))
}

func f32ToI64(v []float32) []int64 {
	out := make([]int64, len(v))
	for i, x := range v {
		out[i] = int64(x)
	}
	return out
}

// fromI64 makes a tensor of an integer or bool dtype, wrapping as C casts do.
func fromI64(shape []int, dt mx.DType, vals []int64) *tensor {
	n := len(vals)
	switch dt {
	case mx.Int32:
		out := make([]int32, n)
		for i, x := range vals {
			out[i] = int32(x)
		}
		return newTensor(shape, dt, out)
	case mx.Int64:
		return newTensor(shape, dt, vals)
	case mx.Uint32:
		out := make([]uint32, n)
		for i, x := range vals {
			out[i] = uint32(x)
		}
		return newTensor(shape, dt, out)
	case mx.Uint8:
		out := make([]uint8, n)
		for i, x := range vals {
			out[i] = uint8(x)
		}
		return newTensor(shape, dt, out)
	case mx.Bool:
		out := make([]bool, n)
		for i, x := range vals {
			out[i] = x != 0
		}
		return newTensor(shape, dt, out)
	}
	f := make([]float32, n)
	for i, x := range vals {
		f[i] = float32(x)
	}
	return fromF32(shape, dt, f)
}

func castTensor(t *tensor, dt mx.DType) *tensor {
	if t.dt == dt {
		return t
	}
	switch {
	case dt == mx.Bool:
		return newTensor(t.shape, dt, slices.Clone(t.bools()))
	case dt.IsFloat():
		if t.dt == mx.Float64 && dt == mx.Float64 {
			return t
		}
		return fromF32(t.shape, dt, slices.Clone(t.f32()))
	default:
		return fromI64(t.shape, dt, t.i64())
	}
}

// fromBytes decodes little-endian raw elements.
func fromBytes(b []byte, shape []int, dt mx.DType) *tensor {
	n := dims.Numel(shape)
	data := makeData(dt, n)
	if littleEndian && copyLittleEndian(data, b) {
		return newTensor(shape, dt, data)
	}
	switch v := data.(type) {
	case []float32:
		for i := range v {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
	case []float64:
		for i := range v {
			v[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
		}
	case []uint16:
		for i := range v {
			v[i] = binary.LittleEndian.Uint16(b[2*i:])
		}
	case []int32:
		for i := range v {
			v[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
		}
	case []int64:
		for i := range v {
			v[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
		}
	case []uint32:
		for i := range v {
			v[i] = binary.LittleEndian.Uint32(b[4*i:])
		}
	case []uint8:
		copy(v, b)
	case []bool:
		for i := range v {
			v[i] = b[i] != 0
		}
	}
	return newTensor(shape, dt, data)
}

// copyLittleEndian copies safetensors' little-endian bytes into fixed-width numeric data
// with one memmove, on a little-endian host; element by element (fromBytes' loops) this
// was a tenth of a conversion's time. It reports false for the types it does not handle.
func copyLittleEndian(data any, b []byte) bool {
	var dst []byte
	switch v := data.(type) {
	case []float32:
		dst = rawBytes(v)
	case []uint32:
		dst = rawBytes(v)
	case []int32:
		dst = rawBytes(v)
	case []uint16:
		dst = rawBytes(v)
	case []float64:
		dst = rawBytes(v)
	case []int64:
		dst = rawBytes(v)
	default:
		return false
	}
	copy(dst, b[:len(dst)]) // a short b panics here, as the element loops would
	return true
}

// rawBytes is the memory of v as bytes.
func rawBytes[T any](v []T) []byte {
	var zero T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), len(v)*int(unsafe.Sizeof(zero)))
}

func cloneData(data any) any {
	switch v := data.(type) {
	case []float32:
		return slices.Clone(v)
	case []float64:
		return slices.Clone(v)
	case []uint16:
		return slices.Clone(v)
	case []int32:
		return slices.Clone(v)
	case []int64:
		return slices.Clone(v)
	case []uint32:
		return slices.Clone(v)
	case []uint8:
		return slices.Clone(v)
	case []bool:
		return slices.Clone(v)
	}
	panic(fmt.Sprintf("goeng: bad data %T", data))
}

// strides returns row-major element strides.
func strides(shape []int) []int {
	s := make([]int, len(shape))
	acc := 1
	for i := len(shape) - 1; i >= 0; i-- {
		s[i] = acc
		acc *= shape[i]
	}
	return s
}

// broadcastStrides returns strides of shape (right-aligned) inside out, 0 where broadcast.
func broadcastStrides(shape, out []int) []int {
	st := strides(shape)
	res := make([]int, len(out))
	off := len(out) - len(shape)
	for i := range shape {
		if shape[i] != 1 {
			res[off+i] = st[i]
		}
	}
	return res
}
