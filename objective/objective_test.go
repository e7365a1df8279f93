package objective

import (
	"math"
	"strings"
	"testing"

	dg "github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/model/diffusiongemma/dgtest"
	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
)

// ce64 is logsumexp(row) − row[target] in float64, with the max subtracted first.
func ce64(row []float32, target int32) float64 {
	m := math.Inf(-1)
	for _, v := range row {
		m = math.Max(m, float64(v))
	}
	s := 0.0
	for _, v := range row {
		s += math.Exp(float64(v) - m)
	}
	return m + math.Log(s) - float64(row[target])
}

func near(got, want, rel float64) bool {
	return math.Abs(got-want) <= rel*math.Max(1, math.Abs(want))
}

func TestCrossEntropyHandLogits(t *testing.T) {
	e := mxtest.Go(t)
	// Three positions over a vocabulary of 4:
	//   [0 0 0 0], target 2:   lse = log 4, so ce = log 4 = 1.3862944.
	//   [1 2 3 4], target 3:   lse = 4 + log(1 + e⁻¹ + e⁻² + e⁻³) = 4 + 0.4401897, ce = 0.4401897.
	//   [10 −10 0 0], target 1: lse = 10 + log(1 + 2e⁻¹⁰ + e⁻²⁰) ≈ 10.0000908, ce = 20.0000908.
	logits := []float32{0, 0, 0, 0, 1, 2, 3, 4, 10, -10, 0, 0}
	target := []int32{2, 3, 1}
	hand := []float64{math.Log(4), math.Log(1 + math.Exp(-1) + math.Exp(-2) + math.Exp(-3)), 20 + math.Log(1+2*math.Exp(-10)+math.Exp(-20))}
	got := CrossEntropy(mx.FromFloat32(e, logits, 1, 3, 4), target)
	if s := got.Shape(); len(s) != 2 || s[0] != 1 || s[1] != 3 {
		t.Fatalf("shape %v, want [1 3]", s)
	}
	for i, g := range got.Float32s() {
		want := ce64(logits[4*i:4*i+4], target[i])
		if !near(want, hand[i], 1e-12) {
			t.Fatalf("position %d: float64 reference %v disagrees with the hand value %v", i, want, hand[i])
		}
		if !near(float64(g), want, 1e-6) {
			t.Errorf("position %d: ce %v, want %v", i, g, want)
		}
	}
}

// tinyModel is the tiny preset with random f32 weights.
func tinyModel(t *testing.T, e mx.Engine) *dg.Model {
	t.Helper()
	m := dgtest.Tiny(3, dg.BitsNone).Model(t, e)
	return m
}

// handCorruption corrupts the positions marked in mask with the ids in noise.
func handCorruption(tt float64, target []int32, mask []bool, noise []int32) Corruption {
	c := Corruption{T: tt, Corrupt: mask, Canvas: append([]int32(nil), target...)}
	for i, bad := range mask {
		if bad {
			c.Canvas[i] = noise[i]
		}
	}
	return c
}

// modelCE returns the float64 cross-entropy of every canvas position, computed from
// the model's own logits for (prompt, canvas).
func modelCE(m *dg.Model, ex Example, c Corruption) []float64 {
	e := m.Engine
	logits := m.Forward(mx.FromInt32(e, ex.Prompt, 1, len(ex.Prompt)), mx.FromInt32(e, c.Canvas, 1, len(c.Canvas))).Float32s()
	v := m.Config.TextConfig.VocabSize
	out := make([]float64, len(ex.Target))
	for i := range out {
		out[i] = ce64(logits[i*v:(i+1)*v], ex.Target[i])
	}
	return out
}

