//go:build mlx

package mlxeng

// #include "mlx/c/mlx.h"
import "C"

import (
	"fmt"
	"runtime/cgo"
	"slices"

	"github.com/dgtune/dgtune/mx"
)

// vgCall is what the C closure's payload names: the Go function MLX traces and
// what it left behind.
type vgCall struct {
	e      *Engine
	f      func([]mx.Handle) []mx.Handle
	shape0 []int // the first output's shape, made 0-d for MLX's value_and_grad
	failed any   // a panic inside f, re-raised once MLX has unwound
	// keepShape passes the outputs through as they are (a checkpointed function rather
	// than the function of value_and_grad).
	keepShape bool
	// constant marks the arguments f gets through stop_gradient: MLX's checkpoint asks
	// for a VJP with respect to every input, which integer ones (indices) do not have.
	constant []bool
}

// mlxengCallback is the body of the closure MLX calls while tracing. It must never let
// a Go panic cross the C++ frames above it: a panic is recorded and reported to MLX as
// a failure, and ValueAndGrad re-raises it. Arrays made here are freed on return; MLX
// holds its own references to the outputs.
//
//export mlxengCallback
func mlxengCallback(res *C.mlx_vector_array, input C.mlx_vector_array, id C.uintptr_t) (rc C.int) {
	call := cgo.Handle(uintptr(id)).Value().(*vgCall)
	defer func() {
		if r := recover(); r != nil {
			call.failed = r
			if call.keepShape {
				call.e.recomputeFailed = r
			}
			rc = 1
		}
	}()
	e := call.e
	e.PushScope()
	defer e.PopScope(nil)
	in := e.unpack("value_and_grad", input)
	args := make([]mx.Handle, len(in))
	for i, a := range in {
		args[i] = a
		if i < len(call.constant) && call.constant[i] {
			args[i] = e.StopGradient(a)
		}
	}
	outs := call.f(args)
	if len(outs) == 0 {
		panic("mlx: value_and_grad: function returned nothing")
	}
	cs := make([]C.mlx_array, len(outs))
	for i, h := range outs {
		cs[i] = get(h).c
	}
	if !call.keepShape {
		first := get(outs[0])
		call.shape0 = slices.Clone(first.shape)
		cs[0] = e.reshape(first, nil).c
	}
	e.run("value_and_grad", func() C.int { return C.mlx_vector_array_set_data(res, &cs[0], C.size_t(len(cs))) })
	return 0
}

// ValueAndGrad implements mx.Engine with mlx.value_and_grad. Only float arguments are
// differentiated; integer ones get a nil gradient, as on the go engine.
func (e *Engine) ValueAndGrad(f func([]mx.Handle) []mx.Handle, args []mx.Handle, argnums []int) ([]mx.Handle, []mx.Handle) {
	var nums []int
	for _, n := range argnums {
		if get(args[n]).dt.IsFloat() && !slices.Contains(nums, n) {
			nums = append(nums, n)
		}
	}
	grads := make([]mx.Handle, len(argnums))
	if len(nums) == 0 {
		return f(args), grads
	}
	slices.Sort(nums) // MLX returns gradients in ascending argument order

	call := &vgCall{e: e, f: f}
	id := cgo.NewHandle(call)
	defer id.Delete()
	cl := closure(uintptr(id))
	if cl.ctx == nil {
		panic(&Error{Op: "value_and_grad", Msg: "could not make the closure"})
	}
	defer C.mlx_closure_free(cl)
	cn := cints(nums)
	vag := C.mlx_closure_value_and_grad_new()
	defer C.mlx_closure_value_and_grad_free(vag)
	e.run("value_and_grad", func() C.int { return C.mlx_value_and_grad(&vag, cl, &cn[0], C.size_t(len(cn))) })

	in := vector(args)
	defer C.mlx_vector_array_free(in)
	vals, gs := C.mlx_vector_array_new(), C.mlx_vector_array_new()
	defer C.mlx_vector_array_free(vals)
	defer C.mlx_vector_array_free(gs)
	var err error
	e.traced(func() {
		err = e.try("value_and_grad", func() C.int { return C.mlx_closure_value_and_grad_apply(&vals, &gs, vag, in) })
	})
	if call.failed != nil {
		panic(call.failed)
	}
	if r := e.recomputeFailed; r != nil && err != nil {
		e.recomputeFailed = nil
		panic(r)
	}
	if err != nil {
		panic(err)
	}

	values := e.unpack("value_and_grad", vals)
	if len(values) > 0 {
		v0 := values[0]
		values[0] = e.reshape(v0, call.shape0)
		e.free(v0)
	}
	out := handles(values)
	n := int(C.mlx_vector_array_size(gs))
	if n != len(nums) {
		panic(fmt.Sprintf("mlx: value_and_grad: %d gradients for %d arguments", n, len(nums)))
	}
	for j, a := range argnums {
		if i := slices.Index(nums, a); i >= 0 {
			// One handle per slot, so repeated argnums can be freed independently.
			grads[j] = e.op("value_and_grad", func(res *C.mlx_array) C.int {
				return C.mlx_vector_array_get(res, gs, C.size_t(i))
			})
		}
	}
	return out, grads
}

//export mlxengRelease
func mlxengRelease(id C.uintptr_t) { cgo.Handle(uintptr(id)).Delete() }

// GradCheckpoint implements mx.Engine with mlx.checkpoint: the closure over f is
// recorded with a VJP that re-runs it, so MLX keeps only its inputs for the backward.
func (e *Engine) GradCheckpoint(f func([]mx.Handle) []mx.Handle, args []mx.Handle) []mx.Handle {
	call := &vgCall{e: e, f: f, keepShape: true, constant: make([]bool, len(args))}
	for i, a := range args {
		call.constant[i] = !get(a).dt.IsFloat()
	}
	id := cgo.NewHandle(call)
	cl := ownedClosure(uintptr(id))
	if cl.ctx == nil {
		id.Delete()
		panic(&Error{Op: "grad_checkpoint", Msg: "could not make the closure"})
	}
	defer C.mlx_closure_free(cl)
	ck := C.mlx_closure_new()
	defer C.mlx_closure_free(ck)
	e.run("grad_checkpoint", func() C.int { return C.mlx_checkpoint(&ck, cl) })

	return e.applyTraced("grad_checkpoint", ck, call, args, e.traced)
}

// applyTraced applies a closure whose tracing runs call's Go function (a checkpoint, a
// compiled function) through where (traced or atTracer, threads.go). A panic inside
// the function is re-raised here, as the forward run's failure rather than a
// recomputation's.
func (e *Engine) applyTraced(op string, cl C.mlx_closure, call *vgCall, args []mx.Handle, where func(func())) []mx.Handle {
	in := vector(args)
	defer C.mlx_vector_array_free(in)
	outs := C.mlx_vector_array_new()
	defer C.mlx_vector_array_free(outs)
	var err error
	where(func() {
		err = e.try(op, func() C.int { return C.mlx_closure_apply(&outs, cl, in) })
	})
	if failed := call.failed; failed != nil {
		call.failed = nil
		e.recomputeFailed = nil
		panic(failed)
	}
	if err != nil {
		panic(err)
	}
	return handles(e.unpack(op, outs))
}
