package mx_test

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
)

// countCalls wraps f so that *n counts its runs.
func countCalls(n *int, f func([]*mx.Array) []*mx.Array) func([]*mx.Array) []*mx.Array {
	return func(a []*mx.Array) []*mx.Array {
		*n++
		return f(a)
	}
}

func TestGradCheckpointHandDerived(t *testing.T) {
	mxtest.Engines(t, func(t *testing.T, e mx.Engine) {
		// y = Σ r⊙(x⊙x⊙w): ∂y/∂x = 2·x⊙w⊙r = 2·[1·2·1, 2·(−1)·2, 3·0.5·3] = [4, −8, 9],
		// ∂y/∂w = x⊙x⊙r = [1·1, 4·2, 9·3] = [1, 8, 27].
		x := mx.FromFloat32(e, []float32{1, 2, 3}, 3)
		w := mx.FromFloat32(e, []float32{2, -1, 0.5}, 3)
		r := mx.FromFloat32(e, []float32{1, 2, 3}, 3)
		runs := 0
		f := mx.GradCheckpoint(countCalls(&runs, func(a []*mx.Array) []*mx.Array {
			return []*mx.Array{mx.Multiply(mx.Multiply(a[0], a[0]), a[1])}
		}))
		vals, grads := mx.ValueAndGrad(func(a []*mx.Array) []*mx.Array {
			return []*mx.Array{mx.Sum(mx.Multiply(f(a)[0], r), false)}
		})([]*mx.Array{x, w})
		// y = 1·2·1 + 4·(−1)·2 + 9·0.5·3 = 2 − 8 + 13.5 = 7.5
		if got := vals[0].Float32s()[0]; got != 7.5 {
			t.Errorf("value = %v, want 7.5", got)
		}
		for i, want := range [][]float32{{4, -8, 9}, {1, 8, 27}} {
			if ok, k := mxtest.Close(grads[i].Float32s(), want, 1e-6, 1e-6); !ok {
				t.Errorf("grad %d = %v, want %v (element %d)", i, grads[i].Float32s(), want, k)
			}
		}
		// Once in the forward pass, once more when the backward pass needs the graph.
		if runs != 2 {
			t.Errorf("f ran %d times under value_and_grad, want 2", runs)
		}

		// Outside value_and_grad nothing is differentiated: one run, same values.
		runs = 0
		out := f([]*mx.Array{x, w})[0].Float32s()
		if ok, k := mxtest.Close(out, []float32{2, -4, 4.5}, 0, 0); !ok || runs != 1 {
			t.Errorf("untraced call: %v after %d runs, want [2 -4 4.5] after 1 (element %d)", out, runs, k)
		}
	})
}

