package optim

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
)

// The hand vectors every optimizer test starts from: one parameter "w" of three
// elements and the gradients of two consecutive steps.
var (
	w0 = []float64{1.0, -2.0, 0.5}
	g1 = []float64{0.1, -0.2, 0.3}
	g2 = []float64{-0.4, 0.05, 0.2}
)

// adamRef is Adam(W) in float64, written from the textbook formulas (not MLX's
// operation order) so it checks the code rather than restating it:
//
//	m ← β1 m + (1−β1) g;  v ← β2 v + (1−β2) g²;  w ← w (1 − lr·wd)
//	m̂, v̂ = m, v   or, with bias correction, m/(1−β1^t), v/(1−β2^t)
//	w ← w − lr m̂ / (√v̂ + eps)
type adamRef struct {
	lr, b1, b2, eps, wd float64
	bc                  bool
	m, v                []float64
	t                   int
}

func (r *adamRef) step(w, g []float64) []float64 {
	if r.m == nil {
		r.m, r.v = make([]float64, len(w)), make([]float64, len(w))
	}
	r.t++
	out := make([]float64, len(w))
	for i := range w {
		r.m[i] = r.b1*r.m[i] + (1-r.b1)*g[i]
		r.v[i] = r.b2*r.v[i] + (1-r.b2)*g[i]*g[i]
		mh, vh := r.m[i], r.v[i]
		if r.bc {
			mh /= 1 - math.Pow(r.b1, float64(r.t))
			vh /= 1 - math.Pow(r.b2, float64(r.t))
		}
		out[i] = w[i]*(1-r.lr*r.wd) - r.lr*mh/(math.Sqrt(vh)+r.eps)
	}
	return out
}

// sgdRef is MLX's SGD in float64: g ← g + wd·w; v ← μv + (1−τ)g; w ← w − lr·v
// (Nesterov: w ← w − lr·(g + μv)); plain w ← w − lr·g when μ = 0.
type sgdRef struct {
	lr, mu, wd, damp float64
	nesterov         bool
	v                []float64
}

func (r *sgdRef) step(w, g []float64) []float64 {
	if r.v == nil {
		r.v = make([]float64, len(w))
	}
	out := make([]float64, len(w))
	for i := range w {
		gi := g[i] + r.wd*w[i]
		if r.mu == 0 {
			out[i] = w[i] - r.lr*gi
			continue
		}
		r.v[i] = r.mu*r.v[i] + (1-r.damp)*gi
		upd := r.v[i]
		if r.nesterov {
			upd = gi + r.mu*r.v[i]
		}
		out[i] = w[i] - r.lr*upd
	}
	return out
}

func vec(e mx.Engine, v []float64) *mx.Array {
	f := make([]float32, len(v))
	for i, x := range v {
		f[i] = float32(x)
	}
	return mx.FromFloat32(e, f, len(f))
}

func f64s(a *mx.Array) []float64 {
	out := []float64{}
	for _, x := range a.Float32s() {
		out = append(out, float64(x))
	}
	return out
}

func closeTo(got, want []float64, tol float64) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		// Written as !(≤) so that NaN fails.
		if !(math.Abs(got[i]-want[i]) <= tol*(1+math.Abs(want[i]))) {
			return false
		}
	}
	return true
}

