//go:build mlx

package mlxeng_test

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/dgtune/dgtune/mx"
)

// Tolerances of the parity table, relative to max(1, |go value|).
const (
	// exact: data movement, integer ops, comparisons, and float ops both engines round
	// correctly (add, multiply, divide, sqrt, casts).
	exact = 0
	// libm: MLX's CPU kernels use their own vectorised exp/log/tanh/erf/sin
	// polynomials; they agree with Go's libm to a few float32 ulps.
	libm = 4e-6
	// sums: reductions and matmuls accumulate in a different order (and MLX in
	// float32 where the go engine uses float64).
	sums = 2e-5
	// half: results stored in bfloat16/float16 may land one ulp apart (2⁻⁸ relative for
	// bfloat16) when the float32 values before rounding differ in the last bits.
	half = 8e-3
	// bf16Accum: MLX's CPU quantized matmul accumulates in the activation dtype
	// (mlx/backend/cpu/quantized.cpp, _qmm_t: "T sum"), so with bfloat16 activations
	// each of the K additions rounds to 8 bits; the go engine accumulates in float32.
	bf16Accum = 5e-2
	// fusedMultiplyAdd: MLX-CUDA's dequantize computes q·scale + bias with one rounding
	// (nvcc contracts it to an FMA), MLX's CPU and the go engine with two: one float32 ulp
	// apart (2⁻²³ relative; seen on the H200 in about half of the values). The engine's
	// own kernel (dequant_kernel.go), which takes 4 and 8 bits, rounds twice: exact.
	fusedMultiplyAdd = 1.2e-7
)

// gpuTolerance is a case's tolerance on a GPU, where some kernels round differently
// from MLX's CPU, which the go engine follows.
func gpuTolerance(c parityCase) float64 {
	if strings.HasPrefix(c.name, "dequantize/") && !strings.HasPrefix(c.name, "dequantize/bits=4 ") && !strings.HasPrefix(c.name, "dequantize/bits=8 ") {
		return max(c.tol, fusedMultiplyAdd)
	}
	return c.tol
}

// parityCase is one row of the table: run builds the results from inputs made in Go, so
// both engines compute from identical data.
type parityCase struct {
	name string
	tol  float64
	run  func(e mx.Engine) []*mx.Array
}

func one(f func(e mx.Engine) *mx.Array) func(e mx.Engine) []*mx.Array {
	return func(e mx.Engine) []*mx.Array { return []*mx.Array{f(e)} }
}

// pos is a float32 array with values in [0.1, 2.1): the domain of log, sqrt, rsqrt.
func pos(e mx.Engine, seed uint64, shape ...int) *mx.Array {
	return mx.FromFloat32(e, floats(seed, numel(shape), 0.1, 2.1), shape...)
}

func bf16(e mx.Engine, seed uint64, shape ...int) *mx.Array {
	return mx.AsType(rf(e, seed, shape...), mx.BFloat16)
}

func bools(e mx.Engine, seed uint64, shape ...int) *mx.Array {
	return mx.Greater(rf(e, seed, shape...), mx.Scalar(e, 0, mx.Float32))
}

func creationCases() []parityCase {
	return []parityCase{
		{"from_slice/float32", exact, one(func(e mx.Engine) *mx.Array { return rf(e, 1, 2, 3) })},
		{"from_slice/float64", exact, one(func(e mx.Engine) *mx.Array {
			return mx.FromSlice(e, []float64{0.1, -2.5, 1e-40, 3e38}, []int{4}, mx.Float64)
		})},
		{"from_slice/float64→float32", exact, one(func(e mx.Engine) *mx.Array {
			return mx.FromSlice(e, []float64{0.1, -2.5, 1e-40, 3e38}, []int{2, 2}, mx.Float32)
		})},
		{"from_slice/float32→bfloat16", exact, one(func(e mx.Engine) *mx.Array {
			return mx.FromSlice(e, []float32{1, 1.00390625, 1.005859375, -3.3, 65504, 1e-3}, []int{6}, mx.BFloat16)
		})},
		{"from_slice/float32→float16", exact, one(func(e mx.Engine) *mx.Array {
			return mx.FromSlice(e, []float32{1, 1.0009765625, 1.00146484375, -3.3, 65504, 1e-3}, []int{6}, mx.Float16)
		})},
		{"from_slice/uint16 bits", exact, one(func(e mx.Engine) *mx.Array {
			return mx.FromSlice(e, []uint16{0x3f80, 0xbf80, 0x7f80, 0x0001}, []int{4}, mx.BFloat16)
		})},
		{"from_slice/int32", exact, one(func(e mx.Engine) *mx.Array { return ri(e, 2, -50, 50, 3, 2) })},
		{"from_slice/int64", exact, one(func(e mx.Engine) *mx.Array {
			return mx.FromSlice(e, []int64{1 << 40, -3, 7}, []int{3}, mx.Int64)
		})},
		{"from_slice/uint32", exact, one(func(e mx.Engine) *mx.Array {
			return mx.FromSlice(e, []uint32{0, 1, math.MaxUint32}, []int{3}, mx.Uint32)
		})},
		{"from_slice/uint8", exact, one(func(e mx.Engine) *mx.Array {
			return mx.FromSlice(e, []uint8{0, 255, 17}, []int{3}, mx.Uint8)
		})},
		{"from_slice/bool", exact, one(func(e mx.Engine) *mx.Array {
			return mx.FromBool(e, []bool{true, false, true, true}, 2, 2)
		})},
		{"from_slice/int32→float32", exact, one(func(e mx.Engine) *mx.Array {
			return mx.FromSlice(e, []int32{-7, 0, 16777217}, []int{3}, mx.Float32)
		})},
		{"from_slice/empty", exact, one(func(e mx.Engine) *mx.Array { return mx.FromFloat32(e, nil, 0, 3) })},
		{"from_bytes/float32", exact, one(func(e mx.Engine) *mx.Array {
			// 1.0f = 00 00 80 3f, -2.0f = 00 00 00 c0 (little-endian).
			return mx.FromBytes(e, []byte{0, 0, 0x80, 0x3f, 0, 0, 0, 0xc0}, []int{2}, mx.Float32)
		})},
		{"from_bytes/bfloat16", exact, one(func(e mx.Engine) *mx.Array {
			return mx.FromBytes(e, []byte{0x80, 0x3f, 0x40, 0xc0}, []int{2}, mx.BFloat16)
		})},
		{"from_bytes/bool", exact, one(func(e mx.Engine) *mx.Array {
			return mx.FromBytes(e, []byte{0, 1, 7, 0}, []int{4}, mx.Bool)
		})},
		{"full/float32", exact, one(func(e mx.Engine) *mx.Array { return mx.Full(e, []int{2, 3}, 0.1, mx.Float32) })},
		{"full/bfloat16", exact, one(func(e mx.Engine) *mx.Array { return mx.Full(e, []int{3}, 0.1, mx.BFloat16) })},
		{"full/float64", exact, one(func(e mx.Engine) *mx.Array { return mx.Full(e, []int{3}, 0.1, mx.Float64) })},
		{"full/int32", exact, one(func(e mx.Engine) *mx.Array { return mx.Full(e, []int{2}, -7.9, mx.Int32) })},
		{"full/uint32", exact, one(func(e mx.Engine) *mx.Array { return mx.Full(e, []int{2}, 4e9, mx.Uint32) })},
		{"full/bool", exact, one(func(e mx.Engine) *mx.Array { return mx.Full(e, []int{2}, 2, mx.Bool) })},
		{"full/scalar", exact, one(func(e mx.Engine) *mx.Array { return mx.Scalar(e, -3.5, mx.Float32) })},
		{"arange/int32", exact, one(func(e mx.Engine) *mx.Array { return mx.Arange(e, 3, 20, 4, mx.Int32) })},
		{"arange/float32", exact, one(func(e mx.Engine) *mx.Array { return mx.Arange(e, -1, 2, 0.5, mx.Float32) })},
		{"arange/float32 inexact step", libm, one(func(e mx.Engine) *mx.Array { return mx.Arange(e, 0, 1, 0.1, mx.Float32) })},
		{"arange/empty", exact, one(func(e mx.Engine) *mx.Array { return mx.Arange(e, 5, 1, 1, mx.Int32) })},
	}
}

