package mx

import "fmt"

// Compiler is the optional capability of an engine that compiles functions of arrays
// (MLX's mx.compile): the function is traced once per distinct input shapes and dtypes,
// and later calls replay the recorded graph — simplified, with elementwise chains fused
// — without running the Go function again.
type Compiler interface {
	Compile(f func(args []Handle) []Handle) (compiled func(args []Handle) []Handle, release func())
}

// Compile returns f compiled by the engine e where it can (Compiler), or f itself.
// release drops the engine's traces; call it once the function is no longer needed.
//
// Compiled functions must be pure in their arguments. Arrays f captures from outside
// (frozen weights) become constants of the trace, so anything that changes from call to
// call — parameters, token ids, noise, random keys, step-dependent scalars — must be an
// argument: a replay does not run f, so values f computes on the host (or draws from
// captured keys) are those of the first call with the same shapes.
func Compile(e Engine, f func(args []*Array) []*Array) (compiled func(args []*Array) []*Array, release func()) {
	c, ok := e.(Compiler)
	if !ok {
		return f, func() {}
	}
	inner := func(in []Handle) []Handle {
		outs := f(wrapAll(e, in))
		if len(outs) == 0 {
			panic("mx: compile: function returned nothing")
		}
		res := make([]Handle, len(outs))
		for i, o := range outs {
			if o == nil {
				panic(fmt.Sprintf("mx: compile: output %d is nil", i))
			}
			res[i] = o.h
		}
		return res
	}
	cf, rel := c.Compile(inner)
	return func(args []*Array) []*Array {
		if len(args) == 0 {
			panic("mx: compile: no arguments")
		}
		sameEngine("compile", args...)
		return wrapAll(e, cf(handles(args)))
	}, rel
}
