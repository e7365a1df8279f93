package mx

import (
	"fmt"
	"sort"
	"strings"
	"sync"
)

// Handle is an engine's own reference to an array. Only the engine that made it
// understands it.
type Handle any

// UnaryOp names an elementwise op of one argument.
type UnaryOp int

// The unary ops.
const (
	OpNegative UnaryOp = iota
	OpExp
	OpLog
	OpSqrt
	OpRsqrt
	OpTanh
	OpSigmoid
	OpAbs
	OpSquare
	OpSin
	OpCos
	OpLogicalNot
	OpFloor
	OpErf
	OpLog1p
	OpReciprocal
	OpIsNaN
	OpIsInf
	OpSign
	// OpGELUTanh is 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), one op so training
	// records one tape node and one temporary instead of eight.
	OpGELUTanh
)

var unaryNames = [...]string{"negative", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "abs", "square", "sin", "cos", "logical_not", "floor", "erf", "log1p", "reciprocal", "isnan", "isinf", "sign", "gelu_tanh"}

func (op UnaryOp) String() string { return unaryNames[op] }

// BinaryOp names an elementwise op of two broadcast arguments.
type BinaryOp int

// The binary ops. Comparisons return Bool.
const (
	OpAdd BinaryOp = iota
	OpSubtract
	OpMultiply
	OpDivide
	OpMaximum
	OpMinimum
	OpPower
	OpEqual
	OpNotEqual
	OpLess
	OpLessEqual
	OpGreater
	OpGreaterEqual
	OpLogicalAnd
	OpLogicalOr
	OpRemainder
	OpFloorDivide
)

var binaryNames = [...]string{"add", "subtract", "multiply", "divide", "maximum", "minimum", "power", "equal", "not_equal", "less", "less_equal", "greater", "greater_equal", "logical_and", "logical_or", "remainder", "floor_divide"}

func (op BinaryOp) String() string { return binaryNames[op] }

// IsComparison reports whether op returns Bool.
func (op BinaryOp) IsComparison() bool {
	return op >= OpEqual && op <= OpLogicalOr
}

// ReduceOp names a reduction.
type ReduceOp int

// The reductions.
const (
	ReduceSum ReduceOp = iota
	ReduceMax
	ReduceMin
	ReduceProd
	ReduceLogSumExp
	ReduceAll
	ReduceAny
)

var reduceNames = [...]string{"sum", "max", "min", "prod", "logsumexp", "all", "any"}

func (op ReduceOp) String() string { return reduceNames[op] }

// QuantParams describes MLX affine quantization of the last axis of a weight.
type QuantParams struct {
	GroupSize int
	Bits      int
}

// RoPEParams configures RoPE in MLX's fast.rope form. Exactly one of Base (>0) and
// Freqs (non-nil, shape [Dims/2]) sets the frequencies: with Freqs, pair i rotates by
// position / Freqs[i] (MLX's convention, so +Inf means "do not rotate").
type RoPEParams struct {
	Dims        int
	Traditional bool
	Base        float64
	Scale       float64
	Offset      int
	Freqs       Handle
}