func unaryCases() []parityCase {
	ops := []struct {
		op  mx.UnaryOp
		f   func(*mx.Array) *mx.Array
		tol float64
		pos bool // domain is x > 0
	}{
		{mx.OpNegative, mx.Negative, exact, false},
		{mx.OpExp, mx.Exp, libm, false},
		{mx.OpLog, mx.Log, libm, true},
		{mx.OpSqrt, mx.Sqrt, exact, true},
		{mx.OpRsqrt, mx.Rsqrt, libm, true},
		{mx.OpTanh, mx.Tanh, libm, false},
		{mx.OpSigmoid, mx.Sigmoid, libm, false},
		{mx.OpAbs, mx.Abs, exact, false},
		{mx.OpSquare, mx.Square, exact, false},
		{mx.OpSin, mx.Sin, libm, false},
		{mx.OpCos, mx.Cos, libm, false},
		{mx.OpLogicalNot, mx.LogicalNot, exact, false},
		{mx.OpFloor, mx.Floor, exact, false},
		{mx.OpErf, mx.Erf, libm, false},
		{mx.OpLog1p, mx.Log1p, libm, true},
		{mx.OpReciprocal, mx.Reciprocal, exact, true},
		{mx.OpIsNaN, mx.IsNaN, exact, false},
		{mx.OpIsInf, mx.IsInf, exact, false},
		{mx.OpSign, mx.Sign, exact, false},
		// MLX composes eight ops (in bf16, rounding after each); the go engine fuses them
		// in float64.
		{mx.OpGELUTanh, mx.GELUTanh, libm, false},
	}
	var cases []parityCase
	for _, o := range ops {
		cases = append(cases,
			parityCase{o.op.String() + "/float32", o.tol, one(func(e mx.Engine) *mx.Array {
				x := mx.MulScalar(rf(e, 11, 3, 5), 3)
				if o.pos {
					x = pos(e, 11, 3, 5)
				}
				return o.f(x)
			})},
			parityCase{o.op.String() + "/bfloat16", half, one(func(e mx.Engine) *mx.Array {
				x := mx.MulScalar(bf16(e, 12, 4, 3), 2)
				if o.pos {
					x = mx.AsType(pos(e, 12, 4, 3), mx.BFloat16)
				}
				return o.f(x)
			})},
			parityCase{o.op.String() + "/int32", o.tol, one(func(e mx.Engine) *mx.Array {
				x := ri(e, 13, -4, 5, 2, 5)
				if o.pos {
					x = ri(e, 13, 1, 9, 2, 5)
				}
				return o.f(x)
			})},
			parityCase{o.op.String() + "/bool", o.tol, one(func(e mx.Engine) *mx.Array {
				x := bools(e, 14, 6)
				if o.pos {
					x = mx.FromBool(e, []bool{true, true, true}, 3)
				}
				return o.f(x)
			})},
		)
	}
	specials := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 0, -0.5, 2.5}
	cases = append(cases,
		parityCase{"isnan/specials", exact, one(func(e mx.Engine) *mx.Array { return mx.IsNaN(mx.FromFloat32(e, specials, 6)) })},
		parityCase{"isinf/specials", exact, one(func(e mx.Engine) *mx.Array { return mx.IsInf(mx.FromFloat32(e, specials, 6)) })},
		parityCase{"floor/specials", exact, one(func(e mx.Engine) *mx.Array { return mx.Floor(mx.FromFloat32(e, specials, 6)) })},
		parityCase{"sign/specials", exact, one(func(e mx.Engine) *mx.Array { return mx.Sign(mx.FromFloat32(e, specials, 6)) })},
		parityCase{"gelu_tanh", libm, one(func(e mx.Engine) *mx.Array { return mx.GELUTanh(mx.MulScalar(rf(e, 15, 4, 4), 4)) })},
	)
	return cases
}

