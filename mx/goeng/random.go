package goeng

import (
	"fmt"
	"slices"

	"github.com/dgtune/dgtune/mx/internal/dims"

	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/internal/mlxver"
	"github.com/dgtune/dgtune/mx/internal/threefry"
)

func keyOf(h mx.Handle) threefry.Key {
	t := tt(h)
	u, ok := t.raw().([]uint32)
	if !ok || len(u) != 2 {
		panic(fmt.Sprintf("goeng: random key must be uint32 [2], got %s %v", t.dt, t.shape))
	}
	return threefry.Key{u[0], u[1]}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(fmt.Sprintf("goeng: %v", err))
	}
	return v
}

func (e *Engine) Key(seed uint64) mx.Handle {
	k := threefry.NewKey(seed)
	return newTensor([]int{2}, mx.Uint32, []uint32{k[0], k[1]})
}

func (e *Engine) SplitKey(h mx.Handle, num int) mx.Handle {
	keys := must(threefry.Split(keyOf(h), num))
	out := make([]uint32, 0, 2*num)
	for _, k := range keys {
		out = append(out, k[0], k[1])
	}
	return newTensor([]int{num, 2}, mx.Uint32, out)
}

func (e *Engine) RandomBits(h mx.Handle, shape []int) mx.Handle {
	return newTensor(shape, mx.Uint32, must(threefry.Bits(keyOf(h), dims.Numel(shape))))
}

func (e *Engine) Uniform(h mx.Handle, shape []int, low, high float64, dt mx.DType) mx.Handle {
	v := must(threefry.Uniform(keyOf(h), dims.Numel(shape), float32(low), float32(high)))
	return fromF32(shape, dt, v)
}

func (e *Engine) Randint(h mx.Handle, shape []int, low, high int64, dt mx.DType) mx.Handle {
	draw := threefry.Randint
	if !e.release().AtLeast(mlxver.V0_32_1) {
		draw = threefry.RandintTrunc
	}
	v := must(draw(keyOf(h), dims.Numel(shape), int32(low), int32(high)))
	return castTensor(newTensor(shape, mx.Int32, v), dt)
}

func (e *Engine) Normal(h mx.Handle, shape []int, dt mx.DType) mx.Handle {
	return fromF32(shape, dt, must(threefry.Normal(keyOf(h), dims.Numel(shape), 0, 1)))
}

func (e *Engine) Categorical(h, hl mx.Handle, axis int) mx.Handle {
	l := tt(hl)
	draw := threefry.Categorical
	if !e.release().AtLeast(mlxver.V0_32_1) {
		draw = threefry.GumbelMax // no inverse-CDF path before v0.32.1
	}
	idx := must(draw(keyOf(h), l.f32(), l.shape, axis))
	shape := slices.Delete(slices.Clone(l.shape), axis, axis+1)
	out := make([]int32, len(idx))
	for i, v := range idx {
		out[i] = int32(v)
	}
	return newTensor(shape, mx.Int32, out)
}
