package mx_test

import (
	"math"
	"testing"

	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
)

// noAdamStep is the go engine without its fused Adam step: mx.AdamStep composes the ops.
type noAdamStep struct{ mx.Engine }

// TestAdamStepComposition: mx.AdamStep's composition (an engine without AdamStepper) and
// the go engine's one-pass update both give, to the bit, the update written out in Go
// float32 arithmetic (each product rounded before the next operation, as the ops round).
func TestAdamStepComposition(t *testing.T) {
	goEng := mxtest.Go(t)
	if _, ok := goEng.(mx.AdamStepper); !ok {
		t.Fatal("the go engine lost its fused Adam step")
	}
	plain := noAdamStep{goEng}
	if _, ok := mx.Engine(plain).(mx.AdamStepper); ok {
		t.Fatal("wrapper still has the capability")
	}
	p := []float32{0.5, -1.25, 3, 1e-3, -7}
	g := []float32{0.1, -0.02, 0, 2.5, -0.3}
	m := []float32{0.01, 0.2, -0.05, 0, 1}
	v := []float32{1e-4, 0.3, 2e-6, 0, 0.5}
	for _, wd := range []float32{0, 0.05} {
		lr := float32(3e-3)
		c := mx.AdamConstants{LR: lr, B1: 0.9, OneMinusB1: float32(1 - 0.9), B2: 0.999, OneMinusB2: float32(1 - 0.999), Eps: 1e-8}
		if wd != 0 {
			c.HasDecay, c.WeightDecay, c.Decay = true, wd, 1-float32(lr*wd)
		}
		wantP, wantM, wantV := make([]float32, len(p)), make([]float32, len(p)), make([]float32, len(p))
		for i := range p {
			pi := p[i]
			if c.HasDecay {
				pi = float32(pi * c.Decay)
			}
			wantM[i] = float32(m[i]*c.B1) + float32(g[i]*c.OneMinusB1)
			wantV[i] = float32(v[i]*c.B2) + float32(float32(g[i]*g[i])*c.OneMinusB2)
			den := float32(math.Sqrt(float64(wantV[i]))) + c.Eps
			wantP[i] = pi - float32(float32(lr*wantM[i])/den)
		}
		for _, e := range []mx.Engine{plain, goEng} {
			arr := func(x []float32) *mx.Array { return mx.FromFloat32(e, x, len(x)) }
			np, nm, nv := mx.AdamStep(arr(p), arr(g), arr(m), arr(v), c)
			for k, pair := range [][2][]float32{{np.Float32s(), wantP}, {nm.Float32s(), wantM}, {nv.Float32s(), wantV}} {
				for i := range pair[0] {
					if math.Float32bits(pair[0][i]) != math.Float32bits(pair[1][i]) {
						t.Errorf("%T wd %g output %d [%d]: %v, want %v", e, wd, k, i, pair[0][i], pair[1][i])
					}
				}
			}
		}
	}
}

func TestAdamStepBadInput(t *testing.T) {
	e := mxtest.Go(t)
	f32 := mx.FromFloat32(e, []float32{1, 2}, 2)
	short := mx.FromFloat32(e, []float32{1}, 1)
	bf16 := mx.AsType(f32, mx.BFloat16)
	var c mx.AdamConstants
	for _, tc := range []struct {
		name       string
		p, g, m, v *mx.Array
		want       string
	}{
		{"shape", f32, f32, short, f32, "mx: adam_step: p [2] float32, g [2] float32, m [1] float32, v [2] float32 must be float32 of one shape"},
		{"dtype", bf16, bf16, bf16, bf16, "mx: adam_step: p [2] bfloat16, g [2] bfloat16, m [2] bfloat16, v [2] bfloat16 must be float32 of one shape"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				r := recover()
				if s, _ := r.(string); s != tc.want {
					t.Errorf("panic %v, want %q", r, tc.want)
				}
			}()
			mx.AdamStep(tc.p, tc.g, tc.m, tc.v, c)
		})
	}
}