func binaryCases() []parityCase {
	ops := []struct {
		op  mx.BinaryOp
		f   func(a, b *mx.Array) *mx.Array
		tol float64
	}{
		{mx.OpAdd, mx.Add, exact},
		{mx.OpSubtract, mx.Subtract, exact},
		{mx.OpMultiply, mx.Multiply, exact},
		{mx.OpDivide, mx.Divide, exact},
		{mx.OpMaximum, mx.Maximum, exact},
		{mx.OpMinimum, mx.Minimum, exact},
		{mx.OpPower, mx.Power, libm},
		{mx.OpEqual, mx.Equal, exact},
		{mx.OpNotEqual, mx.NotEqual, exact},
		{mx.OpLess, mx.Less, exact},
		{mx.OpLessEqual, mx.LessEqual, exact},
		{mx.OpGreater, mx.Greater, exact},
		{mx.OpGreaterEqual, mx.GreaterEqual, exact},
		{mx.OpLogicalAnd, mx.LogicalAnd, exact},
		{mx.OpLogicalOr, mx.LogicalOr, exact},
		{mx.OpRemainder, mx.Remainder, libm},
		{mx.OpFloorDivide, mx.FloorDivide, exact},
	}
	var cases []parityCase
	for _, o := range ops {
		cases = append(cases,
			// Broadcast [3,1] against [4]; power needs a positive base.
			parityCase{o.op.String() + "/float32", o.tol, one(func(e mx.Engine) *mx.Array {
				a := mx.MulScalar(rf(e, 21, 3, 1), 3)
				if o.op == mx.OpPower {
					a = pos(e, 21, 3, 1)
				}
				return o.f(a, mx.MulScalar(rf(e, 22, 4), 2))
			})},
			parityCase{o.op.String() + "/bfloat16×float32", half, one(func(e mx.Engine) *mx.Array {
				a := mx.MulScalar(bf16(e, 23, 2, 3), 3)
				if o.op == mx.OpPower {
					a = mx.AsType(pos(e, 23, 2, 3), mx.BFloat16)
				}
				return o.f(a, mx.AddScalar(rf(e, 24, 3), 1.5))
			})},
			// Integer operands include zero divisors and negative values.
			parityCase{o.op.String() + "/int32", exact, one(func(e mx.Engine) *mx.Array {
				b := ri(e, 26, -3, 4, 4)
				if o.op == mx.OpPower {
					b = ri(e, 26, 0, 4, 4)
				}
				return o.f(ri(e, 25, -20, 20, 3, 4), b)
			})},
			parityCase{o.op.String() + "/int32×float32", o.tol, one(func(e mx.Engine) *mx.Array {
				a := ri(e, 27, -5, 6, 2, 3)
				if o.op == mx.OpPower {
					a = ri(e, 27, 1, 6, 2, 3)
				}
				return o.f(a, mx.AddScalar(rf(e, 28, 2, 3), 1.5))
			})},
			parityCase{o.op.String() + "/bool", exact, one(func(e mx.Engine) *mx.Array {
				if o.op == mx.OpDivide || o.op == mx.OpRemainder || o.op == mx.OpFloorDivide || o.op == mx.OpPower {
					return o.f(bools(e, 29, 5), mx.FromBool(e, []bool{true}, 1))
				}
				return o.f(bools(e, 29, 5), bools(e, 30, 5))
			})},
		)
	}
	cases = append(cases,
		parityCase{"add/int32×uint32→int64", exact, one(func(e mx.Engine) *mx.Array {
			return mx.Add(ri(e, 31, -9, 9, 3), mx.FromSlice(e, []uint32{1, 2, 4000000000}, []int{3}, mx.Uint32))
		})},
		parityCase{"maximum/nan", exact, one(func(e mx.Engine) *mx.Array {
			n := float32(math.NaN())
			return mx.Maximum(mx.FromFloat32(e, []float32{n, 1, 2}, 3), mx.FromFloat32(e, []float32{0, n, 1}, 3))
		})},
		parityCase{"remainder/float signs", libm, one(func(e mx.Engine) *mx.Array {
			// Python's rule: the result takes the divisor's sign: 7 % -3 = -2, -7 % 3 = 2.
			return mx.Remainder(mx.FromFloat32(e, []float32{7, -7, 7.5, -7.5}, 4), mx.FromFloat32(e, []float32{-3, 3, 2, 2}, 4))
		})},
		parityCase{"add_scalar/bfloat16", exact, one(func(e mx.Engine) *mx.Array { return mx.MulScalar(bf16(e, 32, 5), 53.066) })},
		parityCase{"where/float32", exact, one(func(e mx.Engine) *mx.Array {
			return mx.Where(bools(e, 33, 3, 1), rf(e, 34, 3, 4), rf(e, 35, 4))
		})},
		parityCase{"where/mixed dtypes", exact, one(func(e mx.Engine) *mx.Array {
			return mx.Where(bools(e, 36, 4), ri(e, 37, -9, 9, 4), bf16(e, 38, 4))
		})},
		parityCase{"where/int cond", exact, one(func(e mx.Engine) *mx.Array {
			return mx.Where(ri(e, 39, 0, 2, 5), ri(e, 40, 0, 9, 5), ri(e, 41, 10, 19, 5))
		})},
	)
	return cases
}

