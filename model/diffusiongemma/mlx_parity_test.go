//go:build mlx

package diffusiongemma_test

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/dgtune/dgtune/lora"
	dg "github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/model/diffusiongemma/dgtest"
	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
	"github.com/dgtune/dgtune/objective"
)

// Tolerances of the tiny model on MLX against the go engine, relative to the largest
// |value| on the go engine. Both run float32 chains of a few hundred ops (bfloat16
// scales on the quantized model); they differ in libm rounding and summation order,
// which the decoder's norms and the softcap keep from growing.
const (
	logitTol = 1e-4
	gradTol  = 5e-4
)

// transfer copies arrays to another engine through their little-endian bytes.
func transfer(e mx.Engine, src map[string]*mx.Array) map[string]*mx.Array {
	out := make(map[string]*mx.Array, len(src))
	for n, a := range src {
		out[n] = mx.FromBytes(e, mx.Bytes(a), a.Shape(), a.DType())
	}
	return out
}

// twins builds the tiny preset from one set of synthetic weights on both engines.
func twins(t *testing.T, bits string) (goM, mlxM *dg.Model) {
	t.Helper()
	m, err := mx.Open("mlx")
	if err != nil {
		t.Fatal(err)
	}
	g := mxtest.GoFollowing(t, m)
	cfg, w := dgtest.Tiny(1, bits).Weights(t, g)
	return dgtest.Build(t, g, cfg, w), dgtest.Build(t, m, cfg, transfer(m, w))
}

func scaleOf(v []float32) float64 {
	s := 0.0
	for _, x := range v {
		s = math.Max(s, math.Abs(float64(x)))
	}
	return s
}

func maxAbsDiff(a, b []float32) float64 {
	d := 0.0
	for i := range a {
		d = math.Max(d, math.Abs(float64(a[i])-float64(b[i])))
	}
	return d
}

var (
	prompt = []int32{2, 105, 236, 107, 17, 300, 106, 107, 105, 4, 107} // all < vocab 512
	canvas = []int32{5, 9, 500, 1, 1, 77, 3, 250, 6, 6, 411, 12, 0, 8, 99, 100}
)

// TestForwardParityMLX compares Model.Forward logits of the tiny model on MLX with the
// go engine, unquantized and 4-bit.
func TestForwardParityMLX(t *testing.T) {
	for _, bits := range []string{dg.BitsNone, dg.Bits4} {
		t.Run("bits="+bits, func(t *testing.T) {
			goM, mlxM := twins(t, bits)
			logits := func(m *dg.Model) *mx.Array {
				e := m.Engine
				return m.Forward(mx.FromInt32(e, prompt, 1, len(prompt)), mx.FromInt32(e, canvas, 1, len(canvas)))
			}
			want := logits(goM)
			var got []float32
			var gotShape []int
			var gotArg []int32
			mx.Tidy(mlxM.Engine, func() []*mx.Array {
				l := logits(mlxM)
				got, gotShape, gotArg = l.Float32s(), l.Shape(), mx.Argmax(l, -1, false).Int32s()
				return nil
			})
			if !slices.Equal(gotShape, want.Shape()) {
				t.Fatalf("logits %v on mlx, %v on go", gotShape, want.Shape())
			}
			wv := want.Float32s()
			scale := scaleOf(wv)
			d := maxAbsDiff(wv, got)
			t.Logf("bits=%s: max |mlx − go| = %.3g over logits up to %.3g", bits, d, scale)
			if d > logitTol*math.Max(1, scale) {
				t.Errorf("logits differ by %g (tolerance %g)", d, logitTol*math.Max(1, scale))
			}
			if wa := mx.Argmax(want, -1, false).Int32s(); !slices.Equal(wa, gotArg) {
				t.Errorf("argmax %v on mlx, %v on go", gotArg, wa)
			}
		})
	}
}