func TestReferenceLossHandExample(t *testing.T) {
	e := mxtest.Go(t)
	m := tinyModel(t, e)
	ex := Example{Prompt: []int32{2, 105, 40, 41, 42, 106, 107, 105}, Target: []int32{300, 301, 302, 303, 304, 305}}
	mask := []bool{true, false, true, false, false, true}
	c := handCorruption(0.5, ex.Target, mask, []int32{7, 0, 450, 0, 0, 12})
	ce := modelCE(m, ex, c)

	cases := []struct {
		name      string
		obj       Objective
		c         Corruption
		wantCount float64
		want      func() float64
	}{
		{
			// Σ corruptᵢ·ceᵢ / max(Σ corruptᵢ, 1) = (ce₀ + ce₂ + ce₅) / 3.
			name: "corrupted", obj: Reference(0.4, 0.8), c: c, wantCount: 3,
			want: func() float64 { return (ce[0] + ce[2] + ce[5]) / 3 },
		},
		{
			// every position scored: the plain mean of the six ce values.
			name: "all", obj: Objective{TMin: 0.4, TMax: 0.8, Positions: All, Weighting: NoWeighting}, c: c, wantCount: 6,
			want: func() float64 { return (ce[0] + ce[1] + ce[2] + ce[3] + ce[4] + ce[5]) / 6 },
		},
		{
			// 1/t with t = 0.5 doubles the corrupted mean.
			name: "inv_t", obj: Objective{TMin: 0.4, TMax: 0.8, Positions: Corrupted, Weighting: InvT}, c: c, wantCount: 3,
			want: func() float64 { return 2 * (ce[0] + ce[2] + ce[5]) / 3 },
		},
		{
			// nothing replaced: 0 / max(0, 1) = 0.
			name: "nothing corrupted", obj: Reference(0.4, 0.8), c: handCorruption(0.5, ex.Target, make([]bool, 6), nil), wantCount: 0,
			want: func() float64 { return 0 },
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			terms := tc.obj.ExampleTerms(m, ex, tc.c)
			if terms.Count != tc.wantCount {
				t.Errorf("count %v, want %v", terms.Count, tc.wantCount)
			}
			loss, count := BatchLoss([]Terms{terms})
			if count != tc.wantCount {
				t.Errorf("batch count %v, want %v", count, tc.wantCount)
			}
			if got, want := loss.Item(), tc.want(); !near(got, want, 2e-6) {
				t.Errorf("loss %.9g, want %.9g", got, want)
			}
		})
	}
}

func TestBatchLossWeighting(t *testing.T) {
	e := mxtest.Go(t)
	s := func(v float64) *mx.Array { return mx.Scalar(e, v, mx.Float32) }
	cases := []struct {
		name      string
		terms     []Terms
		want      float64
		wantCount float64
	}{
		// Example 1: Σce = 6 over 3 tokens (mean 2); example 2: Σce = 4 over 1 token (mean 4).
		// Token weighting gives (6+4)/(3+1) = 2.5, not the mean of means 3.
		{"token weighted", []Terms{{Sum: s(6), Count: 3, Scale: 1}, {Sum: s(4), Count: 1, Scale: 1}}, 2.5, 4},
		// inv_t scales each example's sum by its 1/t before the division: (2·6 + 4·4)/4 = 7.
		{"inv_t scales", []Terms{{Sum: s(6), Count: 3, Scale: 2}, {Sum: s(4), Count: 1, Scale: 4}}, 7, 4},
		// No scored position anywhere: the denominator is clamped to 1.
		{"empty", []Terms{{Sum: s(0), Count: 0, Scale: 1}, {Sum: s(0), Count: 0, Scale: 1}}, 0, 0},
		// A single example with one token: its ce itself.
		{"single", []Terms{{Sum: s(1.25), Count: 1, Scale: 1}}, 1.25, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			loss, count := BatchLoss(tc.terms)
			if count != tc.wantCount {
				t.Errorf("count %v, want %v", count, tc.wantCount)
			}
			if got := loss.Item(); !near(got, tc.want, 1e-7) {
				t.Errorf("loss %v, want %v", got, tc.want)
			}
		})
	}
}