func castCases() []parityCase {
	src := []float32{-2.75, -1.5, -0.5, 0, 0.3, 1.5, 2.5, 100.7, 1e-30, float32(math.NaN())}
	var cases []parityCase
	for _, dt := range []mx.DType{mx.Float16, mx.BFloat16, mx.Float64, mx.Int32, mx.Int64, mx.Bool} {
		cases = append(cases, parityCase{"astype/float32→" + dt.String(), exact, one(func(e mx.Engine) *mx.Array {
			x := mx.FromFloat32(e, src, len(src))
			if !dt.IsFloat() {
				x = mx.FromFloat32(e, src[:len(src)-1], len(src)-1) // NaN → integer is undefined in C
			}
			return mx.AsType(x, dt)
		})})
	}
	for _, dt := range []mx.DType{mx.Float32, mx.BFloat16, mx.Uint8, mx.Uint32, mx.Bool} {
		cases = append(cases, parityCase{"astype/int32→" + dt.String(), exact, one(func(e mx.Engine) *mx.Array {
			return mx.AsType(ri(e, 42, 0, 300, 7), dt)
		})})
	}
	cases = append(cases,
		parityCase{"astype/bfloat16→float16", exact, one(func(e mx.Engine) *mx.Array { return mx.AsType(bf16(e, 43, 6), mx.Float16) })},
		parityCase{"astype/bool→float32", exact, one(func(e mx.Engine) *mx.Array { return mx.AsType(bools(e, 44, 6), mx.Float32) })},
	)
	return cases
}

func shapeCases() []parityCase {
	return []parityCase{
		{"reshape", exact, one(func(e mx.Engine) *mx.Array { return mx.Reshape(rf(e, 51, 2, 3, 4), 4, -1) })},
		{"reshape/of transpose", exact, one(func(e mx.Engine) *mx.Array {
			return mx.Reshape(mx.Transpose(rf(e, 52, 2, 3, 4), 2, 0, 1), 6, 4)
		})},
		{"transpose", exact, one(func(e mx.Engine) *mx.Array { return mx.Transpose(rf(e, 53, 2, 3, 4), 1, 2, 0) })},
		{"transpose/reverse", exact, one(func(e mx.Engine) *mx.Array { return mx.Transpose(ri(e, 54, 0, 9, 2, 3)) })},
		{"swapaxes", exact, one(func(e mx.Engine) *mx.Array { return mx.SwapAxes(bf16(e, 55, 2, 3, 2), 0, 2) })},
		{"broadcast_to", exact, one(func(e mx.Engine) *mx.Array { return mx.BroadcastTo(rf(e, 56, 3, 1), 2, 3, 4) })},
		{"expand/squeeze", exact, one(func(e mx.Engine) *mx.Array {
			return mx.Squeeze(mx.ExpandDims(rf(e, 57, 3, 1, 2), 0), 2)
		})},
		{"slice", exact, one(func(e mx.Engine) *mx.Array {
			return mx.Slice(rf(e, 58, 5, 6), []int{1, -5}, []int{5, 100}, []int{2, 3})
		})},
		{"slice/empty", exact, one(func(e mx.Engine) *mx.Array { return mx.SliceAxis(rf(e, 59, 4, 3), 0, 3, 1) })},
		{"slice_update", exact, one(func(e mx.Engine) *mx.Array {
			return mx.SliceUpdate(rf(e, 60, 4, 5), rf(e, 61, 2, 2), []int{0, 1}, []int{4, 5}, []int{2, 2})
		})},
		{"slice_update/cast", exact, one(func(e mx.Engine) *mx.Array {
			return mx.SliceUpdate(bf16(e, 62, 3, 3), rf(e, 63, 1, 3), []int{1, 0}, []int{2, 3}, nil)
		})},
		{"slice_update/of a view", exact, one(func(e mx.Engine) *mx.Array {
			x := mx.Transpose(ri(e, 64, 0, 99, 3, 4))
			return mx.SliceUpdate(x, ri(e, 65, 100, 200, 2, 3), []int{2, 0}, []int{4, 3}, nil)
		})},
		{"concatenate", exact, one(func(e mx.Engine) *mx.Array {
			return mx.Concatenate([]*mx.Array{rf(e, 66, 2, 3), rf(e, 67, 2, 1), mx.Transpose(rf(e, 68, 2, 2))}, -1)
		})},
		{"concatenate/int", exact, one(func(e mx.Engine) *mx.Array {
			return mx.Concatenate([]*mx.Array{ri(e, 69, 0, 9, 1, 3), ri(e, 70, 0, 9, 2, 3)}, 0)
		})},
		{"split", exact, func(e mx.Engine) []*mx.Array { return mx.Split(rf(e, 71, 2, 7), []int{2, 5}, 1) }},
		{"split_equal", exact, func(e mx.Engine) []*mx.Array { return mx.SplitEqual(rf(e, 72, 6, 2), 3, 0) }},
	}
}

