package shapeeng

import (
	"fmt"
	"math"
	"runtime"
	"slices"

	"github.com/dgtune/dgtune/mx/internal/dims"

	"github.com/dgtune/dgtune/mx"
)

// Retention says how long a recorded graph keeps the arrays it refers to.
type Retention int

const (
	// RetainGraph is the go engine: a traced op's node refers to its inputs and to what
	// its VJP keeps, and the backward walk holds every node it reaches until it ends.
	RetainGraph Retention = iota
	// RetainNeeded frees each array after the last op or VJP that reads it: what an
	// engine that frees eagerly would hold.
	RetainNeeded
)

func (r Retention) String() string {
	switch r {
	case RetainGraph:
		return "graph"
	case RetainNeeded:
		return "needed"
	}
	return fmt.Sprintf("Retention(%d)", int(r))
}

// Options configure an Engine.
type Options struct {
	Retention Retention
	// Threads is the go engine's GOMAXPROCS, the number of workers whose packing buffers
	// its products keep (0: this process's GOMAXPROCS).
	Threads int
}

// Engine is the shape-only engine. Its clock advances by one for every op and every VJP
// of a backward pass; each array records when it was made and when it was last read, and
// Usage turns that into the live bytes at any time. It is not safe for concurrent use.
type Engine struct {
	retention Retention
	threads   int
	clock     int
	arrays    []*array
	scratch   []scratchUse
	pool      packingPool
}

// New returns an engine configured by o.
func New(o Options) *Engine {
	if o.Threads <= 0 {
		o.Threads = runtime.GOMAXPROCS(0)
	}
	return &Engine{retention: o.Retention, threads: o.Threads}
}

// buffer is one allocation: the elements of one or more arrays (views share it).
type buffer struct {
	bytes  int64
	mapped bool // a checkpoint's pages used in place, outside Go's heap
	born   int
	label  string
	death  int // computed by settle
}

// swapView is a pending transpose of the last two axes of src (goeng's swapView): its
// elements are made (mat) the first time an op reads them other than as a product's
// operand.
type swapView struct {
	src *array
	mat *buffer
}

// array is the engine's handle.
type array struct {
	id    int
	shape []int
	dt    mx.DType
	buf   *buffer   // the elements; nil for a pending swap and a checkpoint's hub
	sv    *swapView // set for a pending swap (and its aliases)
	born  int
	last  int // the last time an op or VJP read it
	// pinned arrays live to the end (Keep); release > 0 drops the array then, whatever
	// refers to it (goeng clears the attention's kept probabilities after their VJP).
	pinned  bool
	release int
	// holders refer to this array: while one lives, so does this one.
	holders []*array
	node    *node
}

// scratchUse is memory an op holds only while it runs.
type scratchUse struct {
	time  int
	bytes int64
	label string
}

func h(x mx.Handle) *array {
	a, ok := x.(*array)
	if !ok {
		panic(fmt.Sprintf("shapeeng: foreign handle %T", x))
	}
	return a
}

func (a *array) size() int { return dims.Numel(a.shape) }

// bytes is the size of a's elements in its dtype.
func (a *array) bytes() int64 { return int64(a.size()) * int64(a.dt.Size()) }

// tick starts an op (or a VJP) and returns its time.
func (e *Engine) tick() int {
	e.clock++
	return e.clock
}

// newArray registers an array made now over buf.
func (e *Engine) newArray(shape []int, dt mx.DType, buf *buffer) *array {
	a := &array{id: len(e.arrays), shape: slices.Clone(shape), dt: dt, buf: buf, born: e.clock, last: e.clock}
	e.arrays = append(e.arrays, a)
	return a
}

// fresh is a new array of shape and dtype with elements of its own, labelled by the op
// that made it.
func (e *Engine) fresh(shape []int, dt mx.DType, label string) *array {
	b := &buffer{bytes: int64(dims.Numel(shape)) * int64(dt.Size()), born: e.clock, label: label}
	return e.newArray(shape, dt, b)
}

// alias is a new array sharing x's elements (and pending swap), without its node: goeng's
// tensor.alias.
func (e *Engine) alias(x *array) *array {
	a := e.newArray(x.shape, x.dt, x.buf)
	if x.sv != nil {
		a.sv = x.sv
		e.hold(a, x.sv.src)
	}
	return a
}

// reshaped is a new array of shape over x's elements, which a pending swap makes first
// (goeng's reshape reads them).
func (e *Engine) reshaped(x *array, shape []int) *array {
	return e.newArray(shape, x.dt, e.data(x))
}

// data returns the buffer holding x's elements, making a pending swap's.
func (e *Engine) data(x *array) *buffer {
	if x.sv == nil {
		return x.buf
	}
	if x.sv.mat == nil {
		x.sv.mat = &buffer{bytes: x.bytes(), born: e.clock, label: "transpose"}
	}
	return x.sv.mat
}

// hold makes holder refer to x.
func (e *Engine) hold(holder, x *array) {
	if x != nil && x != holder {
		x.holders = append(x.holders, holder)
	}
}

