//go:build mlx

package mlxeng

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/dgtune/dgtune/mx"
)

// TestAdamKernelSwitch: the multi-tensor AdamW kernel is on only on a CUDA GPU and only
// when MLXENG_ADAM=kernel asks for it.
func TestAdamKernelSwitch(t *testing.T) {
	cuda := runtime.GOOS != "darwin"
	for _, c := range []struct {
		device, env string
		want        bool
	}{
		{"gpu", "kernel", cuda},
		{"gpu", "", false},
		{"gpu", "compiled", false},
		{"cpu", "kernel", false},
	} {
		if got := adamKernelOn(c.device, c.env); got != c.want {
			t.Errorf("adamKernelOn(%q, %q) = %v, want %v", c.device, c.env, got, c.want)
		}
	}
}

// TestAdamKernelTakes: the kernel takes updates of non-empty tensors with at least one
// axis and constants that are not negative, and leaves the rest to the compiled update.
func TestAdamKernelTakes(t *testing.T) {
	e, err := open()
	if err != nil {
		t.Fatal(err)
	}
	c := mx.AdamConstants{B1: 0.9, OneMinusB1: 0.1, B2: 0.999, OneMinusB2: 0.001, Eps: 1e-8, WeightDecay: 0.01}
	arr := func(shape ...int) *array { return get(mx.Zeros(e, shape, mx.Float32).Handle()) }
	if !adamKernelTakes([]*array{arr(8, 3), arr(17)}, c) {
		t.Error("refused two float32 tensors")
	}
	if adamKernelTakes([]*array{arr(8, 3), arr(0, 4)}, c) {
		t.Error("took an empty tensor")
	}
	if adamKernelTakes([]*array{arr(8, 3), arr()}, c) {
		t.Error("took a tensor without axes (MLX passes no shape for it)")
	}
	neg := c
	neg.Eps = -1e-8
	if adamKernelTakes([]*array{arr(8, 3)}, neg) {
		t.Error("took a negative constant")
	}
}

// TestAdamKernelMatchesComposition: on a CUDA GPU the kernel's update over 20 tensors (a
// full group and a partial one) gives mx.AdamCompose's bits op by op, uncompiled, with and
// without weight decay, for two learning rates.
func TestAdamKernelMatchesComposition(t *testing.T) {
	e, err := open()
	if err != nil {
		t.Fatal(err)
	}
	if !isCUDA(e.device) {
		t.Skip("the AdamW kernel runs on a CUDA GPU only")
	}
	saved := e.adamKernels.on
	t.Cleanup(func() { e.adamKernels.on = saved })
	e.adamKernels.on = true
	rng := rand.New(rand.NewPCG(3, 4))
	var ps, gs, ms, vs []*mx.Array
	for i := range 20 {
		shape := []int{1 + i%5, 3 + 7*i}
		n := shape[0] * shape[1]
		gen := func(lo, hi float32, pow int) *mx.Array {
			v := make([]float32, n)
			for j := range v {
				v[j] = (lo + (hi-lo)*rng.Float32()) * float32(math.Pow(float64(rng.Float32()), float64(pow)))
			}
			return mx.FromFloat32(e, v, shape...)
		}
		ps, gs, ms, vs = append(ps, gen(-2, 2, 0)), append(gs, gen(-0.5, 0.5, 0)), append(ms, gen(-0.1, 0.1, 0)), append(vs, gen(0, 0.2, 8))
	}
	for _, wd := range []float32{0, 0.05} {
		for _, lr := range []float32{3e-3, 1e-4} {
			t.Run(fmt.Sprintf("wd_%g_lr_%g", wd, lr), func(t *testing.T) {
				c := mx.AdamConstants{LR: lr, B1: 0.9, OneMinusB1: float32(1 - 0.9), B2: 0.999, OneMinusB2: float32(1 - 0.999), Eps: 1e-8}
				if wd != 0 {
					c.HasDecay, c.WeightDecay, c.Decay = true, wd, 1-lr*wd
				}
				np, nm, nv, ok := mx.AdamStepAll(ps, gs, ms, vs, c)
				if !ok {
					t.Fatal("AdamStepAll refused float32 parameters")
				}
				for i := range ps {
					wp, wm, wv := mx.AdamCompose(ps[i], gs[i], ms[i], vs[i], mx.Scalar(e, float64(lr), mx.Float32), c)
					for k, pair := range [][2]*mx.Array{{np[i], wp}, {nm[i], wm}, {nv[i], wv}} {
						if got, want := pair[0].Shape(), pair[1].Shape(); fmt.Sprint(got) != fmt.Sprint(want) {
							t.Fatalf("param %d output %d: shape %v, want %v", i, k, got, want)
						}
						got, want := pair[0].Float32s(), pair[1].Float32s()
						for j := range want {
							if math.Float32bits(got[j]) != math.Float32bits(want[j]) {
								t.Fatalf("param %d output %d [%d]: kernel %v, composition %v", i, k, j, got[j], want[j])
							}
						}
					}
				}
			})
		}
	}
}