func reductionCases() []parityCase {
	var cases []parityCase
	red := []struct {
		name string
		f    func(x *mx.Array, keep bool, axes ...int) *mx.Array
		tol  float64
	}{
		{"sum", mx.Sum, sums}, {"max", mx.Max, exact}, {"min", mx.Min, exact},
		{"prod", mx.Prod, sums}, {"logsumexp", mx.LogSumExp, sums}, {"mean", mx.Mean, sums},
	}
	for _, r := range red {
		cases = append(cases,
			parityCase{r.name + "/all", r.tol, one(func(e mx.Engine) *mx.Array { return r.f(rf(e, 81, 3, 4), false) })},
			parityCase{r.name + "/axis keepdims", r.tol, one(func(e mx.Engine) *mx.Array { return r.f(rf(e, 82, 3, 4, 5), true, -1) })},
			parityCase{r.name + "/two axes", r.tol, one(func(e mx.Engine) *mx.Array { return r.f(rf(e, 83, 3, 4, 5), false, 0, 2) })},
			parityCase{r.name + "/bfloat16", half, one(func(e mx.Engine) *mx.Array { return r.f(bf16(e, 84, 4, 6), false, 1) })},
			parityCase{r.name + "/int32", sums, one(func(e mx.Engine) *mx.Array { return r.f(ri(e, 85, -5, 6, 3, 4), false, 1) })},
			parityCase{r.name + "/bool", sums, one(func(e mx.Engine) *mx.Array { return r.f(bools(e, 86, 3, 4), false, 0) })},
		)
	}
	for _, name := range []string{"all", "any"} {
		f := mx.All
		if name == "any" {
			f = mx.Any
		}
		cases = append(cases,
			parityCase{name + "/bool", exact, one(func(e mx.Engine) *mx.Array { return f(bools(e, 87, 4, 3), false, 1) })},
			parityCase{name + "/float", exact, one(func(e mx.Engine) *mx.Array {
				return f(mx.FromFloat32(e, []float32{0, 1, 0, 0, 0, 0}, 2, 3), true, 1)
			})},
		)
	}
	cases = append(cases,
		parityCase{"argmax", exact, one(func(e mx.Engine) *mx.Array { return mx.Argmax(rf(e, 88, 3, 5), -1, false) })},
		parityCase{"argmax/keepdims axis0", exact, one(func(e mx.Engine) *mx.Array { return mx.Argmax(rf(e, 89, 3, 5), 0, true) })},
		parityCase{"argmax/ties first", exact, one(func(e mx.Engine) *mx.Array {
			return mx.Argmax(mx.FromFloat32(e, []float32{1, 3, 3, 0, 2, 2}, 2, 3), 1, false)
		})},
		parityCase{"argmin/int", exact, one(func(e mx.Engine) *mx.Array { return mx.Argmin(ri(e, 90, 0, 4, 4, 6), 1, false) })},
		parityCase{"softmax", libm, one(func(e mx.Engine) *mx.Array { return mx.Softmax(mx.MulScalar(rf(e, 91, 3, 7), 5), -1) })},
		parityCase{"softmax/axis0", libm, one(func(e mx.Engine) *mx.Array { return mx.Softmax(rf(e, 92, 3, 7), 0) })},
		parityCase{"softmax/bfloat16", half, one(func(e mx.Engine) *mx.Array { return mx.Softmax(bf16(e, 93, 2, 9), -1) })},
		parityCase{"softmax/-inf", libm, one(func(e mx.Engine) *mx.Array {
			n := float32(math.Inf(-1))
			return mx.Softmax(mx.FromFloat32(e, []float32{0, n, 1, n}, 1, 4), -1)
		})},
		parityCase{"softmax/int", libm, one(func(e mx.Engine) *mx.Array { return mx.Softmax(ri(e, 94, 0, 4, 5), 0) })},
	)
	for _, rev := range []bool{false, true} {
		for _, inc := range []bool{false, true} {
			sfx := fmt.Sprintf("/reverse=%v inclusive=%v", rev, inc)
			cases = append(cases,
				parityCase{"cumsum" + sfx, sums, one(func(e mx.Engine) *mx.Array { return mx.Cumsum(rf(e, 95, 3, 6), 1, rev, inc) })},
				parityCase{"cumsum/int" + sfx, exact, one(func(e mx.Engine) *mx.Array { return mx.Cumsum(ri(e, 96, -9, 9, 4, 3), 0, rev, inc) })},
				parityCase{"cumsum/bool" + sfx, exact, one(func(e mx.Engine) *mx.Array { return mx.Cumsum(bools(e, 97, 7), 0, rev, inc) })},
				parityCase{"cummax" + sfx, exact, one(func(e mx.Engine) *mx.Array { return mx.Cummax(rf(e, 98, 3, 6), 1, rev, inc) })},
				parityCase{"cummax/int" + sfx, exact, one(func(e mx.Engine) *mx.Array { return mx.Cummax(ri(e, 99, -9, 9, 8), 0, rev, inc) })},
			)
		}
	}
	cases = append(cases,
		parityCase{"argsort", exact, one(func(e mx.Engine) *mx.Array { return mx.Argsort(rf(e, 100, 4, 9), -1) })},
		parityCase{"argsort/axis0", exact, one(func(e mx.Engine) *mx.Array { return mx.Argsort(rf(e, 101, 6, 3), 0) })},
		parityCase{"argsort/stable ties", exact, one(func(e mx.Engine) *mx.Array {
			return mx.Argsort(mx.FromInt32(e, []int32{2, 1, 2, 0, 1, 2, 0}, 7), 0)
		})},
		parityCase{"argsort/nan last", exact, one(func(e mx.Engine) *mx.Array {
			return mx.Argsort(mx.FromFloat32(e, []float32{3, float32(math.NaN()), -1, 2}, 4), 0)
		})},
	)
	return cases
}

func linalgCases() []parityCase {
	return []parityCase{
		{"matmul", sums, one(func(e mx.Engine) *mx.Array { return mx.Matmul(rf(e, 111, 5, 7), rf(e, 112, 7, 3)) })},
		{"matmul/batched broadcast", sums, one(func(e mx.Engine) *mx.Array {
			return mx.Matmul(rf(e, 113, 2, 1, 4, 6), rf(e, 114, 3, 6, 5))
		})},
		{"matmul/vector", sums, one(func(e mx.Engine) *mx.Array { return mx.Matmul(rf(e, 115, 6), rf(e, 116, 6, 2)) })},
		{"matmul/transposed operand", sums, one(func(e mx.Engine) *mx.Array {
			return mx.Matmul(rf(e, 117, 4, 5), mx.Transpose(rf(e, 118, 3, 5)))
		})},
		{"matmul/int", exact, one(func(e mx.Engine) *mx.Array { return mx.Matmul(ri(e, 119, -3, 4, 3, 4), ri(e, 120, -3, 4, 4, 2)) })},
		{"matmul/bfloat16", half, one(func(e mx.Engine) *mx.Array { return mx.Matmul(bf16(e, 121, 3, 8), bf16(e, 122, 8, 4)) })},
		{"take", exact, one(func(e mx.Engine) *mx.Array { return mx.Take(rf(e, 123, 6, 3), ri(e, 124, 0, 6, 2, 4), 0) })},
		{"take/axis1 negative", exact, one(func(e mx.Engine) *mx.Array {
			return mx.Take(rf(e, 125, 2, 5, 3), mx.FromInt32(e, []int32{-1, 0, 4}, 3), 1)
		})},
		{"take/uint32 indices", exact, one(func(e mx.Engine) *mx.Array {
			return mx.Take(bf16(e, 126, 4, 2), mx.FromSlice(e, []uint32{3, 3, 0}, []int{3}, mx.Uint32), 0)
		})},
		{"take_along_axis", exact, one(func(e mx.Engine) *mx.Array {
			return mx.TakeAlongAxis(rf(e, 127, 3, 5), ri(e, 128, 0, 5, 3, 2), 1)
		})},
		{"take_along_axis/broadcast", exact, one(func(e mx.Engine) *mx.Array {
			return mx.TakeAlongAxis(rf(e, 129, 2, 3, 4), ri(e, 130, 0, 4, 1, 3, 1), 2)
		})},
	}
}

