//go:build mlx

package mlxeng

// #include "mlx/c/mlx.h"
import "C"

import (
	"runtime/cgo"
	"sync"

	"github.com/dgtune/dgtune/mx"
)

// Compile implements mx.Compiler with mlx.compile over a closure that calls f. MLX
// calls the closure to trace (on the first call and on each new set of input shapes),
// so the closure owns its handle for as long as MLX keeps it; release frees the compiled
// closure, which erases its traces from MLX's compile cache.
func (e *Engine) Compile(f func([]mx.Handle) []mx.Handle) (func([]mx.Handle) []mx.Handle, func()) {
	call := &vgCall{e: e, f: f, keepShape: true}
	id := cgo.NewHandle(call)
	cl := ownedClosure(uintptr(id))
	if cl.ctx == nil {
		id.Delete()
		panic(&Error{Op: "compile", Msg: "could not make the closure"})
	}
	compiled := C.mlx_closure_new()
	// On the tracer thread: MLX's compile keeps its traces in the cache of the thread
	// that compiles, and erases them from that one on release (threads.go).
	e.atTracer(func() { e.run("compile", func() C.int { return C.mlx_compile(&compiled, cl, false) }) })
	C.mlx_closure_free(cl) // the compiled closure holds its own copy
	var once sync.Once
	release := func() {
		once.Do(func() { e.atTracer(func() { C.mlx_closure_free(compiled) }) })
	}
	apply := func(args []mx.Handle) []mx.Handle {
		return e.applyTraced("compile", compiled, call, args, e.atTracer)
	}
	return apply, release
}
