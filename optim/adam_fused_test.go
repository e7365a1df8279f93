package optim

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
)

// composedOnly is the go engine without its optional capabilities: an optimizer on it
// takes the op-by-op path.
type composedOnly struct{ mx.Engine }

// stepOnly is the go engine with its per-parameter fused step but not the one over all
// parameters: an optimizer on it calls mx.AdamStep once per parameter.
type stepOnly struct {
	mx.Engine
	s mx.AdamStepper
}

func (e stepOnly) AdamStep(p, g, m, v mx.Handle, c mx.AdamConstants) (mx.Handle, mx.Handle, mx.Handle) {
	return e.s.AdamStep(p, g, m, v, c)
}

// TestAdamFusedMatchesComposed: on the go engine, AdamW's one-pass update (mx.AdamStep)
// gives bitwise the parameters and state of the op-by-op composition, over several steps
// with and without weight decay, for shapes whose sizes are and are not multiples of the
// parallel split, with the learning rate changed between steps.
func TestAdamFusedMatchesComposed(t *testing.T) {
	goEng := mxtest.Go(t)
	if _, ok := goEng.(mx.AdamStepper); !ok {
		t.Fatal("the go engine lost its fused Adam step")
	}
	if _, ok := goEng.(mx.AdamStepperAll); !ok {
		t.Fatal("the go engine lost its fused Adam step over all parameters")
	}
	plain := composedOnly{goEng}
	if _, ok := mx.Engine(plain).(mx.AdamStepper); ok {
		t.Fatal("wrapper still has the capability")
	}
	single := stepOnly{goEng, goEng.(mx.AdamStepper)}
	if _, ok := mx.Engine(single).(mx.AdamStepperAll); ok {
		t.Fatal("the one-by-one wrapper still steps all parameters at once")
	}
	for _, wd := range []float64{0, 0.05} {
		rng := rand.New(rand.NewPCG(31, uint64(wd*100)))
		shapes := map[string][]int{"a": {512, 8}, "b": {8, 1000}, "c": {3}}
		mk := func(e mx.Engine) Params {
			ps := Params{}
			for n, s := range shapes {
				ps[n] = mx.Zeros(e, s, mx.Float32)
			}
			return ps
		}
		vals := map[string][]float32{}
		for n, s := range shapes {
			v := make([]float32, mx.Zeros(goEng, s, mx.Float32).Size())
			for i := range v {
				v[i] = float32(rng.NormFloat64())
			}
			vals[n] = v
		}
		load := func(e mx.Engine) Params {
			ps := Params{}
			for n, s := range shapes {
				ps[n] = mx.FromSlice(e, vals[n], s, mx.Float32)
			}
			return ps
		}
		cfg := AdamWDefaults(1e-2)
		cfg.WeightDecay = wd
		// All parameters at once (the go engine), one by one (stepOnly), op by op (plain).
		engines := []mx.Engine{goEng, single, plain}
		opts := make([]*Adam, len(engines))
		ps := make([]Params, len(engines))
		for i, e := range engines {
			o, err := NewAdamW(mk(e), cfg)
			if err != nil {
				t.Fatal(err)
			}
			opts[i], ps[i] = o, load(e)
		}
		for step := range 4 {
			gs := make([]Params, len(engines))
			for n, s := range shapes {
				g := make([]float32, len(vals[n]))
				for i := range g {
					g[i] = float32(rng.NormFloat64() * 0.1)
				}
				for i, e := range engines {
					if gs[i] == nil {
						gs[i] = Params{}
					}
					gs[i][n] = mx.FromSlice(e, g, s, mx.Float32)
				}
			}
			for i, o := range opts {
				if step == 2 {
					o.SetLearningRate(3e-3)
				}
				ps[i] = o.Update(ps[i], gs[i])
			}
			for i := range 2 {
				for n := range shapes {
					a, b := ps[i][n].Float32s(), ps[2][n].Float32s()
					for j := range a {
						if math.Float32bits(a[j]) != math.Float32bits(b[j]) {
							t.Fatalf("wd %g step %d %s[%d]: %T %v, composed %v", wd, step, n, j, engines[i], a[j], b[j])
						}
					}
				}
			}
		}
		for i := range 2 {
			for k, sf := range opts[i].State() {
				a, b := sf.Float32s(), opts[2].State()[k].Float32s()
				for j := range a {
					if math.Float32bits(a[j]) != math.Float32bits(b[j]) {
						t.Fatalf("wd %g state %s[%d]: %T %v, composed %v", wd, k, j, engines[i], a[j], b[j])
					}
				}
			}
		}
	}
}