func fastCases() []parityCase {
	cases := []parityCase{
		{"rms_norm", libm, one(func(e mx.Engine) *mx.Array { return mx.RMSNorm(rf(e, 131, 2, 3, 8), rf(e, 132, 8), 1e-6) })},
		{"rms_norm/no weight", libm, one(func(e mx.Engine) *mx.Array { return mx.RMSNorm(rf(e, 133, 4, 16), nil, 1e-5) })},
		{"rms_norm/bfloat16", half, one(func(e mx.Engine) *mx.Array { return mx.RMSNorm(bf16(e, 134, 3, 8), bf16(e, 135, 8), 1e-6) })},
		{"rms_norm/bfloat16 x float32 weight", half, one(func(e mx.Engine) *mx.Array {
			return mx.RMSNorm(bf16(e, 136, 3, 8), rf(e, 137, 8), 1e-6)
		})},
		{"sdpa", libm, one(func(e mx.Engine) *mx.Array {
			return mx.ScaledDotProductAttention(rf(e, 138, 1, 2, 3, 4), rf(e, 139, 1, 2, 5, 4), rf(e, 140, 1, 2, 5, 4), 0.5, nil)
		})},
		{"sdpa/gqa mask", libm, one(func(e mx.Engine) *mx.Array {
			// 4 query heads over 2 kv heads; the mask keeps at least one key per row.
			m := mx.FromBool(e, []bool{true, false, true, true, false, false, true, false, true, true, true, false}, 1, 1, 3, 4)
			return mx.ScaledDotProductAttention(rf(e, 141, 2, 4, 3, 8), rf(e, 142, 2, 2, 4, 8), rf(e, 143, 2, 2, 4, 8), 0.35, m)
		})},
		{"sdpa/per-head mask", libm, one(func(e mx.Engine) *mx.Array {
			m := mx.Greater(rf(e, 144, 1, 4, 2, 3), mx.Scalar(e, -0.6, mx.Float32))
			m = mx.LogicalOr(m, mx.FromBool(e, []bool{true, false, false}, 1, 1, 1, 3))
			return mx.ScaledDotProductAttention(rf(e, 145, 1, 4, 2, 4), rf(e, 146, 1, 2, 3, 4), rf(e, 147, 1, 2, 3, 4), 1, m)
		})},
		{"sdpa/bfloat16", half, one(func(e mx.Engine) *mx.Array {
			return mx.ScaledDotProductAttention(bf16(e, 148, 1, 2, 3, 8), bf16(e, 149, 1, 2, 3, 8), bf16(e, 150, 1, 2, 3, 8), 0.35, nil)
		})},
	}
	for _, trad := range []bool{false, true} {
		cases = append(cases,
			parityCase{fmt.Sprintf("rope/base traditional=%v", trad), libm, one(func(e mx.Engine) *mx.Array {
				return mx.RoPE(rf(e, 151, 1, 2, 5, 8), 8, trad, 10000, 1, 3, nil)
			})},
			parityCase{fmt.Sprintf("rope/partial dims traditional=%v", trad), libm, one(func(e mx.Engine) *mx.Array {
				return mx.RoPE(rf(e, 152, 2, 4, 6), 4, trad, 500, 0.5, 0, nil)
			})},
			parityCase{fmt.Sprintf("rope/freqs with +Inf traditional=%v", trad), libm, one(func(e mx.Engine) *mx.Array {
				inf := float32(math.Inf(1))
				f := mx.FromFloat32(e, []float32{1, 3.5, 100, inf}, 4)
				return mx.RoPE(rf(e, 153, 1, 3, 4, 8), 8, trad, 0, 1, 7, f)
			})},
		)
	}
	cases = append(cases,
		parityCase{"rope/2-D input", libm, one(func(e mx.Engine) *mx.Array { return mx.RoPE(rf(e, 154, 5, 4), 4, false, 10000, 1, 2, nil) })},
		parityCase{"rope/bfloat16", half, one(func(e mx.Engine) *mx.Array { return mx.RoPE(bf16(e, 155, 1, 2, 3, 8), 8, false, 10000, 1, 1, nil) })},
	)
	return cases
}