func TestOptimizersTwoSteps(t *testing.T) {
	e := mxtest.Go(t)
	type ref interface {
		step(w, g []float64) []float64
	}
	tests := []struct {
		name  string
		build func(Params) (Optimizer, error)
		ref   ref
		// want1 is element 0 after step 1, worked by hand to pin the reference itself.
		want1 float64
		// tol is relative; 1e-6 is float32 rounding. Bias correction needs 1e-5: like
		// MLX, the code forms 1−β2^t in float32, and at t=2 that difference of numbers
		// near 1 (0.001999) keeps only ~4 significant digits of float32's 7, which
		// moves the update (≈0.1) by ~1.5e-6.
		tol float64
	}{
		{
			// g=0.1: m=0.01, v=0.001·0.01=1e-5, √v=0.00316228;
			// w = 1·(1−0.1·0.01) − 0.1·0.01/(0.00316228+1e-8) = 0.999 − 0.3162268 = 0.6827732.
			name:  "adamw",
			build: func(p Params) (Optimizer, error) { return NewAdamW(p, AdamWDefaults(0.1)) },
			ref:   &adamRef{lr: 0.1, b1: 0.9, b2: 0.999, eps: 1e-8, wd: 0.01},
			want1: 0.6827732,
		},
		{
			// t=1: m̂ = g, v̂ = g², so w = 0.999 − 0.1·0.1/(0.1+1e-8) = 0.999 − 0.09999999 = 0.89900001.
			name: "adamw bias correction",
			build: func(p Params) (Optimizer, error) {
				c := AdamWDefaults(0.1)
				c.BiasCorrection = true
				return NewAdamW(p, c)
			},
			ref:   &adamRef{lr: 0.1, b1: 0.9, b2: 0.999, eps: 1e-8, wd: 0.01, bc: true},
			want1: 0.89900001,
			tol:   1e-5,
		},
		{
			// Other betas, a visible eps and a larger decay: m=0.02, v=0.05·0.01=5e-4,
			// √v=0.02236068; w = 1·(1−0.05·0.1) − 0.05·0.02/(0.02236068+0.01) = 0.995 − 0.0309017 = 0.9640983.
			name: "adamw custom",
			build: func(p Params) (Optimizer, error) {
				return NewAdamW(p, AdamConfig{LearningRate: 0.05, Betas: [2]float64{0.8, 0.95}, Eps: 0.01, WeightDecay: 0.1})
			},
			ref:   &adamRef{lr: 0.05, b1: 0.8, b2: 0.95, eps: 0.01, wd: 0.1},
			want1: 0.9640983,
		},
		{
			// No decay: w = 1 − 0.1·0.01/(0.00316228+1e-8) = 1 − 0.3162268 = 0.6837732.
			name:  "adam",
			build: func(p Params) (Optimizer, error) { return NewAdam(p, AdamDefaults(0.1)) },
			ref:   &adamRef{lr: 0.1, b1: 0.9, b2: 0.999, eps: 1e-8},
			want1: 0.6837732,
		},
		{
			// t=1 with bias correction and no decay: w = 1 − 0.1·0.1/(0.1+1e-8) = 0.90000001.
			name: "adam bias correction",
			build: func(p Params) (Optimizer, error) {
				c := AdamDefaults(0.1)
				c.BiasCorrection = true
				return NewAdam(p, c)
			},
			ref:   &adamRef{lr: 0.1, b1: 0.9, b2: 0.999, eps: 1e-8, bc: true},
			want1: 0.90000001,
			tol:   1e-5,
		},
		{
			// w = 1 − 0.5·0.1 = 0.95.
			name:  "sgd",
			build: func(p Params) (Optimizer, error) { return NewSGD(p, SGDConfig{LearningRate: 0.5}) },
			ref:   &sgdRef{lr: 0.5},
			want1: 0.95,
		},
		{
			// g ← 0.1 + 0.2·1 = 0.3; w = 1 − 0.5·0.3 = 0.85.
			name:  "sgd weight decay",
			build: func(p Params) (Optimizer, error) { return NewSGD(p, SGDConfig{LearningRate: 0.5, WeightDecay: 0.2}) },
			ref:   &sgdRef{lr: 0.5, wd: 0.2},
			want1: 0.85,
		},
		{
			// v = 0.9·0 + 0.1 = 0.1 (MLX does not special-case the first step);
			// w = 1 − 0.5·0.1 = 0.95; step 2 adds momentum: v = 0.09 − 0.4 = −0.31.
			name:  "sgd momentum",
			build: func(p Params) (Optimizer, error) { return NewSGD(p, SGDConfig{LearningRate: 0.5, Momentum: 0.9}) },
			ref:   &sgdRef{lr: 0.5, mu: 0.9},
			want1: 0.95,
		},
		{
			// v = (1−0.25)·0.1 = 0.075; w = 1 − 0.5·0.075 = 0.9625.
			name: "sgd momentum dampening",
			build: func(p Params) (Optimizer, error) {
				return NewSGD(p, SGDConfig{LearningRate: 0.5, Momentum: 0.9, Dampening: 0.25})
			},
			ref:   &sgdRef{lr: 0.5, mu: 0.9, damp: 0.25},
			want1: 0.9625,
		},
		{
			// v = 0.1; update = g + 0.9·v = 0.19; w = 1 − 0.5·0.19 = 0.905.
			name: "sgd nesterov",
			build: func(p Params) (Optimizer, error) {
				return NewSGD(p, SGDConfig{LearningRate: 0.5, Momentum: 0.9, Nesterov: true})
			},
			ref:   &sgdRef{lr: 0.5, mu: 0.9, nesterov: true},
			want1: 0.905,
		},
		{
			// g ← 0.1 + 0.2 = 0.3; v = 0.3; update = 0.3 + 0.9·0.3 = 0.57; w = 1 − 0.5·0.57 = 0.715.
			name: "sgd nesterov weight decay",
			build: func(p Params) (Optimizer, error) {
				return NewSGD(p, SGDConfig{LearningRate: 0.5, Momentum: 0.9, Nesterov: true, WeightDecay: 0.2})
			},
			ref:   &sgdRef{lr: 0.5, mu: 0.9, nesterov: true, wd: 0.2},
			want1: 0.715,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			params := Params{"w": vec(e, w0)}
			opt, err := tc.build(params)
			if err != nil {
				t.Fatal(err)
			}
			tol := cmp.Or(tc.tol, 1e-6)
			want := w0
			for i, g := range [][]float64{g1, g2} {
				want = tc.ref.step(want, g)
				params = opt.Update(params, Params{"w": vec(e, g)})
				got := f64s(params["w"])
				if !closeTo(got, want, tol) {
					t.Fatalf("step %d: w = %v, want %v", i+1, got, want)
				}
				if opt.Step() != i+1 {
					t.Fatalf("Step() = %d after %d updates", opt.Step(), i+1)
				}
				if i == 0 && !(math.Abs(got[0]-tc.want1) <= 1e-6) {
					t.Fatalf("step 1: w[0] = %.8f, hand value %.8f", got[0], tc.want1)
				}
			}
		})
	}
}

