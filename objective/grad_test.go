package objective

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/dgtune/dgtune/lora"
	dg "github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/model/diffusiongemma/dgtest"
	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
)

// routeRecorder stands in a layer's router.proj slot and records, for every call, the
// top-k expert set of each token, so a finite-difference probe can prove the router
// picked the same experts as the unperturbed run (top-k is piecewise constant: a flip
// would make the loss jump and the difference quotient meaningless).
type routeRecorder struct {
	base dg.Linear
	k    int
	log  *[]string
}

func (r *routeRecorder) Dims() (int, int) { return r.base.Dims() }

func (r *routeRecorder) Forward(x *mx.Array) *mx.Array {
	s := r.base.Forward(x)
	ne := s.Dim(-1)
	v := s.Float32s()
	var b strings.Builder
	for tok := 0; tok < len(v)/ne; tok++ {
		row := v[tok*ne : (tok+1)*ne]
		idx := make([]int, ne)
		for i := range idx {
			idx[i] = i
		}
		sort.SliceStable(idx, func(i, j int) bool { return row[idx[i]] > row[idx[j]] })
		top := slices.Clone(idx[:r.k])
		slices.Sort(top)
		fmt.Fprint(&b, top)
	}
	*r.log = append(*r.log, b.String())
	return s
}

// TestLoRAGradientFiniteDifference checks d loss / d A and d loss / d B of every adapted
// module kind — q, k, v, o, gate, up, down on the sliding layer 0 and q, k, o, gate, up,
// down on the full layer 1 (full layers have no v_proj) — against central differences,
// on the tiny model, through the encoder pass over the prompt, the decoder pass over the
// canvas and the MoE branch, with the loss of ExampleTerms/BatchLoss. B is random, not
// zero: with B = 0, d loss / d A is identically 0 and an A-gradient bug would go unseen.
func TestLoRAGradientFiniteDifference(t *testing.T) {
	for _, bits := range []string{dg.BitsNone, dg.Bits4} {
		t.Run("bits="+bits, func(t *testing.T) {
			e := mxtest.Go(t)
			m := dgtest.Tiny(5, bits).Model(t, e)
			a, err := lora.Attach(m, lora.Config{Rank: 2, Scale: 4, Keys: dg.DefaultLoRAKeys(), NumLayers: -1}, 11)
			if err != nil {
				t.Fatal(err)
			}
			names := a.Names()
			kinds := map[string]int{}
			for _, n := range names {
				layer, key, _ := strings.Cut(strings.TrimPrefix(n, dg.DecoderPrefix+".layers."), ".")
				kinds[layer+"."+strings.TrimSuffix(strings.TrimSuffix(key, ".lora_a"), ".lora_b")]++
			}
			// 7 kinds on the sliding layer, 6 on the full one, A and B each.
			if len(names) != 26 || len(kinds) != 13 || kinds["1.self_attn.v_proj"] != 0 || kinds["0.self_attn.v_proj"] != 2 {
				t.Fatalf("adapted tensors %v", names)
			}

			f, args := gradCheckAdapter(t, m, a, 0.1, 4)
			checkGradsNonTrivial(t, f, args, names)
		})
	}
}

// checkGradsNonTrivial guards the check against passing vacuously: every A and B
// gradient must have entries well above the tolerance.
func checkGradsNonTrivial(t *testing.T, f func([]*mx.Array) *mx.Array, args []*mx.Array, names []string) {
	t.Helper()
	grads := mx.Grad(f)(args)
	for i, g := range grads {
		big := 0.0
		for _, v := range g.Float32s() {
			big = max(big, float64(v), -float64(v))
		}
		if big < 1e-2 {
			t.Errorf("%s: largest gradient entry %.3g: too small for the check to mean anything", names[i], big)
		}
	}
}