func quantCases() []parityCase {
	var cases []parityCase
	for _, bits := range []int{2, 3, 4, 5, 6, 8} {
		for _, gs := range []int{32, 64} {
			name := fmt.Sprintf("bits=%d group=%d", bits, gs)
			cases = append(cases,
				// Both engines compute MLX's affine scales and biases with the same float32
				// operations and pack the same codes: bit-identical.
				parityCase{"quantize/" + name, exact, func(e mx.Engine) []*mx.Array {
					wq, s, b := mx.Quantize(rf(e, 161, 3, 128), gs, bits)
					return []*mx.Array{wq, s, b}
				}},
				parityCase{"dequantize/" + name, exact, one(func(e mx.Engine) *mx.Array {
					wq, s, b := mx.Quantize(rf(e, 162, 4, 64), gs, bits)
					return mx.Dequantize(wq, s, b, gs, bits)
				})},
				parityCase{"quantized_matmul/transpose " + name, sums, one(func(e mx.Engine) *mx.Array {
					wq, s, b := mx.Quantize(rf(e, 163, 6, 64), gs, bits)
					return mx.QuantizedMatmul(rf(e, 164, 2, 3, 64), wq, s, b, true, gs, bits)
				})},
				parityCase{"quantized_matmul/no transpose " + name, sums, one(func(e mx.Engine) *mx.Array {
					wq, s, b := mx.Quantize(rf(e, 165, 5, 64), gs, bits)
					return mx.QuantizedMatmul(rf(e, 166, 3, 5), wq, s, b, false, gs, bits)
				})},
			)
		}
	}
	cases = append(cases,
		parityCase{"quantize/vector", exact, func(e mx.Engine) []*mx.Array {
			wq, s, b := mx.Quantize(rf(e, 167, 64), 32, 4)
			return []*mx.Array{wq, s, b}
		}},
		parityCase{"quantize/bfloat16", half, func(e mx.Engine) []*mx.Array {
			wq, s, b := mx.Quantize(bf16(e, 168, 2, 64), 64, 4)
			return []*mx.Array{wq, s, b, mx.Dequantize(wq, s, b, 64, 4)}
		}},
		parityCase{"quantized_matmul/vector x", sums, one(func(e mx.Engine) *mx.Array {
			wq, s, b := mx.Quantize(rf(e, 169, 4, 32), 32, 8)
			return mx.QuantizedMatmul(rf(e, 170, 32), wq, s, b, true, 32, 8)
		})},
		parityCase{"quantized_matmul/bfloat16", bf16Accum, one(func(e mx.Engine) *mx.Array {
			wq, s, b := mx.Quantize(bf16(e, 171, 8, 64), 64, 4)
			return mx.QuantizedMatmul(bf16(e, 172, 3, 64), wq, s, b, true, 64, 4)
		})},
		parityCase{"gather_qmm/transpose", sums, one(func(e mx.Engine) *mx.Array {
			// 3 experts of [N=4, K=64]; x [2, 3, 64] routes each row to its expert.
			wq, s, b := mx.Quantize(rf(e, 173, 3, 4, 64), 64, 4)
			return mx.GatherQMM(rf(e, 174, 2, 3, 64), wq, s, b, ri(e, 175, 0, 3, 2, 3), true, 64, 4, false)
		})},
		parityCase{"gather_qmm/no transpose", sums, one(func(e mx.Engine) *mx.Array {
			wq, s, b := mx.Quantize(rf(e, 176, 2, 8, 32), 32, 8)
			return mx.GatherQMM(rf(e, 177, 5, 8), wq, s, b, ri(e, 178, 0, 2, 5), false, 32, 8, false)
		})},
		parityCase{"gather_qmm/flat indices", sums, one(func(e mx.Engine) *mx.Array {
			wq, s, b := mx.Quantize(rf(e, 179, 4, 6, 32), 32, 2)
			return mx.GatherQMM(rf(e, 180, 2, 2, 32), wq, s, b, mx.FromSlice(e, []uint32{3, 0, 0, 2}, []int{4}, mx.Uint32), true, 32, 2, false)
		})},
		parityCase{"gather_qmm/sorted", sums, one(func(e mx.Engine) *mx.Array {
			wq, s, b := mx.Quantize(rf(e, 181, 3, 8, 64), 64, 4)
			return mx.GatherQMM(rf(e, 182, 5, 64), wq, s, b, mx.FromInt32(e, []int32{0, 1, 1, 2, 2}, 5), true, 64, 4, true)
		})},
		parityCase{"addmm", sums, one(func(e mx.Engine) *mx.Array {
			return mx.AddMM(rf(e, 190, 2, 3, 12), rf(e, 191, 2, 3, 16), rf(e, 192, 16, 12), 8, 1)
		})},
		parityCase{"addmm/broadcast c", sums, one(func(e mx.Engine) *mx.Array {
			return mx.AddMM(rf(e, 193, 12), rf(e, 194, 3, 16), rf(e, 195, 16, 12), 0.5, 2)
		})},
		parityCase{"geglu", libm, one(func(e mx.Engine) *mx.Array {
			return mx.GeGLU(mx.MulScalar(rf(e, 188, 4, 33), 4), rf(e, 189, 4, 33))
		})},
		parityCase{"take_weighted_sum", sums, one(func(e mx.Engine) *mx.Array {
			return mx.TakeWeightedSum(rf(e, 197, 6, 20), mx.FromInt32(e, []int32{4, 0, 5, 1, 2, 3, 0, 0}, 4, 2), rf(e, 198, 4, 2))
		})},
		parityCase{"geglu_split", libm, one(func(e mx.Engine) *mx.Array {
			return mx.GeGLUSplit(mx.MulScalar(rf(e, 196, 4, 66), 4))
		})},
		parityCase{"gather_mm", sums, one(func(e mx.Engine) *mx.Array {
			return mx.GatherMM(rf(e, 183, 2, 3, 16), rf(e, 184, 4, 16, 12), ri(e, 185, 0, 4, 2, 3), false)
		})},
		parityCase{"gather_mm/sorted swapped", sums, one(func(e mx.Engine) *mx.Array {
			w := rf(e, 186, 3, 12, 16) // [E, N, K]
			return mx.GatherMM(rf(e, 187, 6, 16), mx.SwapAxes(w, 1, 2), mx.FromInt32(e, []int32{0, 0, 1, 1, 1, 2}, 6), true)
		})},
	)
	return cases
}

