package objective

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/dgtune/dgtune/lora"
	dg "github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/model/diffusiongemma/dgtest"
	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
)

// loraTiny is the tiny model with a rank-2 adapter on every default key whose B is
// random (with B = 0, d loss / d A would vanish and an A-gradient bug go unseen), and a
// router recorder on every layer (see routeRecorder).
func loraTiny(t *testing.T, e mx.Engine) (*dg.Model, *lora.Adapter, []string, *[]string) {
	t.Helper()
	m := dgtest.Tiny(5, dg.BitsNone).Model(t, e)
	a, err := lora.Attach(m, lora.Config{Rank: 2, Scale: 4, Keys: dg.DefaultLoRAKeys(), NumLayers: -1}, 11)
	if err != nil {
		t.Fatal(err)
	}
	names := a.Names()
	rng := rand.New(rand.NewPCG(31, 32))
	p := a.Params()
	for _, n := range names {
		if strings.HasSuffix(n, ".lora_b") {
			p[n] = mx.MulScalar(mxtest.RandN(e, rng, p[n].Shape()...), 0.1)
		}
	}
	if err := a.SetParams(p); err != nil {
		t.Fatal(err)
	}
	var routes []string
	for _, l := range m.Layers {
		l.RouterProj = &routeRecorder{base: l.RouterProj, k: m.Config.TextConfig.TopKExperts, log: &routes}
	}
	return m, a, names, &routes
}

func argsOf(a *lora.Adapter, names []string) ([]*mx.Array, []int) {
	p := a.Params()
	args := make([]*mx.Array, len(names))
	nums := make([]int, len(names))
	for i, n := range names {
		args[i], nums[i] = p[n], i
	}
	return args, nums
}

func setArgs(t *testing.T, a *lora.Adapter, names []string, args []*mx.Array) {
	in := make(map[string]*mx.Array, len(names))
	for i, n := range names {
		in[n] = args[i]
	}
	if err := a.SetParams(in); err != nil {
		t.Fatal(err)
	}
}

// routeGuard fails the test when a finite-difference probe changed the top-k routing
// (the difference quotient would then not be a derivative).
type routeGuard struct {
	routes *[]string
	ref    string
	flips  int
}

func (g *routeGuard) check() {
	sig := strings.Join(*g.routes, "|")
	*g.routes = (*g.routes)[:0]
	if g.ref == "" {
		g.ref = sig
	} else if sig != g.ref {
		g.flips++
	}
}

// The two-pass loss's gradient is the second pass's with the first pass held constant.
// f below computes the first pass at the unperturbed weights — a constant, whatever the
// probe — and the second pass at the probed ones, so its central differences are exactly
// that derivative; GradCheck compares them with f's autodiff, and the autodiff of
// ExampleTerms's two-pass step (stop-gradient on the first pass) must equal f's.
func TestSelfConditionedGradientFiniteDifference(t *testing.T) {
	e := mxtest.Go(t)
	m, a, names, routes := loraTiny(t, e)
	base, nums := argsOf(a, names)
	o := Objective{TMin: 0.5, TMax: 0.5, Positions: All, Weighting: NoWeighting, SelfCond: 1}
	ex := Example{Prompt: []int32{2, 105, 40, 41, 42, 43, 106, 107, 105}, Target: []int32{300, 301, 302, 303, 304, 305}}
	c := handCorruption(0.5, ex.Target, []bool{true, false, true, true, false, true}, []int32{17, 0, 450, 99, 0, 12})
	c.SelfCond = true

	prompt, canvas := mx.FromInt32(e, ex.Prompt, 1, len(ex.Prompt)), mx.FromInt32(e, c.Canvas, 1, len(c.Canvas))
	setArgs(t, a, names, base)
	sc := m.SoftEmbedding(m.Forward(prompt, canvas)) // the first pass, at the base weights
	*routes = (*routes)[:0]
	guard := &routeGuard{routes: routes}
	fixedFirst := func(args []*mx.Array) *mx.Array {
		setArgs(t, a, names, args)
		cache := m.NewCache()
		m.Encode(prompt, cache)
		ce := CrossEntropy(m.Decode(canvas, cache, sc), ex.Target)
		guard.check()
		return mx.DivScalar(mx.Sum(ce, false), float64(len(ex.Target)))
	}
	mxtest.GradCheck(t, fixedFirst, base, nums, mxtest.GradCheckOptions{Eps: 3e-3, RTol: 2e-2, ATol: 1e-3, MaxPoints: 3})
	if guard.flips > 0 {
		t.Fatalf("%d probes changed the top-k routing; pick another eps or seed", guard.flips)
	}
	checkGradsNonTrivial(t, fixedFirst, base, names)

	twoPass := func(args []*mx.Array) *mx.Array {
		setArgs(t, a, names, args)
		loss, _ := BatchLoss([]Terms{o.ExampleTerms(m, ex, c)})
		return loss
	}
	want := mx.Grad(fixedFirst)(base)
	got := mx.Grad(twoPass)(base)
	for i, n := range names {
		if ok, at := mxtest.Close(got[i].Float32s(), want[i].Float32s(), 1e-4, 1e-6); !ok {
			t.Errorf("%s: two-pass gradient differs from the second pass's with the first held constant at %d", n, at)
		}
	}
}