// TestGradCheckpointMatchesPlain differentiates functions with and without
// checkpointing: several outputs (one the loss never reads, one integer argument),
// nesting, and an argument that reaches the loss both directly and through the
// checkpoint.
func TestGradCheckpointMatchesPlain(t *testing.T) {
	layer := func(a []*mx.Array) []*mx.Array {
		x, w, idx := a[0], a[1], a[2]
		h := mx.Tanh(mx.Matmul(x, w))
		return []*mx.Array{h, mx.MulScalar(mx.Take(x, idx, 0), 2), mx.AddScalar(x, 1)}
	}
	nested := func(a []*mx.Array) []*mx.Array {
		inner := mx.GradCheckpoint(layer)(a)
		return []*mx.Array{mx.Exp(mx.Multiply(inner[0], inner[0])), inner[1]}
	}
	cases := []struct {
		name string
		f    func([]*mx.Array) []*mx.Array
	}{
		{"outputs", layer},
		{"nested", nested},
	}
	mxtest.Engines(t, func(t *testing.T, e mx.Engine) {
		rng := rand.New(rand.NewPCG(3, 4))
		x := mxtest.RandN(e, rng, 4, 5)
		w := mxtest.RandN(e, rng, 5, 3)
		idx := mx.FromInt32(e, []int32{2, 0}, 2)
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				loss := func(f func([]*mx.Array) []*mx.Array) func([]*mx.Array) []*mx.Array {
					return func(a []*mx.Array) []*mx.Array {
						outs := f(a)
						y := mx.Add(mxtest.Project(outs[0], 11), mxtest.Project(outs[1], 12))
						// x also reaches the loss outside the checkpoint.
						return []*mx.Array{mx.Add(y, mx.Sum(mx.Square(a[0]), false))}
					}
				}
				args := []*mx.Array{x, w, idx}
				wantV, want := mx.ValueAndGrad(loss(c.f), 0, 1, 2)(args)
				gotV, got := mx.ValueAndGrad(loss(mx.GradCheckpoint(c.f)), 0, 1, 2)(args)
				if ok, _ := mxtest.Close(gotV[0].Float32s(), wantV[0].Float32s(), 1e-6, 1e-6); !ok {
					t.Errorf("value %v, want %v", gotV[0].Float32s(), wantV[0].Float32s())
				}
				for i := range 2 {
					if ok, k := mxtest.Close(got[i].Float32s(), want[i].Float32s(), 1e-5, 1e-6); !ok {
						t.Errorf("grad %d differs at %d: %v, want %v", i, k, got[i].Float32s(), want[i].Float32s())
					}
				}
				if got[2] != nil || want[2] != nil {
					t.Errorf("integer argument got a gradient")
				}
			})
		}
	})
}

// TestGradCheckpointCapturedIsConstant runs on the go engine only: on MLX an array
// captured from inside the traced function is freed before the backward pass, which
// GradCheckpoint's contract forbids.
func TestGradCheckpointCapturedIsConstant(t *testing.T) {
	e := mxtest.Go(t)
	// y = Σ ckpt(a ↦ a⊙c)(a) + Σ c with c captured: the checkpoint passes no gradient
	// to c, so ∂y/∂c = 1 (the direct term only) and ∂y/∂a = c.
	a := mx.FromFloat32(e, []float32{1, 2}, 2)
	c := mx.FromFloat32(e, []float32{3, 5}, 2)
	_, g := mx.ValueAndGrad(func(args []*mx.Array) []*mx.Array {
		ca := args[1]
		out := mx.GradCheckpoint(func(in []*mx.Array) []*mx.Array {
			return []*mx.Array{mx.Multiply(in[0], ca)}
		})(args[:1])
		return []*mx.Array{mx.Add(mx.Sum(out[0], false), mx.Sum(ca, false))}
	})([]*mx.Array{a, c})
	for i, want := range [][]float32{{3, 5}, {1, 1}} {
		if ok, _ := mxtest.Close(g[i].Float32s(), want, 0, 0); !ok {
			t.Errorf("grad %d = %v, want %v", i, g[i].Float32s(), want)
		}
	}
}

func TestGradCheckpointBadInput(t *testing.T) {
	e := mxtest.Go(t)
	x := mx.FromFloat32(e, []float32{1}, 1)
	id := func(a []*mx.Array) []*mx.Array { return a }
	cases := []struct {
		name, want string
		call       func()
	}{
		{"no arguments", "no arguments", func() { mx.GradCheckpoint(id)(nil) }},
		{"nil argument", "argument 1 is nil", func() { mx.GradCheckpoint(id)([]*mx.Array{x, nil}) }},
		{"no outputs", "returned nothing", func() {
			mx.GradCheckpoint(func([]*mx.Array) []*mx.Array { return nil })([]*mx.Array{x})
		}},
		{"nil output", "output 0 is nil", func() {
			mx.GradCheckpoint(func([]*mx.Array) []*mx.Array { return []*mx.Array{nil} })([]*mx.Array{x})
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				r := recover()
				if r == nil || !strings.Contains(r.(string), c.want) {
					t.Errorf("panic %v, want one mentioning %q", r, c.want)
				}
			}()
			c.call()
		})
	}
}
