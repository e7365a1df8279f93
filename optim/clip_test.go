package optim

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
)

func TestClipGradNorm(t *testing.T) {
	e := mxtest.Go(t)
	// a = [3, 0], b = [[4]]: global norm √(9+16) = 5.
	grads := func() Params {
		return Params{"a": vec(e, []float64{3, 0}), "b": mx.FromFloat32(e, []float32{4}, 1, 1)}
	}
	tests := []struct {
		name    string
		maxNorm float64
		wantA   []float64
		wantB   float64
	}{
		// 10/(5+1e-6) > 1: scale 1, unchanged.
		{"below", 10, []float64{3, 0}, 4},
		// 1/(5+1e-6) = 0.19999996: a = [0.5999999, 0], b = 0.7999998.
		{"above", 1, []float64{3 / 5.000001, 0}, 4 / 5.000001},
		// MLX's form scales even at equality: 5/(5+1e-6) = 0.9999998, a[0] = 2.9999994.
		{"equal", 5, []float64{3 * 5 / 5.000001, 0}, 4 * 5 / 5.000001},
		// max_norm 0 zeroes the gradients.
		{"zero", 0, []float64{0, 0}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := grads()
			out, norm := ClipGradNorm(in, tc.maxNorm)
			if norm != 5 {
				t.Errorf("norm = %g, want 5", norm)
			}
			if got := f64s(out["a"]); !closeTo(got, tc.wantA, 1e-7) {
				t.Errorf("a = %.9g, want %.9g", got, tc.wantA)
			}
			if got := f64s(out["b"]); !(math.Abs(got[0]-tc.wantB) <= 1e-7) || out["b"].Ndim() != 2 {
				t.Errorf("b = %.9g %v, want %.9g [1 1]", got, out["b"].Shape(), tc.wantB)
			}
			if got := f64s(in["a"]); got[0] != 3 {
				t.Errorf("input modified: a = %v", got)
			}
		})
	}
	t.Run("equal is not identity", func(t *testing.T) {
		// The float32 nearest 2.9999994 differs from 3: MLX's 1e-6 is observable.
		out, _ := ClipGradNorm(grads(), 5)
		if out["a"].Float32s()[0] == 3 {
			t.Fatal("norm equal to max_norm left the gradient unscaled")
		}
	})
	t.Run("empty and nil", func(t *testing.T) {
		out, norm := ClipGradNorm(Params{"x": nil}, 1)
		if norm != 0 || len(out) != 1 || out["x"] != nil {
			t.Fatalf("ClipGradNorm({x: nil}) = %v, %g", out, norm)
		}
	})
	t.Run("non-finite norm", func(t *testing.T) {
		in := Params{"a": vec(e, []float64{math.Inf(1), 1})}
		out, norm := ClipGradNorm(in, 1)
		if !math.IsInf(norm, 1) || out["a"] != in["a"] {
			t.Fatalf("norm %g, gradient replaced %v", norm, out["a"] != in["a"])
		}
	})
	t.Run("negative max_norm panics", func(t *testing.T) {
		defer func() {
			if msg, _ := recover().(string); !strings.Contains(msg, "max_norm should be >= 0, -1 was provided") {
				t.Fatalf("panic %q", msg)
			}
		}()
		ClipGradNorm(grads(), -1)
	})
}

func TestAccumulator(t *testing.T) {
	e := mxtest.Go(t)
	var acc Accumulator
	if _, err := acc.Average(); !errors.Is(err, ErrAccumulatorEmpty) {
		t.Fatalf("Average() on empty = %v, want ErrAccumulatorEmpty", err)
	}
	micro := [][]float64{{1, -2}, {0.5, 4}, {-0.25, 1}}
	for i, g := range micro {
		grads := Params{"w": vec(e, g), "b": vec(e, []float64{float64(i)})}
		if err := acc.Add(grads); err != nil {
			t.Fatal(err)
		}
		// The caller owns its gradients and may free them at once (a freed Array
		// panics when used, so a kept reference would fail below).
		for _, g := range grads {
			g.Free()
		}
		if n := len(acc.sum); n != 2 {
			t.Fatalf("the accumulator holds %d sums, want 2", n)
		}
	}
	if acc.n != 3 {
		t.Fatalf("%d Adds counted, want 3", acc.n)
	}
	avg, err := acc.Average()
	if err != nil {
		t.Fatal(err)
	}
	// w: (1+0.5−0.25)/3 = 0.4166667, (−2+4+1)/3 = 1; b: (0+1+2)/3 = 1.
	if got := f64s(avg["w"]); !closeTo(got, []float64{1.25 / 3, 1}, 1e-7) {
		t.Errorf("w = %v, want [0.4166667 1]", got)
	}
	if got := f64s(avg["b"]); !closeTo(got, []float64{1}, 1e-7) {
		t.Errorf("b = %v, want [1]", got)
	}

	t.Run("mismatch", func(t *testing.T) {
		tests := []struct {
			name  string
			grads Params
			want  []string
		}{
			{"missing", Params{"w": vec(e, micro[0])}, []string{`missing gradient "b"`}},
			{"unexpected", Params{"w": vec(e, micro[0]), "b": vec(e, []float64{1}), "c": vec(e, []float64{1})}, []string{`unexpected gradient "c"`}},
			{"shape", Params{"w": vec(e, []float64{1, 2, 3}), "b": vec(e, []float64{1})}, []string{`gradient "w" is [3] float32, earlier ones [2] float32`}},
			{"nil", Params{"w": nil, "b": vec(e, []float64{1})}, []string{`gradient "w" is nil`}},
			{"empty", Params{}, []string{"no gradients", `missing gradient "b"`, `missing gradient "w"`}},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				err := acc.Add(tc.grads)
				if !errors.Is(err, ErrGradMismatch) {
					t.Fatalf("error %v does not wrap ErrGradMismatch", err)
				}
				for _, w := range tc.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not mention %q", err, w)
					}
				}
				if acc.n != 3 {
					t.Errorf("%d Adds counted after a rejected Add", acc.n)
				}
			})
		}
	})

	acc.Reset()
	if acc.n != 0 {
		t.Fatalf("%d Adds counted after Reset", acc.n)
	}
	if _, err := acc.Average(); !errors.Is(err, ErrAccumulatorEmpty) {
		t.Fatalf("Average() after Reset = %v", err)
	}
	// After a reset the name set is free again, and one micro-batch averages to itself.
	if err := acc.Add(Params{"z": vec(e, []float64{2.5})}); err != nil {
		t.Fatal(err)
	}
	avg, err = acc.Average()
	if err != nil {
		t.Fatal(err)
	}
	if got := f64s(avg["z"]); got[0] != 2.5 {
		t.Fatalf("z = %v, want [2.5]", got)
	}
	if err := (&Accumulator{}).Add(Params{"w": nil}); !errors.Is(err, ErrGradMismatch) || !strings.Contains(err.Error(), `gradient "w" is nil`) {
		t.Fatalf("first Add with a nil gradient: %v", err)
	}
}