// The optimizer's moments must be the ones the formulas give, since they are what a
// checkpoint stores.
func TestAdamStateValues(t *testing.T) {
	e := mxtest.Go(t)
	params := Params{"w": vec(e, w0)}
	opt, err := NewAdamW(params, AdamWDefaults(0.1))
	if err != nil {
		t.Fatal(err)
	}
	params = opt.Update(params, Params{"w": vec(e, g1)})
	opt.Update(params, Params{"w": vec(e, g2)})
	// m2 = 0.9·(0.1·g1) + 0.1·g2; v2 = 0.999·(0.001·g1²) + 0.001·g2².
	wantM := []float64{0.9*0.01 + 0.1*-0.4, 0.9*-0.02 + 0.1*0.05, 0.9*0.03 + 0.1*0.2}
	wantV := []float64{0.999*0.001*0.01 + 0.001*0.16, 0.999*0.001*0.04 + 0.001*0.0025, 0.999*0.001*0.09 + 0.001*0.04}
	st := opt.State()
	if got := slices.Sorted(maps.Keys(st)); !slices.Equal(got, []string{"m.w", "v.w"}) {
		t.Fatalf("state keys %v, want [m.w v.w]", got)
	}
	if got := f64s(st["m.w"]); !closeTo(got, wantM, 1e-6) {
		t.Errorf("m = %v, want %v", got, wantM)
	}
	if got := f64s(st["v.w"]); !closeTo(got, wantV, 1e-6) {
		t.Errorf("v = %v, want %v", got, wantV)
	}
}

func TestSetLearningRate(t *testing.T) {
	e := mxtest.Go(t)
	params := Params{"w": vec(e, w0)}
	opt, err := NewSGD(params, SGDConfig{LearningRate: 1})
	if err != nil {
		t.Fatal(err)
	}
	opt.SetLearningRate(0.25)
	if opt.LearningRate() != 0.25 {
		t.Fatalf("LearningRate() = %g, want 0.25", opt.LearningRate())
	}
	// w = w0 − 0.25·g1 = [0.975, −1.95, 0.425].
	got := f64s(opt.Update(params, Params{"w": vec(e, g1)})["w"])
	if want := []float64{0.975, -1.95, 0.425}; !closeTo(got, want, 1e-6) {
		t.Fatalf("w = %v, want %v", got, want)
	}
}

