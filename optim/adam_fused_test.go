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

// TestAdamFusedMatchesComposed: on the go engine, AdamW's one-pass update (mx.AdamStep)
// gives bitwise the parameters and state of the op-by-op composition, over several steps
// with and without weight decay, for shapes whose sizes are and are not multiples of the
// parallel split, with the learning rate changed between steps.
func TestAdamFusedMatchesComposed(t *testing.T) {
	goEng := mxtest.Go(t)
	if _, ok := goEng.(mx.AdamStepper); !ok {
		t.Fatal("the go engine lost its fused Adam step")
	}
	plain := composedOnly{goEng}
	if _, ok := mx.Engine(plain).(mx.AdamStepper); ok {
		t.Fatal("wrapper still has the capability")
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
		fusedOpt, err := NewAdamW(mk(goEng), cfg)
		if err != nil {
			t.Fatal(err)
		}
		plainOpt, err := NewAdamW(mk(plain), cfg)
		if err != nil {
			t.Fatal(err)
		}
		pf, pp := load(goEng), load(plain)
		for step := range 4 {
			gf, gp := Params{}, Params{}
			for n, s := range shapes {
				g := make([]float32, len(vals[n]))
				for i := range g {
					g[i] = float32(rng.NormFloat64() * 0.1)
				}
				gf[n], gp[n] = mx.FromSlice(goEng, g, s, mx.Float32), mx.FromSlice(plain, g, s, mx.Float32)
			}
			if step == 2 {
				fusedOpt.SetLearningRate(3e-3)
				plainOpt.SetLearningRate(3e-3)
			}
			pf, pp = fusedOpt.Update(pf, gf), plainOpt.Update(pp, gp)
			for n := range shapes {
				a, b := pf[n].Float32s(), pp[n].Float32s()
				for i := range a {
					if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
						t.Fatalf("wd %g step %d %s[%d]: fused %v, composed %v", wd, step, n, i, a[i], b[i])
					}
				}
			}
		}
		for k, sf := range fusedOpt.State() {
			a, b := sf.Float32s(), plainOpt.State()[k].Float32s()
			for i := range a {
				if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
					t.Fatalf("wd %g state %s[%d]: fused %v, composed %v", wd, k, i, a[i], b[i])
				}
			}
		}
	}
}