func randomCases() []parityCase {
	key := func(e mx.Engine) *mx.Array { return mx.SplitKey(mx.Key(e, 42), 3)[2] }
	return []parityCase{
		{"key", exact, one(func(e mx.Engine) *mx.Array { return mx.Key(e, 0x0123456789abcdef) })},
		{"split", exact, func(e mx.Engine) []*mx.Array { return mx.SplitKey(mx.Key(e, 7), 5) }},
		{"bits/odd count", exact, one(func(e mx.Engine) *mx.Array { return mx.RandomBits(key(e), 3, 5) })},
		{"bits/even count", exact, one(func(e mx.Engine) *mx.Array { return mx.RandomBits(key(e), 8) })},
		{"uniform", exact, one(func(e mx.Engine) *mx.Array { return mx.Uniform(key(e), []int{4, 5}, -2, 3, mx.Float32) })},
		{"uniform/bfloat16", exact, one(func(e mx.Engine) *mx.Array { return mx.Uniform(key(e), []int{7}, 0, 1, mx.BFloat16) })},
		{"randint", exact, one(func(e mx.Engine) *mx.Array { return mx.Randint(key(e), []int{3, 7}, -5, 1000, mx.Int32) })},
		{"randint/uint32", exact, one(func(e mx.Engine) *mx.Array { return mx.Randint(key(e), []int{6}, 0, 10, mx.Uint32) })},
		// Mostly negative draws: MLX v0.32.1 floors them, earlier releases truncated toward
		// zero; the go engine follows the release it is compared with.
		{"randint/negative range", exact, one(func(e mx.Engine) *mx.Array { return mx.Randint(key(e), []int{64}, -1000, 5, mx.Int32) })},
		{"normal", libm, one(func(e mx.Engine) *mx.Array { return mx.Normal(key(e), []int{50}, mx.Float32) })},
		{"categorical/batch", exact, one(func(e mx.Engine) *mx.Array {
			return mx.Categorical(key(e), mx.MulScalar(rf(e, 181, 6, 10), 3), -1)
		})},
		{"categorical/single distribution", exact, one(func(e mx.Engine) *mx.Array {
			// One distribution with a non-scalar output takes MLX's inverse-CDF path since
			// v0.32.1 and the Gumbel-max before; the go engine follows the release.
			return mx.Categorical(key(e), mx.MulScalar(rf(e, 182, 1, 50), 2), -1)
		})},
		{"categorical/axis0", exact, one(func(e mx.Engine) *mx.Array {
			return mx.Categorical(key(e), rf(e, 183, 5, 3), 0)
		})},
		{"categorical/bfloat16", exact, one(func(e mx.Engine) *mx.Array {
			return mx.Categorical(key(e), bf16(e, 184, 3, 6), 1)
		})},
	}
}

// TestParity runs every op of the table on the go engine and on MLX with identical
// inputs and compares dtypes, shapes and values.
func TestParity(t *testing.T) {
	g, m := engines(t)
	onGPU := m.(interface{ Device() string }).Device() == "gpu"
	groups := [][]parityCase{creationCases(), unaryCases(), binaryCases(), castCases(), shapeCases(),
		reductionCases(), linalgCases(), fastCases(), quantCases(), randomCases()}
	for _, cases := range groups {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				if onGPU {
					c.tol = gpuTolerance(c)
				}
				want := c.run(g)
				var got []*mx.Array
				mx.Tidy(m, func() []*mx.Array {
					got = c.run(m)
					if len(got) != len(want) {
						t.Fatalf("%d results on mlx, %d on go", len(got), len(want))
					}
					for i := range want {
						sameArrays(t, fmt.Sprintf("result %d", i), want[i], got[i], c.tol)
					}
					return nil
				})
			})
		}
	}
}

// TestArgpartition checks the partition property on MLX (its index order differs from
// the go engine's full sort, which is also a valid partition) and TopK's values.
func TestArgpartition(t *testing.T) {
	g, m := engines(t)
	vals := floats(191, 4*11, -1, 1)
	for _, kth := range []int{0, 3, 10, -2} {
		x := mx.FromFloat32(m, vals, 4, 11)
		idx := mx.Argpartition(x, kth, -1)
		if idx.DType() != mx.Int32 {
			t.Fatalf("argpartition dtype %s, want int32", idx.DType())
		}
		got := mx.TakeAlongAxis(x, idx, -1).Float32s()
		k := kth
		if k < 0 {
			k += 11
		}
		for r := range 4 {
			row := got[r*11 : (r+1)*11]
			sorted := slices.Clone(vals[r*11 : (r+1)*11])
			slices.Sort(sorted)
			if row[k] != sorted[k] {
				t.Errorf("kth=%d row %d: element %d is %v, want the sorted %v", kth, r, k, row[k], sorted[k])
			}
			for i, v := range row {
				if (i < k && v > row[k]) || (i > k && v < row[k]) {
					t.Errorf("kth=%d row %d: %v at %d is on the wrong side of %v", kth, r, v, i, row[k])
				}
			}
		}
	}
	// TopK: the 3 largest of each row, as a set.
	top := func(e mx.Engine) []float32 {
		v := mx.TopK(mx.FromFloat32(e, vals, 4, 11), 3).Float32s()
		for r := range 4 {
			slices.Sort(v[r*3 : (r+1)*3])
		}
		return v
	}
	closeFloats(t, "topk", top(g), top(m), exact)
}

// TestRandomVector is spec §8.1's vector: MLX seed(0) then randint(0, 262144, (1, 256)),
// i.e. the second half of split(key(0)), drawn on both engines.
func TestRandomVector(t *testing.T) {
	first := []int32{185000, 41720, 189586, 58903, 148497, 10569, 138740, 40704}
	last := []int32{113009, 52994, 195024, 100784}
	g, m := engines(t)
	for _, e := range []mx.Engine{g, m} {
		k := mx.SplitKey(mx.Key(e, 0), 2)[1]
		ids := mx.Randint(k, []int{1, 256}, 0, 262144, mx.Int32)
		if !slices.Equal(ids.Shape(), []int{1, 256}) {
			t.Fatalf("%s: shape %v", e.Name(), ids.Shape())
		}
		v := ids.Int32s()
		if !slices.Equal(v[:len(first)], first) || !slices.Equal(v[len(v)-len(last):], last) {
			t.Errorf("%s: ids %v … %v, want %v … %v", e.Name(), v[:len(first)], v[len(v)-len(last):], first, last)
		}
	}
}