// Parameters without a gradient (absent or nil) pass through untouched and keep their
// state, as MLX only updates the leaves of the gradient tree.
func TestUpdatePartialGrads(t *testing.T) {
	e := mxtest.Go(t)
	a, b := vec(e, w0), vec(e, []float64{7})
	params := Params{"a": a, "b": b}
	opt, err := NewAdamW(params, AdamWDefaults(0.1))
	if err != nil {
		t.Fatal(err)
	}
	ga := vec(e, g1)
	out := opt.Update(params, Params{"a": ga, "b": nil})
	if out["b"] != b {
		t.Errorf("parameter without gradient was replaced")
	}
	if out["a"] == a {
		t.Errorf("parameter with gradient was not updated")
	}
	if got := f64s(opt.State()["m.b"]); !slices.Equal(got, []float64{0}) {
		t.Errorf("m.b = %v, want [0]", got)
	}
	// Reading a freed Array panics, so these also check that Update frees neither input.
	if got := f64s(params["a"]); !slices.Equal(got, f64s(vec(e, w0))) {
		t.Errorf("input params modified: %v", got)
	}
	if got := f64s(ga); !slices.Equal(got, f64s(vec(e, g1))) {
		t.Errorf("input grads modified: %v", got)
	}
}

// Loading the optimizer's own state must not free the arrays being loaded.
func TestLoadOwnState(t *testing.T) {
	e := mxtest.Go(t)
	params := Params{"w": vec(e, w0)}
	opt, err := NewAdamW(params, AdamWDefaults(0.1))
	if err != nil {
		t.Fatal(err)
	}
	params = opt.Update(params, Params{"w": vec(e, g1)})
	if err := opt.LoadState(opt.State(), 7); err != nil {
		t.Fatal(err)
	}
	opt.Update(params, Params{"w": vec(e, g2)})
	if opt.Step() != 8 {
		t.Fatalf("Step() = %d, want 8", opt.Step())
	}
}

func TestUpdateMismatchPanics(t *testing.T) {
	e := mxtest.Go(t)
	params := Params{"w": vec(e, w0)}
	tests := []struct {
		name   string
		params Params
		grads  Params
		want   string
	}{
		{"unknown parameter", Params{"w": vec(e, w0), "x": vec(e, w0)}, Params{"x": vec(e, g1)}, `gradient for "x", a parameter the optimizer was not built for`},
		{"missing from params", Params{}, Params{"w": vec(e, g1)}, `gradient for "w", which is missing from params`},
		{"gradient shape", params, Params{"w": vec(e, []float64{1, 2})}, `gradient "w" is [2] float32, parameter is [3] float32`},
		{"parameter shape", Params{"w": vec(e, []float64{1})}, Params{"w": vec(e, g1)}, `parameter "w" is [1] float32, the optimizer was built for [3] float32`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opt, err := NewAdamW(params, AdamWDefaults(0.1))
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				r := recover()
				msg, _ := r.(string)
				if !strings.Contains(msg, tc.want) {
					t.Fatalf("panic %v, want one containing %q", r, tc.want)
				}
				if opt.Step() != 0 {
					t.Fatalf("Step() = %d after a rejected update", opt.Step())
				}
			}()
			opt.Update(tc.params, tc.grads)
		})
	}
}

