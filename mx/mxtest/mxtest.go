// Package mxtest holds test helpers shared by every package written against mx: run a
// test body once per compiled-in engine, and check gradients against central finite
// differences.
package mxtest

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/dgtune/dgtune/mx"
	_ "github.com/dgtune/dgtune/mx/engines"
	"github.com/dgtune/dgtune/mx/goeng"
)

// Engines runs body once per engine compiled into the test binary.
func Engines(t *testing.T, body func(t *testing.T, e mx.Engine)) {
	t.Helper()
	for _, name := range mx.Engines() {
		t.Run(name, func(t *testing.T) {
			e, err := mx.Open(name)
			if err != nil {
				t.Fatalf("open %s: %v", name, err)
			}
			body(t, e)
		})
	}
}

// Go returns the go engine.
func Go(t testing.TB) mx.Engine {
	t.Helper()
	e, err := mx.Open("go")
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// GoFollowing returns the go engine as the oracle of other: where MLX releases differ
// (random numbers, see goeng.NewFollowing) it reproduces the MLX release other runs on.
// For an engine on no library it is the plain go engine.
func GoFollowing(t testing.TB, other mx.Engine) mx.Engine {
	t.Helper()
	lib, v := mx.Library(other.Name())
	if lib != "MLX" {
		return Go(t)
	}
	e, err := goeng.NewFollowing(v)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// RandN returns a float32 array of the shape with entries uniform in [-1, 1).
func RandN(e mx.Engine, rng *rand.Rand, shape ...int) *mx.Array {
	n := 1
	for _, d := range shape {
		n *= d
	}
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.Float64()*2 - 1)
	}
	return mx.FromFloat32(e, v, shape...)
}

// GradCheckOptions tunes GradCheck.
type GradCheckOptions struct {
	Eps       float64 // finite-difference step (default 1e-2)
	RTol      float64 // relative tolerance (default 2e-2)
	ATol      float64 // absolute tolerance (default 2e-3)
	MaxPoints int     // elements probed per argument (default 24, chosen at random)
}

// GradCheck compares the gradient of the scalar function f with respect to the float
// arguments at argnums against central differences (f evaluated in float32, the
// differences taken in float64). The scalar is usually Σ out⊙R for a fixed random R,
// so every output element carries weight.
func GradCheck(t *testing.T, f func(args []*mx.Array) *mx.Array, args []*mx.Array, argnums []int, opt GradCheckOptions) {
	t.Helper()
	if opt.Eps == 0 {
		opt.Eps = 1e-2
	}
	if opt.RTol == 0 {
		opt.RTol = 2e-2
	}
	if opt.ATol == 0 {
		opt.ATol = 2e-3
	}
	if opt.MaxPoints == 0 {
		opt.MaxPoints = 24
	}
	grads := mx.Grad(f, argnums...)(args)
	rng := rand.New(rand.NewPCG(1, 2))
	for gi, n := range argnums {
		a := args[n]
		if grads[gi] == nil {
			t.Fatalf("arg %d: no gradient", n)
		}
		if got, want := grads[gi].Shape(), a.Shape(); !slices.Equal(got, want) {
			t.Fatalf("arg %d: gradient shape %v, want %v", n, got, want)
		}
		analytic := grads[gi].Float32s()
		base := a.Float32s()
		points := rng.Perm(len(base))
		if len(points) > opt.MaxPoints {
			points = points[:opt.MaxPoints]
		}
		for _, i := range points {
			eval := func(delta float64) float64 {
				v := append([]float32(nil), base...)
				v[i] += float32(delta)
				in := append([]*mx.Array(nil), args...)
				in[n] = mx.AsType(mx.FromFloat32(a.Engine(), v, a.Shape()...), a.DType())
				return f(in).Item()
			}
			// The step actually taken in float32.
			h := float64(float32(float64(base[i])+opt.Eps) - base[i])
			hm := float64(base[i] - float32(float64(base[i])-opt.Eps))
			numeric := (eval(h) - eval(-hm)) / (h + hm)
			got := float64(analytic[i])
			if math.Abs(got-numeric) > opt.ATol+opt.RTol*math.Max(math.Abs(got), math.Abs(numeric)) {
				t.Errorf("arg %d element %d: analytic %.6g, numeric %.6g", n, i, got, numeric)
			}
		}
	}
}

// Project returns Σ out⊙R for a fixed random R of out's shape: a scalar whose gradient
// is R, so that a gradient check sees every output element.
func Project(out *mx.Array, seed uint64) *mx.Array {
	rng := rand.New(rand.NewPCG(seed, 7))
	r := RandN(out.Engine(), rng, out.Shape()...)
	return mx.Sum(mx.Multiply(mx.AsType(out, mx.Float32), r), false)
}

// Close reports whether every |got-want| ≤ atol + rtol·|want|, and the worst offender.
func Close(got, want []float32, rtol, atol float64) (bool, int) {
	if len(got) != len(want) {
		return false, -1
	}
	for i := range got {
		g, w := float64(got[i]), float64(want[i])
		if math.IsNaN(g) != math.IsNaN(w) || math.Abs(g-w) > atol+rtol*math.Abs(w) {
			return false, i
		}
	}
	return true, 0
}
