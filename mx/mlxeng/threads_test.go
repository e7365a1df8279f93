//go:build mlx

package mlxeng

import (
	"errors"
	"math"
	"sync"
	"testing"

	"github.com/dgtune/dgtune/mx"
)

func threadsEngine(t *testing.T) *Engine {
	t.Helper()
	e, err := open()
	if err != nil {
		t.Fatal(err)
	}
	if e.tracer == nil {
		t.Skipf("%s=home: no tracer thread", tracerEnv)
	}
	return e
}

// TestThreadsTakeTheirWork: a compiled function is traced on the tracer thread, once,
// and so is the value_and_grad inside it; its replay calls no Go; an uncompiled
// value_and_grad's function runs at home.
func TestThreadsTakeTheirWork(t *testing.T) {
	e := threadsEngine(t)
	if got := thread(); got != "" {
		t.Fatalf("the test's goroutine is on %q", got)
	}
	var traced, inner []string
	f := func(a []*mx.Array) []*mx.Array {
		traced = append(traced, thread())
		_, g := mx.ValueAndGrad(func(p []*mx.Array) []*mx.Array {
			inner = append(inner, thread())
			return []*mx.Array{mx.Sum(mx.Multiply(p[0], p[0]), false)}
		})([]*mx.Array{a[0]})
		return g
	}
	compiled, release := mx.Compile(e, f)
	defer release()
	x := mx.FromFloat32(e, []float32{1, -2, 3}, 3)
	got := compiled([]*mx.Array{x})[0].Float32s()
	if want := []float32{2, -4, 6}; !equal(got, want) {
		t.Fatalf("compiled gradient %v, want %v", got, want)
	}
	if len(traced) != 1 || traced[0] != "tracer" || len(inner) != 1 || inner[0] != "tracer" {
		t.Fatalf("compiled: traced on %v, its value_and_grad on %v; want the tracer once each", traced, inner)
	}
	compiled([]*mx.Array{x}) // a replay calls nothing
	if len(traced) != 1 {
		t.Fatalf("the replay traced again: %v", traced)
	}
	traced, inner = nil, nil
	if g := f([]*mx.Array{x})[0].Float32s(); !equal(g, []float32{2, -4, 6}) {
		t.Fatalf("uncompiled gradient %v", g)
	}
	if len(inner) != 1 || inner[0] != "home" {
		t.Fatalf("uncompiled value_and_grad ran on %v, want home", inner)
	}
}

// TestBuildWhileHomeLaunches: the caller builds graphs on arrays home is still
// evaluating (launched with AsyncEval), through plain ops and through a compiled
// function's replay on the tracer, as the lookahead does a training step at a time;
// every value is the one built after waiting.
func TestBuildWhileHomeLaunches(t *testing.T) {
	e := threadsEngine(t)
	step, release := mx.Compile(e, func(a []*mx.Array) []*mx.Array {
		y := mx.Tanh(mx.Matmul(a[0], a[1]))
		return []*mx.Array{mx.AddScalar(mx.MulScalar(y, 0.5), 0.25)}
	})
	defer release()
	n := 64
	w := mx.MulScalar(mx.Normal(mx.Key(e, 2), []int{n, n}, mx.Float32), 1/math.Sqrt(float64(n)))
	x0 := mx.Normal(mx.Key(e, 1), []int{8, n}, mx.Float32)
	mx.Eval(w, x0)
	run := func(async bool) []float32 {
		x := x0
		var inFlight *mx.Array
		for i := 0; i < 40; i++ {
			y := step([]*mx.Array{x, w})[0]
			y = mx.Add(y, mx.MulScalar(x, 0.1))
			if async {
				if inFlight != nil {
					mx.Eval(inFlight)
				}
				mx.AsyncEval(y)
				inFlight = y
			} else {
				mx.Eval(y)
			}
			x = y
		}
		mx.Eval(x)
		return x.Float32s()
	}
	want, got := run(false), run(true)
	if !equal(got, want) {
		t.Fatalf("values built while home launched differ from those built after waiting")
	}
}

// TestLaunchFailureRaisedByNextCall: a launched evaluation that fails is raised by the
// next call at home, once.
func TestLaunchFailureRaisedByNextCall(t *testing.T) {
	e := threadsEngine(t)
	boom := &Error{Op: "async_eval", Msg: "test failure"}
	second := &Error{Op: "async_eval", Msg: "a later failure"}
	var wg sync.WaitGroup
	wg.Add(2)
	e.launch(func() { defer wg.Done(); panic(boom) })
	e.launch(func() { defer wg.Done(); panic(second) })
	wg.Wait()
	x := mx.FromFloat32(e, []float32{1}, 1)
	func() {
		defer func() {
			r := recover()
			err, ok := r.(error)
			if !ok || !errors.Is(err, boom) {
				t.Fatalf("next Eval raised %v, want the first launch's failure", r)
			}
		}()
		mx.Eval(x)
	}()
	mx.Eval(x) // raised once: the failure is gone
}

func equal(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}