// TestBatchLossTwoLengths runs two examples of different prompt and canvas lengths
// through the model and checks the batch loss is Σ over both of corrupted ce / total
// corrupted count.
func TestBatchLossTwoLengths(t *testing.T) {
	e := mxtest.Go(t)
	m := tinyModel(t, e)
	o := Reference(0.4, 0.8)
	ex1 := Example{Prompt: []int32{2, 105, 40, 106}, Target: []int32{300, 301, 302, 303, 304, 305, 306}}
	ex2 := Example{Prompt: []int32{2, 105, 40, 41, 42, 43, 44, 45, 46, 106}, Target: []int32{310, 311, 312}}
	c1 := handCorruption(0.5, ex1.Target, []bool{true, true, false, true, false, true, true}, []int32{9, 8, 0, 7, 0, 6, 5})
	c2 := handCorruption(0.5, ex2.Target, []bool{false, true, false}, []int32{0, 200, 0})
	ce1, ce2 := modelCE(m, ex1, c1), modelCE(m, ex2, c2)
	want := (ce1[0] + ce1[1] + ce1[3] + ce1[5] + ce1[6] + ce2[1]) / 6
	loss, count := BatchLoss([]Terms{o.ExampleTerms(m, ex1, c1), o.ExampleTerms(m, ex2, c2)})
	if count != 6 {
		t.Errorf("count %v, want 6", count)
	}
	if got := loss.Item(); !near(got, want, 2e-6) {
		t.Errorf("loss %.9g, want %.9g", got, want)
	}
}

func TestExampleTermsInvTScale(t *testing.T) {
	e := mxtest.Go(t)
	m := tinyModel(t, e)
	ex := Example{Prompt: []int32{2, 105, 106}, Target: []int32{300, 301, 302}}
	inv := Objective{TMin: 0, TMax: 1, Positions: All, Weighting: InvT}
	// Scale is 1/t; at t = 0 (which corrupts nothing) it stays 1 rather than +Inf.
	for _, tc := range []struct{ t, scale float64 }{{0.25, 4}, {0.5, 2}, {1, 1}, {0, 1}} {
		c := handCorruption(tc.t, ex.Target, make([]bool, 3), nil)
		if got := inv.ExampleTerms(m, ex, c).Scale; got != tc.scale {
			t.Errorf("t=%v: scale %v, want %v", tc.t, got, tc.scale)
		}
		if got := Reference(0, 1).ExampleTerms(m, ex, c).Scale; got != 1 {
			t.Errorf("t=%v, weighting none: scale %v, want 1", tc.t, got)
		}
	}
}

func TestCorruptAt(t *testing.T) {
	e := mxtest.Go(t)
	const l, vocab = 64, 512
	target := make([]int32, l)
	for i := range target {
		target[i] = int32(100 + i)
	}
	key := func(seed uint64) *mx.Array { return mx.Key(e, seed) }

	t.Run("t=0 corrupts nothing", func(t *testing.T) {
		c := CorruptAt(key(1), target, 0, vocab)
		for i := range target {
			if c.Corrupt[i] || c.Canvas[i] != target[i] {
				t.Fatalf("position %d corrupted at t=0", i)
			}
		}
	})
	t.Run("t=1 corrupts everything", func(t *testing.T) {
		c := CorruptAt(key(1), target, 1, vocab)
		for i := range target {
			if !c.Corrupt[i] {
				t.Fatalf("position %d kept at t=1", i)
			}
			if c.Canvas[i] < 0 || c.Canvas[i] >= vocab {
				t.Fatalf("position %d: replacement %d outside [0, %d)", i, c.Canvas[i], vocab)
			}
		}
	})
	t.Run("strict u < t", func(t *testing.T) {
		// Recompute the per-position uniforms the way CorruptAt draws them (first subkey)
		// and put t exactly on one of them: that position must stay clean, every position
		// with a smaller u must be corrupted and every larger one kept.
		k := key(7)
		u := mx.Uniform(mx.SplitKey(k, 2)[0], []int{l}, 0, 1, mx.Float32).Float32s()
		j := 5
		tt := float64(u[j])
		c := CorruptAt(k, target, tt, vocab)
		for i := range target {
			want := float64(u[i]) < tt
			if c.Corrupt[i] != want {
				t.Errorf("position %d (u=%v, t=%v): corrupt %v, want %v", i, u[i], tt, c.Corrupt[i], want)
			}
			if !c.Corrupt[i] && c.Canvas[i] != target[i] {
				t.Errorf("position %d: clean position changed to %d", i, c.Canvas[i])
			}
		}
		if c.Corrupt[j] {
			t.Errorf("u == t corrupted position %d; want strict u < t", j)
		}
	})
	t.Run("deterministic by key", func(t *testing.T) {
		a, b := CorruptAt(key(11), target, 0.5, vocab), CorruptAt(key(11), target, 0.5, vocab)
		d := CorruptAt(key(12), target, 0.5, vocab)
		same := func(x, y Corruption) bool {
			for i := range x.Canvas {
				if x.Canvas[i] != y.Canvas[i] || x.Corrupt[i] != y.Corrupt[i] {
					return false
				}
			}
			return true
		}
		if !same(a, b) {
			t.Error("the same key gave two different corruptions")
		}
		// 64 positions at t = 0.5: two independent keys agree everywhere with
		// probability ~2⁻⁶⁴.
		if same(a, d) {
			t.Error("different keys gave the same corruption")
		}
	})
	t.Run("rate", func(t *testing.T) {
		// Over 4096 positions the corrupted fraction is Binomial(4096, 0.3)/4096: standard
		// deviation √(0.21/4096) ≈ 0.007, so ±0.04 is more than five of them.
		long := make([]int32, 4096)
		c := CorruptAt(key(3), long, 0.3, vocab)
		n := 0
		for _, b := range c.Corrupt {
			if b {
				n++
			}
		}
		if f := float64(n) / 4096; math.Abs(f-0.3) > 0.04 {
			t.Errorf("corrupted fraction %v at t=0.3", f)
		}
	})
}

