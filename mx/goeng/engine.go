package goeng

import (
	"fmt"
	"math"
	"slices"
	"unsafe"

	"github.com/dgtune/dgtune/mx/internal/dims"

	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/internal/mlxver"
)

// Engine is the pure-Go engine. Every array carries its own data; the engine holds only
// the MLX release whose algorithms it reproduces where MLX releases differ.
type Engine struct {
	mlx  mlxver.Version
	rope ropeCache // RoPE's recent cosine and sine tables
}

// New returns the go engine. Its random numbers are those of the newest MLX release it
// knows (mlxver.Newest).
func New() *Engine { return &Engine{mlx: mlxver.Newest} }

// NewFollowing returns a go engine whose random numbers are those of the given MLX
// release ("0.31.2", or what mlx_version reports), so that it is an exact oracle for an
// mlx engine built on that release. Where releases differ (v0.32.1: randint's rounding,
// categorical sampling of a single distribution) it follows the release; the releases
// dgtune checks are mlxver.Oldest to mlxver.Newest.
func NewFollowing(mlxVersion string) (*Engine, error) {
	v, err := mlxver.Parse(mlxVersion)
	if err != nil {
		return nil, fmt.Errorf("goeng: %w", err)
	}
	return &Engine{mlx: v}, nil
}

// FollowsMLX is the MLX release whose random numbers the engine reproduces.
func (e *Engine) FollowsMLX() string { return e.release().String() }

// release is the MLX release followed; a zero Engine follows the newest.
func (e *Engine) release() mlxver.Version {
	if e.mlx == (mlxver.Version{}) {
		return mlxver.Newest
	}
	return e.mlx
}

func init() {
	mx.Register("go", func() (mx.Engine, error) { return New(), nil })
}

// Name implements mx.Engine.
func (e *Engine) Name() string { return "go" }

func (e *Engine) FromSlice(data any, shape []int, dt mx.DType) mx.Handle {
	var src *tensor
	switch v := data.(type) {
	case []float32:
		src = newTensor(shape, mx.Float32, slices.Clone(v))
	case []float64:
		src = newTensor(shape, mx.Float64, slices.Clone(v))
	case []uint16:
		if dt != mx.Float16 && dt != mx.BFloat16 {
			panic(fmt.Sprintf("goeng: []uint16 data for dtype %s (only half types)", dt))
		}
		return newTensor(shape, dt, slices.Clone(v))
	case []int32:
		src = newTensor(shape, mx.Int32, slices.Clone(v))
	case []int64:
		src = newTensor(shape, mx.Int64, slices.Clone(v))
	case []uint32:
		src = newTensor(shape, mx.Uint32, slices.Clone(v))
	case []uint8:
		src = newTensor(shape, mx.Uint8, slices.Clone(v))
	case []bool:
		src = newTensor(shape, mx.Bool, slices.Clone(v))
	default:
		panic(fmt.Sprintf("goeng: FromSlice: unsupported %T", data))
	}
	return castTensor(src, dt)
}

func (e *Engine) FromBytes(b []byte, shape []int, dt mx.DType) mx.Handle {
	return fromBytes(b, shape, dt)
}

func (e *Engine) Full(shape []int, value float64, dt mx.DType) mx.Handle {
	n := dims.Numel(shape)
	if dt.IsFloat() {
		return fromF32(shape, dt, fill(n, float32(value)))
	}
	vals := make([]int64, n)
	for i := range vals {
		vals[i] = int64(value)
	}
	return fromI64(shape, dt, vals)
}

func (e *Engine) Arange(start, stop, step float64, dt mx.DType) mx.Handle {
	n := int(math.Ceil((stop - start) / step))
	n = max(n, 0)
	if dt.IsFloat() {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(start + float64(i)*step)
		}
		return fromF32([]int{n}, dt, v)
	}
	v := make([]int64, n)
	for i := range v {
		v[i] = int64(start + float64(i)*step)
	}
	return fromI64([]int{n}, dt, v)
}