// TestLoRAGradParityMLX compares d loss / d LoRA parameters of the tiny model (the
// training objective on one fixed corruption) on both engines.
func TestLoRAGradParityMLX(t *testing.T) {
	for _, bits := range []string{dg.BitsNone, dg.Bits4} {
		t.Run("bits="+bits, func(t *testing.T) {
			goM, mlxM := twins(t, bits)
			cfg := lora.DefaultConfig()
			goA, err := lora.Attach(goM, cfg, 3)
			if err != nil {
				t.Fatal(err)
			}
			mlxA, err := lora.Attach(mlxM, cfg, 3)
			if err != nil {
				t.Fatal(err)
			}
			// B starts at zero, which would make every d/dA zero: give B values too, then
			// copy the go adapter's parameters to MLX.
			params := goA.Params()
			for i, n := range goA.Names() {
				if p := params[n]; strings.HasSuffix(n, ".lora_b") {
					params[n] = mx.FromFloat32(goM.Engine, floats(uint64(i), p.Size(), -0.05, 0.05), p.Shape()...)
				}
			}
			if err := goA.SetParams(params); err != nil {
				t.Fatal(err)
			}
			if err := mlxA.SetParams(transfer(mlxM.Engine, params)); err != nil {
				t.Fatal(err)
			}
			target := slices.Clone(canvas)
			target[2], target[7] = 42, 43
			c := objective.Corruption{T: 0.5, Canvas: canvas, Corrupt: make([]bool, len(canvas))}
			for i := range c.Corrupt {
				c.Corrupt[i] = canvas[i] != target[i] || i%3 == 0
			}
			obj := objective.Reference(0.2, 0.8)
			ex := objective.Example{Prompt: prompt, Target: target}
			run := func(m *dg.Model, a *lora.Adapter) (float32, map[string][]float32) {
				names := a.Names()
				cur := a.Params()
				args := make([]*mx.Array, len(names))
				for i, n := range names {
					args[i] = cur[n]
				}
				vals, grads := mx.ValueAndGrad(func(in []*mx.Array) []*mx.Array {
					traced := make(map[string]*mx.Array, len(names))
					for i, n := range names {
						traced[n] = in[i]
					}
					if err := a.SetParams(traced); err != nil {
						panic(err)
					}
					loss, _ := objective.BatchLoss([]objective.Terms{obj.ExampleTerms(m, ex, c)})
					return []*mx.Array{loss}
				})(args)
				if err := a.SetParams(cur); err != nil {
					t.Fatal(err)
				}
				out := make(map[string][]float32, len(names))
				for i, n := range names {
					out[n] = grads[i].Float32s()
				}
				return vals[0].Float32s()[0], out
			}
			wl, wg := run(goM, goA)
			var gl float32
			var gg map[string][]float32
			mx.Tidy(mlxM.Engine, func() []*mx.Array { gl, gg = run(mlxM, mlxA); return nil })
			if d := math.Abs(float64(wl - gl)); d > logitTol*math.Max(1, math.Abs(float64(wl))) {
				t.Errorf("loss %v on mlx, %v on go", gl, wl)
			}
			scale, worst, worstName := 0.0, 0.0, ""
			for _, v := range wg {
				scale = math.Max(scale, scaleOf(v))
			}
			for n, v := range wg {
				if d := maxAbsDiff(v, gg[n]); d > worst {
					worst, worstName = d, n
				}
			}
			t.Logf("bits=%s: loss %v; %d LoRA gradients, largest |go| %.3g, max |mlx − go| %.3g (%s)", bits, wl, len(wg), scale, worst, worstName)
			if scale == 0 {
				t.Fatalf("all gradients are zero: the test checks nothing")
			}
			if worst > gradTol*scale {
				t.Errorf("gradient %s differs by %g (tolerance %g)", worstName, worst, gradTol*scale)
			}
		})
	}
}

func floats(seed uint64, n int, lo, hi float64) []float32 {
	v := make([]float32, n)
	x := seed*2654435761 + 12345
	for i := range v {
		x = x*6364136223846793005 + 1442695040888963407
		v[i] = float32(lo + (hi-lo)*float64(x>>11)/float64(1<<53))
	}
	return v
}
