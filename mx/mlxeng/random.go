//go:build mlx

package mlxeng

// #include "mlx/c/mlx.h"
import "C"

import (
	"github.com/dgtune/dgtune/mx"
)

// The draws are MLX's own (threefry with explicit keys) in float32 or int32, then cast
// to the requested dtype, which is what the go engine reproduces bit for bit.

// Key implements mx.Engine.
func (e *Engine) Key(seed uint64) mx.Handle {
	return e.op("key", func(res *C.mlx_array) C.int { return C.mlx_random_key(res, C.uint64_t(seed)) })
}

// SplitKey implements mx.Engine.
func (e *Engine) SplitKey(h mx.Handle, num int) mx.Handle {
	k := get(h)
	return e.op("split", func(res *C.mlx_array) C.int { return C.mlx_random_split_num(res, k.c, C.int(num), e.stream) })
}

// RandomBits implements mx.Engine.
func (e *Engine) RandomBits(h mx.Handle, shape []int) mx.Handle {
	k := get(h)
	cs := cints(shape)
	return e.op("bits", func(res *C.mlx_array) C.int {
		return C.mlx_random_bits(res, ptr(cs), C.size_t(len(cs)), 4, k.c, e.stream)
	})
}

// Uniform implements mx.Engine.
func (e *Engine) Uniform(h mx.Handle, shape []int, low, high float64, dt mx.DType) mx.Handle {
	k := get(h)
	lo, hi := e.scalar(low, mx.Float32), e.scalar(high, mx.Float32)
	defer e.free(lo)
	defer e.free(hi)
	cs := cints(shape)
	out := e.op("uniform", func(res *C.mlx_array) C.int {
		return C.mlx_random_uniform(res, lo.c, hi.c, ptr(cs), C.size_t(len(cs)), C.MLX_FLOAT32, k.c, e.stream)
	})
	return e.fix(out, dt)
}

// Randint implements mx.Engine.
func (e *Engine) Randint(h mx.Handle, shape []int, low, high int64, dt mx.DType) mx.Handle {
	k := get(h)
	lo, hi := e.scalar(float64(int32(low)), mx.Int32), e.scalar(float64(int32(high)), mx.Int32)
	defer e.free(lo)
	defer e.free(hi)
	cs := cints(shape)
	out := e.op("randint", func(res *C.mlx_array) C.int {
		return C.mlx_random_randint(res, lo.c, hi.c, ptr(cs), C.size_t(len(cs)), C.MLX_INT32, k.c, e.stream)
	})
	return e.fix(out, dt)
}

// Normal implements mx.Engine.
func (e *Engine) Normal(h mx.Handle, shape []int, dt mx.DType) mx.Handle {
	k := get(h)
	cs := cints(shape)
	out := e.op("normal", func(res *C.mlx_array) C.int {
		return C.mlx_random_normal(res, ptr(cs), C.size_t(len(cs)), C.MLX_FLOAT32, 0, 1, k.c, e.stream)
	})
	return e.fix(out, dt)
}

// Categorical implements mx.Engine (int32 samples).
func (e *Engine) Categorical(h, hl mx.Handle, axis int) mx.Handle {
	k := get(h)
	l, done := e.cast(get(hl), mx.Float32)
	defer done()
	out := e.op("categorical", func(res *C.mlx_array) C.int {
		return C.mlx_random_categorical(res, l.c, C.int(axis), k.c, e.stream)
	})
	return e.fix(out, mx.Int32)
}