// Engine is what an array engine implements. Callers use the functions of package mx,
// never these methods; an engine may assume inputs were checked by mx (ranks, axes
// normalised to non-negative values, dtypes as documented on the mx function).
type Engine interface {
	Name() string

	// Creation and introspection.
	FromSlice(data any, shape []int, dt DType) Handle // data: []float32, []float64, []int32, []int64, []uint32, []uint8, []bool, or []uint16 raw bits for float16/bfloat16
	FromBytes(b []byte, shape []int, dt DType) Handle // little-endian raw elements, copied or mapped
	Full(shape []int, value float64, dt DType) Handle
	Arange(start, stop, step float64, dt DType) Handle
	Shape(h Handle) []int
	DType(h Handle) DType
	ToSlice(h Handle) any // evaluates; returns a fresh Go slice of the dtype's Go type ([]uint16 for half types)
	Eval(hs ...Handle)
	Free(h Handle)
	PushScope()
	PopScope(keep []Handle)

	// Elementwise.
	Unary(op UnaryOp, x Handle) Handle
	Binary(op BinaryOp, a, b Handle) Handle
	Where(cond, a, b Handle) Handle
	AsType(x Handle, dt DType) Handle

	// Shapes.
	Reshape(x Handle, shape []int) Handle
	Transpose(x Handle, axes []int) Handle
	BroadcastTo(x Handle, shape []int) Handle
	Slice(x Handle, start, stop, strides []int) Handle
	SliceUpdate(x, update Handle, start, stop, strides []int) Handle
	Concatenate(xs []Handle, axis int) Handle

	// Reductions and scans.
	Reduce(op ReduceOp, x Handle, axes []int, keepDims bool) Handle
	Argmax(x Handle, axis int, keepDims bool) Handle
	Argmin(x Handle, axis int, keepDims bool) Handle
	Softmax(x Handle, axis int) Handle
	Cumsum(x Handle, axis int, reverse, inclusive bool) Handle
	Cummax(x Handle, axis int, reverse, inclusive bool) Handle
	Argsort(x Handle, axis int) Handle
	Argpartition(x Handle, kth, axis int) Handle

	// Linear algebra and indexing.
	Matmul(a, b Handle) Handle
	AddMM(c, a, b Handle, alpha, beta float64) Handle // beta·c + alpha·(a·b)
	Take(x, indices Handle, axis int) Handle
	TakeAlongAxis(x, indices Handle, axis int) Handle

	// Fast ops.
	RMSNorm(x, weight Handle, eps float64) Handle // weight may be nil
	RoPE(x Handle, p RoPEParams) Handle
	ScaledDotProductAttention(q, k, v Handle, scale float64, mask Handle) Handle // mask may be nil
	GeGLU(gate, up Handle) Handle                                                // gelu_tanh(gate)·up, same shapes

	// Quantization.
	Quantize(w Handle, p QuantParams) (wq, scales, biases Handle)
	Dequantize(wq, scales, biases Handle, p QuantParams) Handle
	QuantizedMatmul(x, wq, scales, biases Handle, transpose bool, p QuantParams) Handle
	GatherQMM(x, wq, scales, biases, rhsIndices Handle, transpose bool, p QuantParams, sortedIndices bool) Handle
	// GatherMM is gather_mm with one row of x per index: x [..., K], w [E, K, N].
	GatherMM(x, w, rhsIndices Handle, sortedIndices bool) Handle

	// Random numbers from explicit keys (MLX threefry semantics).
	Key(seed uint64) Handle
	SplitKey(key Handle, num int) Handle
	RandomBits(key Handle, shape []int) Handle
	Uniform(key Handle, shape []int, low, high float64, dt DType) Handle
	Randint(key Handle, shape []int, low, high int64, dt DType) Handle
	Normal(key Handle, shape []int, dt DType) Handle
	Categorical(key Handle, logits Handle, axis int) Handle

	// Autodiff.
	StopGradient(x Handle) Handle
	ValueAndGrad(f func(args []Handle) []Handle, args []Handle, argnums []int) (values, grads []Handle)
	// GradCheckpoint returns f(args) without keeping f's intermediate arrays for the
	// backward: a gradient through the outputs runs f again. f must be pure in args.
	GradCheckpoint(f func(args []Handle) []Handle, args []Handle) []Handle
}

// registry of engines compiled into the binary; written only from init functions.
var registry = struct {
	sync.Mutex
	factories map[string]func() (Engine, error)
	order     []string
}{factories: map[string]func() (Engine, error){}}

// Register makes an engine available to Open. Engines call it from init.
// The order of registration sets the preference of "auto": later registrations win.
func Register(name string, factory func() (Engine, error)) {
	registry.Lock()
	defer registry.Unlock()
	if _, dup := registry.factories[name]; dup {
		panic("mx: engine registered twice: " + name)
	}
	registry.factories[name] = factory
	registry.order = append(registry.order, name)
}

// Engines lists the names of the engines compiled in, sorted.
func Engines() []string {
	registry.Lock()
	defer registry.Unlock()
	names := make([]string, 0, len(registry.factories))
	for n := range registry.factories {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Open returns the named engine. "auto" (or "") picks mlx when it is compiled in,
// else go.
func Open(name string) (Engine, error) {
	registry.Lock()
	defer registry.Unlock()
	if name == "" || name == "auto" {
		if len(registry.order) == 0 {
			return nil, fmt.Errorf("mx: no engine compiled in (import github.com/dgtune/dgtune/mx/engines)")
		}
		pick := registry.order[0]
		if _, ok := registry.factories["mlx"]; ok {
			pick = "mlx"
		}
		return registry.factories[pick]()
	}
	f, ok := registry.factories[name]
	if !ok {
		names := make([]string, 0, len(registry.factories))
		for n := range registry.factories {
			names = append(names, n)
		}
		sort.Strings(names)
		hint := ""
		if name == "mlx" {
			hint = " (build with -tags mlx and mlx-c installed; see README)"
		}
		return nil, fmt.Errorf("mx: unknown engine %q%s; compiled in: %s", name, hint, strings.Join(names, ", "))
	}
	return f()
}