// TestSeparateEncoderGradientFiniteDifference is the check above for an adapter whose
// encoder pass has its own weights (lora_parameters.encoder: separate): d loss / d A and
// d loss / d B of both passes' sets against central differences. The encoder's last layer
// reaches the loss only through the keys and values it caches, so its o/gate/up/down sets
// have exactly zero gradient; every other set must have a clearly non-zero one.
func TestSeparateEncoderGradientFiniteDifference(t *testing.T) {
	e := mxtest.Go(t)
	m := dgtest.Tiny(5, dg.BitsNone).Model(t, e)
	a, err := lora.Attach(m, lora.Config{Rank: 2, Scale: 4, Keys: dg.DefaultLoRAKeys(), NumLayers: -1, Encoder: lora.EncoderModeSeparate}, 11)
	if err != nil {
		t.Fatal(err)
	}
	names := a.Names()
	if len(names) != 52 {
		t.Fatalf("%d tensors, want 52 (26 per pass)", len(names))
	}
	// B at ±0.05 (not 0.1): with both passes' sets random the loss sits at ~16 and is
	// curved enough at ±0.1 for some elements that eps = 3e-3 central differences miss by 8 %.
	f, args := gradCheckAdapter(t, m, a, 0.05, 3)

	last := dg.EncoderLayersPrefix + "." + fmt.Sprint(len(m.Layers)-1) + "."
	grads := mx.Grad(f)(args)
	for i, g := range grads {
		big := 0.0
		for _, v := range g.Float32s() {
			big = max(big, float64(v), -float64(v))
		}
		unreachable := strings.HasPrefix(names[i], last) && !strings.Contains(names[i], ".k_proj.") && !strings.Contains(names[i], ".v_proj.")
		switch {
		case unreachable && big != 0:
			t.Errorf("%s: gradient up to %.3g, want exactly 0 (the encoder's last layer feeds the loss only through its keys and values)", names[i], big)
		case !unreachable && big < 1e-2:
			t.Errorf("%s: largest gradient entry %.3g: too small for the check to mean anything", names[i], big)
		}
	}
}

// gradCheckAdapter gives every B of a entries uniform in ±bScale (with B = 0, d loss / d A is
// identically 0 and an A-gradient bug would go unseen), then checks d loss / d every adapter
// tensor against central differences (maxPoints elements each) for the reference loss of one
// fixed example through the encoder, the decoder and the MoE branch. Every router.proj is
// wrapped to record the top-k sets, so that a probe that flips the routing (top-k is
// piecewise constant: the quotient would not be a derivative) fails the test. It returns
// the loss as a function of the adapter tensors (in a.Names() order) and its arguments.
func gradCheckAdapter(t *testing.T, m *dg.Model, a *lora.Adapter, bScale float64, maxPoints int) (func([]*mx.Array) *mx.Array, []*mx.Array) {
	t.Helper()
	e := m.Engine
	names := a.Names()
	rng := rand.New(rand.NewPCG(21, 22))
	p := a.Params()
	for _, n := range names {
		if strings.HasSuffix(n, ".lora_b") {
			p[n] = mx.MulScalar(mxtest.RandN(e, rng, p[n].Shape()...), bScale)
		}
	}
	if err := a.SetParams(p); err != nil {
		t.Fatal(err)
	}
	var routes []string
	for _, l := range m.Layers {
		l.RouterProj = &routeRecorder{base: l.RouterProj, k: m.Config.TextConfig.TopKExperts, log: &routes}
	}
	o := Reference(0.4, 0.8)
	ex := Example{Prompt: []int32{2, 105, 40, 41, 42, 43, 106, 107, 105}, Target: []int32{300, 301, 302, 303, 304, 305}}
	c := handCorruption(0.5, ex.Target, []bool{true, false, true, true, false, true}, []int32{17, 0, 450, 99, 0, 12})
	var ref string
	flips := 0
	f := func(args []*mx.Array) *mx.Array {
		in := make(map[string]*mx.Array, len(names))
		for i, n := range names {
			in[n] = args[i]
		}
		if err := a.SetParams(in); err != nil {
			t.Fatal(err)
		}
		routes = routes[:0]
		loss, _ := BatchLoss([]Terms{o.ExampleTerms(m, ex, c)})
		if sig := strings.Join(routes, "|"); ref == "" {
			ref = sig
		} else if sig != ref {
			flips++
		}
		return loss
	}
	args := make([]*mx.Array, len(names))
	argnums := make([]int, len(names))
	for i, n := range names {
		args[i], argnums[i] = p[n], i
	}
	// The losses are computed in float32 (~6 to ~16, ± a few ulps): with eps = 3e-3 the
	// rounding contributes ~3e-4 to a difference quotient, well under ATol.
	mxtest.GradCheck(t, f, args, argnums, mxtest.GradCheckOptions{Eps: 3e-3, RTol: 2e-2, ATol: 1e-3, MaxPoints: maxPoints})
	// Encoder and decoder per layer — in one call when the passes run together.
	want := 2 * len(m.Layers)
	if m.PassesFuse() {
		want = len(m.Layers)
	}
	if len(routes) != want {
		t.Fatalf("router called %d times per loss, want %d (passes fused: %v)", len(routes), want, m.PassesFuse())
	}
	if flips > 0 {
		t.Fatalf("%d probes changed the top-k routing: the difference quotients above are not derivatives; pick another eps or seed", flips)
	}
	return f, args
}
