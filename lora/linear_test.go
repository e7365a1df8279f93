package lora

import (
	"math"
	"testing"

	"github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
)

func TestLinearForward(t *testing.T) {
	e := mxtest.Go(t)
	// x = [1 2 3]; W = [[1 0 0], [0 1 1]] so base(x) = x·Wᵀ = [1, 5].
	// A = [1 0 −1]ᵀ so x·A = 1 − 3 = −2; B = [0.5 1] so x·A·B = [−1, −2].
	// y = base + scale·[−1, −2].
	base := &diffusiongemma.Dense{W: mx.FromFloat32(e, []float32{1, 0, 0, 0, 1, 1}, 2, 3)}
	x := mx.FromFloat32(e, []float32{1, 2, 3}, 1, 3)
	for _, tc := range []struct {
		scale float64
		want  []float32
	}{
		{0, []float32{1, 5}},
		{2, []float32{-1, 1}},
		{0.5, []float32{0.5, 4}},
		{-1, []float32{2, 7}},
	} {
		l := &Linear{Base: base, A: mx.FromFloat32(e, []float32{1, 0, -1}, 3, 1),
			B: mx.FromFloat32(e, []float32{0.5, 1}, 1, 2), Scale: tc.scale}
		got := l.Forward(x).Float32s()
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("scale %v: Forward(x) = %v, want %v", tc.scale, got, tc.want)
				break
			}
		}
		if in, out := l.Dims(); in != 3 || out != 2 {
			t.Errorf("Dims() = %d, %d, want 3, 2", in, out)
		}
		if l.Rank() != 1 {
			t.Errorf("Rank() = %d, want 1", l.Rank())
		}
	}
}

func TestLinearCastsToInputDType(t *testing.T) {
	e := mxtest.Go(t)
	// A bf16 input: the f32 residual is cast back, so the output stays bf16 (MLX semantics).
	base := &diffusiongemma.Dense{W: mx.AsType(mx.FromFloat32(e, []float32{1, 0, 0, 1}, 2, 2), mx.BFloat16)}
	l := &Linear{Base: base, A: mx.FromFloat32(e, []float32{1, 1}, 2, 1), B: mx.FromFloat32(e, []float32{1, 1}, 1, 2), Scale: 1}
	x := mx.AsType(mx.FromFloat32(e, []float32{1, 2}, 1, 2), mx.BFloat16)
	y := l.Forward(x)
	if y.DType() != mx.BFloat16 {
		t.Fatalf("output dtype %s, want bfloat16", y.DType())
	}
	// base = [1, 2]; x·A·B = [3, 3]; y = [4, 5], exact in bf16.
	if got := y.Float32s(); got[0] != 4 || got[1] != 5 {
		t.Fatalf("Forward = %v, want [4 5]", got)
	}
}

func TestLinearDropout(t *testing.T) {
	e := mxtest.Go(t)
	const n, p = 64, 0.25
	// Zero base, A = B = I, scale 1: y = dropout(x). With x all ones every element is
	// either 0 (dropped) or 1/(1−p) (kept and rescaled).
	zero := &diffusiongemma.Dense{W: mx.Zeros(e, []int{n, n}, mx.Float32)}
	eye := make([]float32, n*n)
	for i := range n {
		eye[i*n+i] = 1
	}
	l := &Linear{Base: zero, A: mx.FromFloat32(e, eye, n, n), B: mx.FromFloat32(e, eye, n, n), Scale: 1, Dropout: p}
	x := mx.Ones(e, []int{1, n}, mx.Float32)

	for i, v := range l.Forward(x).Float32s() {
		if v != 1 {
			t.Fatalf("not training: element %d = %v, want 1 (dropout off)", i, v)
		}
	}
	l.SetTraining(mx.Key(e, 3))
	first := l.Forward(x).Float32s()
	second := l.Forward(x).Float32s()
	kept := 1 / (1 - p)
	dropped := 0
	for i, v := range first {
		if v != 0 && math.Abs(float64(v)-kept) > 1e-6 {
			t.Fatalf("training: element %d = %v, want 0 or %v", i, v, kept)
		}
		if v == 0 {
			dropped++
		}
	}
	if dropped == 0 || dropped == n {
		t.Fatalf("training: %d of %d dropped, want some but not all", dropped, n)
	}
	same := true
	for i := range first {
		same = same && first[i] == second[i]
	}
	if same {
		t.Fatal("two calls in one step drew the same mask; want a fresh mask per call")
	}
	l.SetTraining(mx.Key(e, 3))
	replay := l.Forward(x).Float32s()
	for i := range first {
		if replay[i] != first[i] {
			t.Fatal("resetting the same key did not replay the same mask")
		}
	}
	l.SetTraining(nil)
	for i, v := range l.Forward(x).Float32s() {
		if v != 1 {
			t.Fatalf("after SetTraining(nil): element %d = %v, want 1", i, v)
		}
	}
}