func TestDraw(t *testing.T) {
	e := mxtest.Go(t)
	target := []int32{300, 301, 302, 303}
	cases := []struct{ tMin, tMax float64 }{{0.4, 0.8}, {0.1, 0.2}, {0, 1}, {0.5, 0.5}}
	for _, tc := range cases {
		o := Reference(tc.tMin, tc.tMax)
		lo, hi := 1.0, 0.0
		for s := range uint64(200) {
			c := o.Draw(mx.Key(e, s), target, 512)
			// t is drawn in float32: allow its rounding (≤ 6e-8 near 1).
			if c.T < tc.tMin-1e-7 || c.T > tc.tMax+1e-7 {
				t.Fatalf("[%v, %v] seed %d: t = %v", tc.tMin, tc.tMax, s, c.T)
			}
			lo, hi = math.Min(lo, c.T), math.Max(hi, c.T)
			if len(c.Corrupt) != len(target) || len(c.Canvas) != len(target) {
				t.Fatalf("lengths %d/%d, want %d", len(c.Corrupt), len(c.Canvas), len(target))
			}
		}
		// 200 uniform draws leave a gap of more than 5% at either end with probability
		// 2·0.95²⁰⁰ ≈ 7e-5 (and the seeds are fixed).
		if w := tc.tMax - tc.tMin; w > 0 && (lo > tc.tMin+0.05*w || hi < tc.tMax-0.05*w) {
			t.Errorf("[%v, %v]: draws span only [%v, %v]", tc.tMin, tc.tMax, lo, hi)
		}
	}
	// Draw is a function of the key.
	o := Reference(0.4, 0.8)
	a, b := o.Draw(mx.Key(e, 9), target, 512), o.Draw(mx.Key(e, 9), target, 512)
	if a.T != b.T {
		t.Errorf("same key: t %v then %v", a.T, b.T)
	}
}

func TestValidate(t *testing.T) {
	cases := []struct {
		name string
		o    Objective
		want string // "" = valid
	}{
		{"reference", Reference(0.4, 0.8), ""},
		{"all, inv_t", Objective{TMin: 0, TMax: 1, Positions: All, Weighting: InvT}, ""},
		{"fixed t", Reference(0.5, 0.5), ""},
		{"t_min above t_max", Reference(0.8, 0.4), "t_min"},
		{"t_max above 1", Reference(0.4, 1.5), "t_max"},
		{"negative t_min", Reference(-0.1, 0.5), "t_min"},
		{"NaN t_min", Reference(math.NaN(), 0.5), "t_min"},
		{"bad positions", Objective{TMin: 0.4, TMax: 0.8, Positions: "masked", Weighting: NoWeighting}, `loss_positions "masked"`},
		{"bad weighting", Objective{TMin: 0.4, TMax: 0.8, Positions: Corrupted, Weighting: "elbo"}, `weighting "elbo"`},
		{"empty positions", Objective{TMin: 0.4, TMax: 0.8, Weighting: NoWeighting}, "loss_positions"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.o.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && err == nil:
				t.Fatalf("no error, want one mentioning %q", tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("error %q does not mention %q", err, tc.want)
			}
		})
	}
}