func (e *Engine) Shape(h mx.Handle) []int    { return tt(h).shape }
func (e *Engine) DType(h mx.Handle) mx.DType { return tt(h).dt }
func (e *Engine) ToSlice(h mx.Handle) any    { return cloneData(tt(h).raw()) }
func (e *Engine) Eval(...mx.Handle)          {}
func (e *Engine) Free(mx.Handle)             {}
func (e *Engine) PushScope()                 {}
func (e *Engine) PopScope([]mx.Handle)       {}

func (e *Engine) Unary(op mx.UnaryOp, h mx.Handle) mx.Handle {
	x := tt(h)
	out := unaryKernel(op, x)
	if !out.dt.IsFloat() || !x.dt.IsFloat() {
		return untraced(out)
	}
	return record(out, op.String(), []*tensor{x}, unaryVJP(op, x, out))
}

func (e *Engine) Binary(op mx.BinaryOp, ha, hb mx.Handle) mx.Handle {
	a, b := tt(ha), tt(hb)
	out := binaryKernel(op, a, b)
	if !out.dt.IsFloat() || op == mx.OpFloorDivide {
		return untraced(out)
	}
	return record(out, op.String(), []*tensor{a, b}, binaryVJP(op, a, b, out))
}

func (e *Engine) Where(hc, ha, hb mx.Handle) mx.Handle {
	c, a, b := tt(hc), tt(ha), tt(hb)
	out := whereKernel(c, a, b)
	if !out.dt.IsFloat() {
		return untraced(out)
	}
	return record(out, "where", []*tensor{c, a, b}, whereVJP(c, a, b))
}

func (e *Engine) AsType(h mx.Handle, dt mx.DType) mx.Handle {
	x := tt(h)
	out := castTensor(x, dt)
	if !x.dt.IsFloat() || !dt.IsFloat() {
		return untraced(out)
	}
	return record(out, "astype", []*tensor{x}, asTypeVJP(x))
}

func (e *Engine) Reshape(h mx.Handle, shape []int) mx.Handle {
	x := tt(h)
	return record(reshapeKernel(x, shape), "reshape", []*tensor{x}, reshapeVJP(x))
}

func (e *Engine) Transpose(h mx.Handle, axes []int) mx.Handle {
	x := tt(h)
	return record(transposeKernel(x, axes), "transpose", []*tensor{x}, transposeVJP(axes))
}

func (e *Engine) BroadcastTo(h mx.Handle, shape []int) mx.Handle {
	x := tt(h)
	return record(broadcastKernel(x, shape), "broadcast_to", []*tensor{x}, broadcastVJP(x))
}

func (e *Engine) Slice(h mx.Handle, start, stop, step []int) mx.Handle {
	x := tt(h)
	return record(sliceKernel(x, start, stop, step), "slice", []*tensor{x}, sliceVJP(x, start, stop, step))
}

func (e *Engine) SliceUpdate(h, hu mx.Handle, start, stop, step []int) mx.Handle {
	x, u := tt(h), tt(hu)
	return record(sliceUpdateKernel(x, u, start, stop, step), "slice_update", []*tensor{x, u}, sliceUpdateVJP(u, start, stop, step))
}

func (e *Engine) Concatenate(hs []mx.Handle, axis int) mx.Handle {
	xs := make([]*tensor, len(hs))
	for i, h := range hs {
		xs[i] = tt(h)
	}
	return record(concatKernel(xs, axis), "concatenate", xs, concatVJP(xs, axis))
}

func (e *Engine) Reduce(op mx.ReduceOp, h mx.Handle, axes []int, keep bool) mx.Handle {
	x := tt(h)
	out := reduceKernel(op, x, axes, keep)
	if !out.dt.IsFloat() {
		return untraced(out)
	}
	return record(out, op.String(), []*tensor{x}, reduceVJP(op, x, out, axes))
}

func (e *Engine) Argmax(h mx.Handle, axis int, keep bool) mx.Handle {
	return marked("argmax", argKernel(tt(h), axis, keep, true))
}

func (e *Engine) Argmin(h mx.Handle, axis int, keep bool) mx.Handle {
	return marked("argmin", argKernel(tt(h), axis, keep, false))
}

func (e *Engine) Softmax(h mx.Handle, axis int) mx.Handle {
	x := tt(h)
	out := softmaxKernel(x, axis)
	return record(out, "softmax", []*tensor{x}, softmaxVJP(out, axis))
}

