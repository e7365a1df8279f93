//go:build mlx

package mlxeng

// #include "mlx/c/mlx.h"
// int mlxeng_on_home(void);
// int mlxeng_on_tracer(void);
// void mlxeng_make_tracer(void);
import "C"

import (
	"runtime"

	"github.com/dgtune/dgtune/mx"
)

// The engine's two threads. Home owns the stream's command encoder: every evaluation
// runs there, and so does value_and_grad outside a compiled function. The tracer
// compiles, traces and replays compiled closures (the training step, the AdamW
// update): MLX keeps a compiled function's traces in a cache of the thread that
// compiled it, and a replay only builds a graph, so it can run while home is still
// launching the step before. With both on one thread a step cost its replay (22–40 ms
// at the real geometry) plus its launch, because MLX's async_eval returns only when
// the device is ~200 kernels from the end; on two, the host builds the next step while
// the device runs this one. MLXENG_TRACER=home puts both back on home, as before.
const tracerEnv = "MLXENG_TRACER"

// startTracer starts the tracer thread unless env is "home".
func (e *Engine) startTracer(env string) {
	if env == "home" {
		return
	}
	e.tracer = make(chan func())
	go func() {
		runtime.LockOSThread() // never unlocked: the thread holds the compile cache
		C.mlxeng_make_tracer()
		for f := range e.tracer {
			f()
		}
	}()
}

// serve is the home thread: it runs init, then every function sent to e.home, for
// the life of the process.
func (e *Engine) serve(init func() error, started chan<- error) {
	runtime.LockOSThread() // never unlocked: the thread is the stream's
	err := init()
	started <- err
	if err != nil {
		return
	}
	for f := range e.home {
		f()
	}
}

// atHome runs f on the home thread and re-raises its panic in the caller, or the
// failure of an evaluation launched before it (AsyncEval). Calls already at home run
// directly.
func (e *Engine) atHome(f func()) {
	if C.mlxeng_on_home() == 1 {
		f()
		return
	}
	await(e.home, func() {
		if r := e.asyncFailed; r != nil {
			e.asyncFailed = nil
			panic(r)
		}
		f()
	})
}

// await runs f on the thread that serves ch, waits for it and re-raises its panic in
// the caller.
func await(ch chan<- func(), f func()) {
	done := make(chan any, 1)
	ch <- func() {
		defer func() { done <- recover() }()
		f()
	}
	if r := <-done; r != nil {
		panic(r)
	}
}

// traced runs f, which MLX traces (value_and_grad, a checkpoint's application), where
// the trace it belongs to lives: directly on home or the tracer (inside a compiled
// function), at home from any other thread.
func (e *Engine) traced(f func()) {
	if C.mlxeng_on_tracer() == 1 {
		f()
		return
	}
	e.atHome(f)
}

// atTracer runs f, a compiled closure's compilation, application or release, on the
// tracer thread (at home without one), and re-raises its panic in the caller. A call
// from home runs there directly: a compiled function applied inside value_and_grad
// belongs to home's trace (MLX then keeps that trace in home's cache, where releasing
// the closure does not reach it).
func (e *Engine) atTracer(f func()) {
	if e.tracer == nil {
		e.atHome(f)
		return
	}
	if C.mlxeng_on_tracer() == 1 || C.mlxeng_on_home() == 1 {
		f()
		return
	}
	await(e.tracer, f)
}

// AsyncEval implements mx.AsyncEvaluator: the arrays' graph is launched on the home
// thread's stream. With the tracer thread the call returns once home has taken the
// work, so the caller builds the next graph while home launches this one; a failure is
// raised by the next call at home (the Eval that waits for these arrays at the latest).
// Without it (MLXENG_TRACER=home) the call returns when MLX's async_eval does.
func (e *Engine) AsyncEval(hs ...mx.Handle) {
	v := vector(hs)
	e.launch(func() {
		defer C.mlx_vector_array_free(v)
		e.run("async_eval", func() C.int { return C.mlx_async_eval(v) })
	})
}

// launch runs f at home without waiting for it where the tracer thread is on (see
// AsyncEval); its panic becomes asyncFailed, the first one only.
func (e *Engine) launch(f func()) {
	if e.tracer == nil || C.mlxeng_on_home() == 1 {
		e.atHome(f)
		return
	}
	e.home <- func() {
		defer func() {
			if r := recover(); r != nil && e.asyncFailed == nil {
				e.asyncFailed = r
			}
		}()
		f()
	}
}

// thread names the engine's thread the caller runs on: "home", "tracer", or "" for
// any other.
func thread() string {
	switch {
	case C.mlxeng_on_home() == 1:
		return "home"
	case C.mlxeng_on_tracer() == 1:
		return "tracer"
	}
	return ""
}