// use marks arrays read now.
func (e *Engine) use(xs ...*array) {
	for _, x := range xs {
		if x != nil {
			x.last = e.clock
		}
	}
}

// read marks arrays read now through their elements, making pending swaps'.
func (e *Engine) read(xs ...*array) {
	for _, x := range xs {
		if x != nil {
			x.last = e.clock
			e.data(x)
		}
	}
}

// temp counts bytes of scratch held during the current op.
func (e *Engine) temp(bytes int64, label string) {
	if bytes > 0 {
		e.scratch = append(e.scratch, scratchUse{time: e.clock, bytes: bytes, label: label})
	}
}

// asF32 counts the float32 copy goeng's tensor.f32 makes of an array of another dtype.
func (e *Engine) asF32(label string, xs ...*array) {
	for _, x := range xs {
		if x != nil && x.dt != mx.Float32 {
			e.temp(int64(x.size())*4, label)
		}
	}
}

// Keep makes arrays live to the end under label (a model's weights, adapter parameters,
// optimizer state: what a caller holds for the whole run).
func (e *Engine) Keep(label string, arrays ...*mx.Array) {
	for _, x := range arrays {
		if x == nil {
			continue
		}
		a := h(x.Handle())
		a.pinned = true
		if b := a.buf; b != nil {
			b.label = label
		}
	}
}

// Loaded makes an array read from a checkpoint, kept to the end under label: mapped,
// its elements are the file's pages used in place, outside Go's heap (what goeng's
// FromMapped makes of a tensor it can use in place); otherwise a heap copy.
func (e *Engine) Loaded(label string, shape []int, dt mx.DType, mapped bool) *mx.Array {
	e.tick()
	a := e.fresh(shape, dt, label)
	a.buf.mapped = mapped
	a.pinned = true
	return mx.Wrap(e, a)
}

// Label names the buffers of arrays in the usage breakdown (the gradients a step
// returns, say) without changing how long they live.
func (e *Engine) Label(label string, arrays ...*mx.Array) {
	for _, x := range arrays {
		if x == nil {
			continue
		}
		a := h(x.Handle())
		for _, b := range []*buffer{a.buf, a.matBuf()} {
			if b != nil {
				b.label = label
			}
		}
	}
}

// Now is the time of the last op.
func (e *Engine) Now() int { return e.clock }

// Name implements mx.Engine.
func (e *Engine) Name() string { return "shape" }

// FromSlice implements mx.Engine: goeng copies the data, then casts it.
func (e *Engine) FromSlice(data any, shape []int, dt mx.DType) mx.Handle {
	e.tick()
	return e.fresh(shape, dt, "input")
}

// FromBytes implements mx.Engine.
func (e *Engine) FromBytes(b []byte, shape []int, dt mx.DType) mx.Handle {
	e.tick()
	return e.fresh(shape, dt, "input")
}

// Full implements mx.Engine: goeng fills float32 (or int64) values and converts them.
func (e *Engine) Full(shape []int, value float64, dt mx.DType) mx.Handle {
	e.tick()
	e.convertTemp(shape, dt, "full")
	return e.fresh(shape, dt, "full")
}

// convertTemp counts the float32 (or int64) values goeng computes before converting them
// to a result of dtype dt.
func (e *Engine) convertTemp(shape []int, dt mx.DType, label string) {
	switch {
	case dt == mx.Float32:
	case dt.IsFloat():
		e.temp(int64(dims.Numel(shape))*4, label)
	case dt != mx.Int64:
		e.temp(int64(dims.Numel(shape))*8, label)
	}
}

// Arange implements mx.Engine.
func (e *Engine) Arange(start, stop, step float64, dt mx.DType) mx.Handle {
	e.tick()
	n := max(int(math.Ceil((stop-start)/step)), 0) // goeng's count
	e.convertTemp([]int{n}, dt, "arange")
	return e.fresh([]int{n}, dt, "arange")
}

// Shape implements mx.Engine.
func (e *Engine) Shape(x mx.Handle) []int { return h(x).shape }

// DType implements mx.Engine.
func (e *Engine) DType(x mx.Handle) mx.DType { return h(x).dt }

// ToSlice implements mx.Engine: zeros of the dtype's Go type (the values are never
// computed), after the copy goeng hands out.
func (e *Engine) ToSlice(x mx.Handle) any {
	e.tick()
	a := h(x)
	e.read(a)
	e.temp(a.bytes(), "host copy")
	n := a.size()
	switch a.dt {
	case mx.Float32:
		return make([]float32, n)
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
	panic(fmt.Sprintf("shapeeng: ToSlice of dtype %s", a.dt))
}

// ValueFree implements mx.ValueFree: host-side values (an attention mask) need not be
// computed for this engine.
func (e *Engine) ValueFree() {}

// Eval, Free and the scopes are no-ops, as on the go engine, whose arrays live while
// something refers to them.
func (e *Engine) Eval(...mx.Handle)    {}
func (e *Engine) Free(mx.Handle)       {}
func (e *Engine) PushScope()           {}
func (e *Engine) PopScope([]mx.Handle) {}