// The encoder's causal-LM loss reaches the LoRA weights through the encoder pass over
// the whole clean sequence (prompt, the blocks before the trained one and, in a clone of
// the cache, the rest) and the tied head.
func TestEncoderLossGradientFiniteDifference(t *testing.T) {
	e := mxtest.Go(t)
	m, a, names, routes := loraTiny(t, e)
	base, nums := argsOf(a, names)
	o := Objective{TMin: 0.5, TMax: 0.5, Positions: All, Weighting: NoWeighting, EncoderWeight: 1, BlockLen: 4}
	ex := Example{Prompt: []int32{2, 105, 40, 41, 106, 107, 105}, Target: []int32{300, 301, 302, 303, 304, 305, 306, 307, 308, 309}}
	c := handCorruption(0.5, ex.Target[4:8], []bool{true, false, true, true}, []int32{17, 0, 450, 99})
	c.Block = 1
	guard := &routeGuard{routes: routes}
	encoderLoss := func(args []*mx.Array) *mx.Array {
		setArgs(t, a, names, args)
		tm := o.ExampleTerms(m, ex, c)
		guard.check()
		return mx.DivScalar(tm.EncSum, tm.EncCount)
	}
	mxtest.GradCheck(t, encoderLoss, base, nums, mxtest.GradCheckOptions{Eps: 3e-3, RTol: 2e-2, ATol: 1e-3, MaxPoints: 3})
	if guard.flips > 0 {
		t.Fatalf("%d probes changed the top-k routing; pick another eps or seed", guard.flips)
	}
	checkGradsNonTrivial(t, encoderLoss, base, names)
}

// NeMo's whole objective — two-pass denoising of a later block plus the encoder loss —
// against central differences (the first pass fixed at the base weights, as above).
func TestNeMoLossGradientFiniteDifference(t *testing.T) {
	e := mxtest.Go(t)
	m, a, names, routes := loraTiny(t, e)
	base, nums := argsOf(a, names)
	o := NeMo(4)
	ex := Example{Prompt: []int32{2, 105, 40, 41, 106, 107, 105}, Target: []int32{300, 301, 302, 303, 304, 305, 306, 307, 308}}
	c := handCorruption(0.5, ex.Target[4:8], []bool{true, false, true, true}, []int32{17, 0, 450, 99})
	c.Block, c.SelfCond = 1, true

	// The first pass at the base weights: prompt + block 0 encoded, block 1 decoded.
	setArgs(t, a, names, base)
	ctx := append(append([]int32(nil), ex.Prompt...), ex.Target[:4]...)
	cache := m.NewCache()
	m.Encode(mx.FromInt32(e, ctx, 1, len(ctx)), cache)
	canvas := mx.FromInt32(e, c.Canvas, 1, 4)
	sc := m.SoftEmbedding(m.Decode(canvas, cache, nil))
	seq := append(append([]int32(nil), ex.Prompt...), ex.Target...)
	*routes = (*routes)[:0]
	guard := &routeGuard{routes: routes}
	fixedFirst := func(args []*mx.Array) *mx.Array {
		setArgs(t, a, names, args)
		cache := m.NewCache()
		hidden, err := m.EncodeHidden(mx.FromInt32(e, seq, 1, len(seq)), nil, cache)
		if err != nil {
			t.Fatal(err)
		}
		enc := mx.DivScalar(mx.Sum(CrossEntropy(m.Logits(mx.SliceAxis(hidden, 1, 0, len(seq)-1)), seq[1:]), false), float64(len(seq)-1))
		ctxCache := m.NewCache()
		m.Encode(mx.FromInt32(e, ctx, 1, len(ctx)), ctxCache)
		den := mx.DivScalar(mx.Sum(CrossEntropy(m.Decode(canvas, ctxCache, sc), ex.Target[4:8]), false), 4)
		guard.check()
		return mx.Add(den, enc)
	}
	nemo := func(args []*mx.Array) *mx.Array {
		setArgs(t, a, names, args)
		loss, _ := BatchLoss([]Terms{o.ExampleTerms(m, ex, c)})
		return loss
	}
	setArgs(t, a, names, base)
	if lf, ln := fixedFirst(base).Item(), nemo(base).Item(); !near(ln, lf, 2e-5) {
		t.Fatalf("NeMo loss %v, hand-written %v", ln, lf)
	}
	*routes = (*routes)[:0] // nemo's calls above recorded its own passes
	mxtest.GradCheck(t, fixedFirst, base, nums, mxtest.GradCheckOptions{Eps: 3e-3, RTol: 2e-2, ATol: 1e-3, MaxPoints: 2})
	if guard.flips > 0 {
		t.Fatalf("%d probes changed the top-k routing; pick another eps or seed", guard.flips)
	}
	want := mx.Grad(fixedFirst)(base)
	got := mx.Grad(nemo)(base)
	for i, n := range names {
		if ok, at := mxtest.Close(got[i].Float32s(), want[i].Float32s(), 2e-4, 1e-6); !ok {
			t.Errorf("%s: NeMo gradient differs from the hand-written one at %d", n, at)
		}
	}
}