func TestConstructorErrors(t *testing.T) {
	e := mxtest.Go(t)
	ok := Params{"w": vec(e, w0)}
	withBetas := func(b1, b2 float64) AdamConfig {
		c := AdamWDefaults(1e-3)
		c.Betas = [2]float64{b1, b2}
		return c
	}
	adamW := func(p Params, c AdamConfig) func() error {
		return func() error { _, err := NewAdamW(p, c); return err }
	}
	sgd := func(c SGDConfig) func() error {
		return func() error { _, err := NewSGD(ok, c); return err }
	}
	tests := []struct {
		name string
		fn   func() error
		want string
	}{
		{"no params", adamW(Params{}, AdamWDefaults(1e-3)), "no parameters"},
		{"nil param", adamW(Params{"w": nil}, AdamWDefaults(1e-3)), `parameter "w" is nil`},
		{"int param", adamW(Params{"i": mx.FromInt32(e, []int32{1}, 1)}, AdamWDefaults(1e-3)), `parameter "i" has dtype int32`},
		{"negative lr", adamW(ok, AdamWDefaults(-1)), "learning_rate -1 must be finite and >= 0"},
		{"nan lr", adamW(ok, AdamWDefaults(math.NaN())), "learning_rate NaN"},
		{"beta1 one", adamW(ok, withBetas(1, 0.999)), "beta1 1 must be in [0, 1)"},
		{"beta2 negative", adamW(ok, withBetas(0.9, -0.1)), "beta2 -0.1 must be in [0, 1)"},
		{"eps inf", adamW(ok, AdamConfig{LearningRate: 1, Eps: math.Inf(1)}), "eps +Inf"},
		{"negative decay", adamW(ok, AdamConfig{LearningRate: 1, WeightDecay: -0.1}), "weight_decay -0.1"},
		{"adam with decay", func() error { _, err := NewAdam(ok, AdamWDefaults(1e-3)); return err }, "Adam has no weight decay, use AdamW"},
		{"adam bad betas", func() error { _, err := NewAdam(ok, AdamConfig{LearningRate: 1, Betas: [2]float64{2, 0}}); return err }, "optim: adam: beta1 2"},
		{"sgd negative momentum", sgd(SGDConfig{LearningRate: 1, Momentum: -1}), "momentum -1"},
		{"sgd nan dampening", sgd(SGDConfig{LearningRate: 1, Dampening: math.NaN()}), "dampening NaN"},
		{"sgd nesterov no momentum", sgd(SGDConfig{LearningRate: 1, Nesterov: true}), "nesterov momentum requires a momentum and zero dampening"},
		{"sgd nesterov dampening", sgd(SGDConfig{LearningRate: 1, Momentum: 0.9, Dampening: 0.1, Nesterov: true}), "nesterov momentum requires"},
		{"sgd no params", func() error { _, err := NewSGD(Params{}, SGDConfig{LearningRate: 1}); return err }, "optim: sgd: no parameters to optimize"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.fn()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// gradsAt is a deterministic gradient that depends on the parameters (as a real one
// does), so a resumed run that restored params or state wrongly diverges.
func gradsAt(e mx.Engine, params Params, step int) Params {
	out := Params{}
	for _, n := range params.Names() {
		w := params[n]
		shift := mx.Full(e, w.Shape(), 0.1*float64(step%3)-0.05, mx.Float32)
		out[n] = mx.Add(mx.MulScalar(mx.Sin(w), 0.7), shift)
	}
	return out
}

// TestLoadStateResume interrupts a run after two steps, writes params and optimizer
// state to safetensors as the trainer does, rebuilds everything from the files and
// checks that three more steps reproduce an uninterrupted five-step run bit for bit.
func TestLoadStateResume(t *testing.T) {
	e := mxtest.Go(t)
	builders := []struct {
		name  string
		build func(Params) (Optimizer, error)
	}{
		{"adamw", func(p Params) (Optimizer, error) { return NewAdamW(p, AdamWDefaults(0.05)) }},
		{"adam bias correction", func(p Params) (Optimizer, error) {
			c := AdamDefaults(0.05)
			c.BiasCorrection = true
			return NewAdam(p, c)
		}},
		{"sgd nesterov", func(p Params) (Optimizer, error) {
			return NewSGD(p, SGDConfig{LearningRate: 0.1, Momentum: 0.9, Nesterov: true, WeightDecay: 0.01})
		}},
	}
	initial := func() Params {
		return Params{
			"layer.0.lora_a": mx.FromFloat32(e, []float32{0.3, -0.1, 0.8, 0.05, -0.6, 0.2}, 2, 3),
			"layer.0.lora_b": mx.FromFloat32(e, []float32{0.01, -0.02, 0.03}, 3),
		}
	}
	sched, err := CosineDecay(1, 5, 0.1)
	if err != nil {
		t.Fatal(err)
	}
	run := func(opt Optimizer, params Params, from, to int) Params {
		for s := from; s < to; s++ {
			opt.SetLearningRate(0.05 * sched(opt.Step()))
			params = opt.Update(params, gradsAt(e, params, s))
		}
		return params
	}
	for _, b := range builders {
		t.Run(b.name, func(t *testing.T) {
			ref, err := b.build(initial())
			if err != nil {
				t.Fatal(err)
			}
			want := run(ref, initial(), 0, 5)

			first, err := b.build(initial())
			if err != nil {
				t.Fatal(err)
			}
			mid := run(first, initial(), 0, 2)
			dir := t.TempDir()
			paramsPath, statePath := filepath.Join(dir, "adapters.safetensors"), filepath.Join(dir, "training_state.safetensors")
			if err := mx.SaveSafetensors(paramsPath, mid, nil); err != nil {
				t.Fatal(err)
			}
			meta := map[string]string{"step": strconv.Itoa(first.Step())}
			if err := mx.SaveSafetensors(statePath, first.State(), meta); err != nil {
				t.Fatal(err)
			}

			loaded, _, err := mx.LoadSafetensors(e, paramsPath)
			if err != nil {
				t.Fatal(err)
			}
			state, meta, err := mx.LoadSafetensors(e, statePath)
			if err != nil {
				t.Fatal(err)
			}
			step, err := strconv.Atoi(meta["step"])
			if err != nil {
				t.Fatal(err)
			}
			resumed, err := b.build(Params(loaded))
			if err != nil {
				t.Fatal(err)
			}
			if err := resumed.LoadState(state, step); err != nil {
				t.Fatal(err)
			}
			if resumed.Step() != 2 {
				t.Fatalf("Step() = %d after LoadState, want 2", resumed.Step())
			}
			got := run(resumed, Params(loaded), 2, 5)

			for _, n := range want.Names() {
				if !bitsEqual(got[n], want[n]) {
					t.Errorf("%s: resumed %v, uninterrupted %v", n, got[n].Float32s(), want[n].Float32s())
				}
			}
			ws, gs := ref.State(), resumed.State()
			for k := range ws {
				if !bitsEqual(gs[k], ws[k]) {
					t.Errorf("state %s: resumed %v, uninterrupted %v", k, gs[k].Float32s(), ws[k].Float32s())
				}
			}
		})
	}
}

func bitsEqual(a, b *mx.Array) bool {
	if a == nil || b == nil || !slices.Equal(a.Shape(), b.Shape()) {
		return false
	}
	x, y := a.Float32s(), b.Float32s()
	for i := range x {
		if math.Float32bits(x[i]) != math.Float32bits(y[i]) {
			return false
		}
	}
	return true
}

func TestLoadStateErrors(t *testing.T) {
	e := mxtest.Go(t)
	params := Params{"a": mx.Zeros(e, []int{2, 3}, mx.Float32), "b": mx.Zeros(e, []int{4}, mx.Float32)}
	good := func() map[string]*mx.Array {
		return map[string]*mx.Array{
			"m.a": mx.Zeros(e, []int{2, 3}, mx.Float32), "v.a": mx.Zeros(e, []int{2, 3}, mx.Float32),
			"m.b": mx.Zeros(e, []int{4}, mx.Float32), "v.b": mx.Zeros(e, []int{4}, mx.Float32),
		}
	}
	with := func(edit func(map[string]*mx.Array)) map[string]*mx.Array {
		s := good()
		edit(s)
		return s
	}
	tests := []struct {
		name  string
		state map[string]*mx.Array
		step  int
		want  []string
	}{
		{"missing", with(func(s map[string]*mx.Array) { delete(s, "v.b") }), 3, []string{`missing "v.b"`}},
		{"unexpected", with(func(s map[string]*mx.Array) { s["m.c"] = mx.Zeros(e, []int{1}, mx.Float32) }), 3, []string{`unexpected "m.c"`}},
		{"shape", with(func(s map[string]*mx.Array) { s["m.a"] = mx.Zeros(e, []int{3, 2}, mx.Float32) }), 3, []string{`"m.a" has shape [3 2], want [2 3]`}},
		{"dtype", with(func(s map[string]*mx.Array) { s["v.a"] = mx.Zeros(e, []int{2, 3}, mx.BFloat16) }), 3, []string{`"v.a" has dtype bfloat16, want float32`}},
		{"nil", with(func(s map[string]*mx.Array) { s["m.b"] = nil }), 3, []string{`"m.b" is nil`}},
		{"renamed parameter, all listed", with(func(s map[string]*mx.Array) {
			s["m.bb"], s["v.bb"] = s["m.b"], s["v.b"]
			delete(s, "m.b")
			delete(s, "v.b")
		}), 3, []string{`missing "m.b"`, `missing "v.b"`, `unexpected "m.bb"`, `unexpected "v.bb"`}},
		{"negative step", good(), -1, []string{"step -1 is negative"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opt, err := NewAdamW(params, AdamWDefaults(1e-3))
			if err != nil {
				t.Fatal(err)
			}
			before := opt.State()
			err = opt.LoadState(tc.state, tc.step)
			if err == nil {
				t.Fatal("LoadState accepted a bad state")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			if tc.step >= 0 && !errors.Is(err, ErrStateMismatch) {
				t.Errorf("error %v does not wrap ErrStateMismatch", err)
			}
			if opt.Step() != 0 {
				t.Errorf("Step() = %d after a failed load", opt.Step())
			}
			for k, a := range opt.State() {
				if before[k] != a {
					t.Errorf("state %s replaced by a failed load", k)
				}
			}
		})
	}
	t.Run("sgd without momentum has no state", func(t *testing.T) {
		opt, err := NewSGD(params, SGDConfig{LearningRate: 1})
		if err != nil {
			t.Fatal(err)
		}
		if len(opt.State()) != 0 {
			t.Fatalf("State() = %v, want empty", opt.State())
		}
		if err := opt.LoadState(map[string]*mx.Array{}, 4); err != nil || opt.Step() != 4 {
			t.Fatalf("LoadState(empty, 4) = %v, step %d", err, opt.Step())
		}
		err = opt.LoadState(good(), 4)
		if err == nil || !strings.Contains(err.Error(), `unexpected "m.a"`) {
			t.Fatalf("error %v, want one naming the unexpected m.a", err)
		}
	})
}

// ValueAndGrad over named parameters: for loss = Σ w² + 3·Σ b, d/dw = 2w and d/db = 3,
// and the install callback must leave the original (untraced) arrays in place.
func TestValueAndGradNamed(t *testing.T) {
	e := mxtest.Go(t)
	params := Params{"w": mx.FromFloat32(e, []float32{1, -2}, 2), "b": mx.FromFloat32(e, []float32{5}, 1)}
	live := liveParams{}
	loss, g, err := ValueAndGrad(live, params, func() *mx.Array {
		return mx.Add(mx.Sum(mx.Square(live["w"]), false), mx.MulScalar(mx.Sum(live["b"], false), 3))
	})
	if err != nil {
		t.Fatal(err)
	}
	if loss.Item() != 1+4+15 {
		t.Fatalf("loss %v, want 20", loss.Item())
	}
	if w := g["w"].Float32s(); w[0] != 2 || w[1] != -4 || g["b"].Float32s()[0] != 3 {
		t.Fatalf("grads w %v b %v, want [2 -4] and [3]", w, g["b"].Float32s())
	}
	if live["w"] != params["w"] || live["b"] != params["b"] {
		t.Fatal("install was not restored to the original params")
	}
	if _, _, err := ValueAndGrad(live, Params{}, nil); err == nil || err.Error() != "optim: value and grad: no parameters" {
		t.Fatalf("no params: error %v", err)
	}
	// An install that fails returns its error (the loss never runs), for the traced
	// arrays and for the restore alike.
	for _, failOn := range []int{1, 2} {
		calls, ran := 0, false
		bad := refusing{calls: &calls, failOn: failOn}
		_, _, err := ValueAndGrad(bad, params, func() *mx.Array { ran = true; return mx.Sum(params["w"], false) })
		if err == nil || err.Error() != fmt.Sprintf("set params: refused call %d", failOn) {
			t.Errorf("install failing on call %d: error %v", failOn, err)
		}
		if ran != (failOn == 2) || calls != 2 {
			t.Errorf("install failing on call %d: loss ran %v, %d installs (want 2)", failOn, ran, calls)
		}
	}
}

// refusing is a Trainable whose SetParams fails on its failOn-th call.
type refusing struct {
	calls  *int
	failOn int
}

func (r refusing) Params() map[string]*mx.Array { return nil }

func (r refusing) SetParams(map[string]*mx.Array) error {
	*r.calls++
	if *r.calls == r.failOn {
		return fmt.Errorf("set params: refused call %d", *r.calls)
	}
	return nil
}

// liveParams is a Trainable whose installed arrays a test reads back.
type liveParams map[string]*mx.Array

func (l liveParams) Params() map[string]*mx.Array { return l }

func (l liveParams) SetParams(p map[string]*mx.Array) error {
	for n, a := range p {
		l[n] = a
	}
	return nil
}