func (e *Engine) Cumsum(h mx.Handle, axis int, reverse, inclusive bool) mx.Handle {
	x := tt(h)
	out := scanKernel(x, axis, reverse, inclusive, false)
	if !out.dt.IsFloat() {
		return untraced(out)
	}
	return record(out, "cumsum", []*tensor{x}, cumsumVJP(axis, reverse, inclusive))
}

func (e *Engine) Cummax(h mx.Handle, axis int, reverse, inclusive bool) mx.Handle {
	x := tt(h)
	// No VJP: a traced input makes the backward walk stop here with the op's name.
	return record(scanKernel(x, axis, reverse, inclusive, true), "cummax", []*tensor{x}, nil)
}

func (e *Engine) Argsort(h mx.Handle, axis int) mx.Handle {
	return marked("argsort", argsortKernel(tt(h), axis))
}

func (e *Engine) Argpartition(h mx.Handle, kth, axis int) mx.Handle {
	return marked("argpartition", argsortKernel(tt(h), axis))
}

func (e *Engine) Matmul(ha, hb mx.Handle) mx.Handle {
	a, b := tt(ha), tt(hb)
	return record(matmulKernel(a, b), "matmul", []*tensor{a, b}, matmulVJP(a, b))
}

func (e *Engine) Take(h, hi mx.Handle, axis int) mx.Handle {
	x, idx := tt(h), tt(hi)
	return record(takeKernel(x, idx, axis), "take", []*tensor{x, idx}, takeVJP(x, idx, axis))
}

func (e *Engine) TakeAlongAxis(h, hi mx.Handle, axis int) mx.Handle {
	x, idx := tt(h), tt(hi)
	return record(takeAlongKernel(x, idx, axis), "take_along_axis", []*tensor{x, idx}, takeAlongVJP(x, idx, axis))
}

func (e *Engine) RMSNorm(h, hw mx.Handle, eps float64) mx.Handle {
	x := tt(h)
	var w *tensor
	if hw != nil {
		w = tt(hw)
	}
	out, inv := rmsNormKernel(x, w, eps)
	return record(out, "rms_norm", []*tensor{x, w}, rmsNormVJP(x, w, inv))
}

func (e *Engine) RoPE(h mx.Handle, p mx.RoPEParams) mx.Handle {
	x := tt(h)
	var f *tensor
	if p.Freqs != nil {
		f = tt(p.Freqs)
	}
	return record(ropeKernel(e, x, p, f, 1), "rope", []*tensor{x, f}, ropeVJP(e, p, f))
}

func (e *Engine) StopGradient(h mx.Handle) mx.Handle { return untraced(tt(h)) }

// FromMapped implements mx.InPlaceLoader: on a little-endian machine, float32 and
// 32-bit integer tensors (and float16/bfloat16 bits) whose bytes are aligned for their
// element type are used in place, with no copy. The engine never writes into an
// array's elements, so the mapping's pages stay clean and shared with the page cache.
func (e *Engine) FromMapped(b []byte, shape []int, dt mx.DType) (mx.Handle, bool) {
	n := dims.Numel(shape)
	if !littleEndian || n == 0 || len(b) != n*dt.Size() {
		return nil, false
	}
	p := unsafe.Pointer(unsafe.SliceData(b))
	switch dt {
	case mx.Float32:
		if uintptr(p)%4 == 0 {
			return newTensor(shape, dt, unsafe.Slice((*float32)(p), n)), true
		}
	case mx.Uint32:
		if uintptr(p)%4 == 0 {
			return newTensor(shape, dt, unsafe.Slice((*uint32)(p), n)), true
		}
	case mx.Int32:
		if uintptr(p)%4 == 0 {
			return newTensor(shape, dt, unsafe.Slice((*int32)(p), n)), true
		}
	case mx.Float16, mx.BFloat16:
		if uintptr(p)%2 == 0 {
			return newTensor(shape, dt, unsafe.Slice((*uint16)(p), n)), true
		}
	}
	return nil, false
}

// littleEndian reports the host byte order (safetensors is little-endian).
var littleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// marked charges an op that records no graph node to the op profile (see OpProfile).
func marked(op string, t *tensor) *tensor {
	mark(op, t.shape)
	return t
}
