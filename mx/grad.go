package mx

import "fmt"

// ValueAndGrad returns a function that evaluates f and the gradient of f's first
// output (a scalar) with respect to the arguments at argnums (all when none are given).
// f may return more outputs (auxiliary values); they are returned but not
// differentiated. Integer arguments get no gradient; their gradient slot is nil.
func ValueAndGrad(f func(args []*Array) []*Array, argnums ...int) func(args []*Array) (values, grads []*Array) {
	return func(args []*Array) ([]*Array, []*Array) {
		if len(args) == 0 {
			panic("mx: value_and_grad: no arguments")
		}
		e := sameEngine("value_and_grad", args...)
		nums := argnums
		if len(nums) == 0 {
			nums = make([]int, len(args))
			for i := range nums {
				nums[i] = i
			}
		}
		for _, n := range nums {
			if n < 0 || n >= len(args) {
				panic(fmt.Sprintf("mx: value_and_grad: argnum %d of %d arguments", n, len(args)))
			}
		}
		hs := handles(args)
		inner := func(in []Handle) []Handle {
			outs := f(wrapAll(e, in))
			if len(outs) == 0 {
				panic("mx: value_and_grad: function returned nothing")
			}
			if outs[0].Size() != 1 {
				panic(fmt.Sprintf("mx: value_and_grad: first output has shape %v, want a scalar", outs[0].Shape()))
			}
			res := make([]Handle, len(outs))
			for i, o := range outs {
				res[i] = o.h
			}
			return res
		}
		vals, grads := e.ValueAndGrad(inner, hs, nums)
		vs := make([]*Array, len(vals))
		for i, h := range vals {
			vs[i] = Wrap(e, h)
		}
		gs := make([]*Array, len(grads))
		for i, h := range grads {
			if h != nil {
				gs[i] = Wrap(e, h)
			}
		}
		return vs, gs
	}
}

// Grad is ValueAndGrad without the value.
func Grad(f func(args []*Array) *Array, argnums ...int) func(args []*Array) []*Array {
	vg := ValueAndGrad(func(a []*Array) []*Array { return []*Array{f(a)} }, argnums...)
	return func(args []*Array) []*Array {
		_, g := vg(args)
		return g
	}
}

// GradCheckpoint returns a function that computes f but keeps none of f's intermediate
// arrays for a surrounding ValueAndGrad: the backward pass runs f again to rebuild
// them, trading compute for memory (gradient checkpointing).
//
// f must be pure in its arguments: arrays it captures from outside are constants to
// the gradient (on MLX as on the go engine) and must outlive the backward pass (not
// arrays made inside the function given to ValueAndGrad, which MLX frees when it
// returns), and f must draw the same random numbers each time it runs. Every argument
// must be non-nil and from one engine.
func GradCheckpoint(f func(args []*Array) []*Array) func(args []*Array) []*Array {
	return func(args []*Array) []*Array {
		if len(args) == 0 {
			panic("mx: grad_checkpoint: no arguments")
		}
		for i, a := range args {
			if a == nil {
				panic(fmt.Sprintf("mx: grad_checkpoint: argument %d is nil", i))
			}
		}
		e := sameEngine("grad_checkpoint", args...)
		hs := handles(args)
		inner := func(in []Handle) []Handle {
			outs := f(wrapAll(e, in))
			if len(outs) == 0 {
				panic("mx: grad_checkpoint: function returned nothing")
			}
			res := make([]Handle, len(outs))
			for i, o := range outs {
				if o == nil {
					panic(fmt.Sprintf("mx: grad_checkpoint: output %d is nil", i))
				}
				res[i] = o.h
			}
			return res
		}
		outs := e.GradCheckpoint(inner, hs)
		res := make([]*Array, len(outs))
		for i, h := range outs {
			res[i] = Wrap(e, h)
		}
		return res
	}
}

// handles returns the engine handles of arrays.
func handles(arrays []*Array) []Handle {
	hs := make([]Handle, len(arrays))
	for i, a := range arrays {
		hs[i] = a.h
	}
	return hs
}

// wrapAll turns engine handles back into arrays of e.
func wrapAll(e Engine, hs []Handle) []*Array {
	out := make([]*Array, len(hs))
	for i, h := range hs {
		out[i] = Wrap(e, h)
	}
	return out
}
