package diffusiongemma

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
)

// synthWeights draws a preset's synthetic weights (Synthesize) after edit, if not nil, has
// changed its config; the config carries the quantization Synthesize chose. It is
// dgtest.Spec.Weights, which this package's internal tests cannot import.
func synthWeights(tb testing.TB, e mx.Engine, preset, bits string, seed uint64, edit func(*Config)) (*Config, map[string]*mx.Array) {
	tb.Helper()
	cfg, err := Preset(preset)
	if err != nil {
		tb.Fatal(err)
	}
	if edit != nil {
		edit(cfg)
	}
	w, err := Synthesize(e, cfg, seed, bits)
	if err != nil {
		tb.Fatal(err)
	}
	return cfg, w
}

// synthModel builds a preset with synthetic weights (synthWeights) and returns the model and
// the tensor map it was built from; m.Config carries the quantization Synthesize chose.
func synthModel(tb testing.TB, e mx.Engine, preset, bits string, seed uint64) (*Model, map[string]*mx.Array) {
	tb.Helper()
	cfg, w := synthWeights(tb, e, preset, bits, seed, nil)
	m, err := Build(e, cfg, w, LoadOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	return m, w
}

// randomIDs returns n token ids in [0, vocab) as an int32 array [1, n].
func randomIDs(e mx.Engine, rng *rand.Rand, vocab, n int) *mx.Array {
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = int32(rng.IntN(vocab))
	}
	return mx.FromInt32(e, ids, 1, n)
}

// handArray is a float32 array of the shape with the given row-major values.
func handArray(e mx.Engine, shape []int, vals ...float32) *mx.Array {
	return mx.FromFloat32(e, vals, shape...)
}

// handIdentity is the n×n identity matrix.
func handIdentity(e mx.Engine, n int) *mx.Array {
	v := make([]float32, n*n)
	for i := range n {
		v[i*n+i] = 1
	}
	return handArray(e, []int{n, n}, v...)
}

// wantClose fails unless |got−want| ≤ tol·max(1, |want|) elementwise.
func wantClose(t testing.TB, what string, got, want []float32, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	bad := 0
	for i := range got {
		if d := math.Abs(float64(got[i]) - float64(want[i])); !(d <= tol*math.Max(1, math.Abs(float64(want[i])))) {
			if bad < 5 {
				t.Errorf("%s[%d] = %v, want %v (tolerance %g)", what, i, got[i], want[i], tol)
			}
			bad++
		}
	}
	if bad > 5 {
		t.Errorf("%s: %d of %d values out of tolerance", what, bad, len(got))
	}
}

// wantIdentical fails unless got and want are the same float32 bit patterns.
func wantIdentical(t testing.TB, what string, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s[%d] = %v, want bit-identical %v", what, i, got[i], want[i])
		}
	}
}

func maxAbsDiff(a, b []float32) float64 {
	d := 0.0
	for i := range a {
		d = math.Max(d, math.Abs(float64(a[i])-float64(b[i])))
	}
	return d
}

// handConfig is the least a hand-built Model needs: hidden size (embed and router scales),
// eps, top-k and the softcap.
func handConfig(hidden, topK int, softcap float64) *Config {
	return &Config{TextConfig: TextConfig{HiddenSize: hidden, TopKExperts: topK, RMSNormEps: 1e-6, FinalLogitSoftcapping: softcap}}
}

func attendAll(q, k, v *mx.Array) *mx.Array { return mx.ScaledDotProductAttention(q, k, v, 1, nil) }

// TestDecodeNormsAndHead runs the decoder of a layerless model, which leaves exactly the
// §3.6.1 canvas embedding, the final RMSNorm and the softcapped tied head:
// logits = 30·tanh(RMSNorm(RMSNormNoScale(E[c]·√H); w)·Eᵀ / 30).
func TestDecodeNormsAndHead(t *testing.T) {
	mxtest.Engines(t, func(t *testing.T, e mx.Engine) {
		// H = 4, √H = 2. E rows: e0 = [3 −4 0 0], e1 = [1 1 1 1], e2 = [0 0 10 0]; w = [1 .5 2 1].
		// Token 0: 2·e0 = [6 −8 0 0], mean square 25 → ÷5 → [1.2 −1.6 0 0] (unit RMS) → ·w →
		//   [1.2 −0.8 0 0]; z = [3.6+3.2, 1.2−0.8, 0] = [6.8, 0.4, 0].
		// Token 1: 2·e1 → [1 1 1 1] → ·w → [1 .5 2 1]; z = [3−2, 1+.5+2+1, 20] = [1, 4.5, 20].
		// logits = 30·tanh(z/30).
		m := &Model{
			Config: handConfig(4, 1, 30),
			Engine: e,
			Embed:  &Embedding{Dense: handArray(e, []int{3, 4}, 3, -4, 0, 0, 1, 1, 1, 1, 0, 0, 10, 0)},
			Norm:   handArray(e, []int{4}, 1, 0.5, 2, 1),
		}
		got := m.Decode(mx.FromInt32(e, []int32{0, 1}, 1, 2), m.NewCache(), nil)
		if s := got.Shape(); !slices.Equal(s, []int{1, 2, 3}) || got.DType() != mx.Float32 {
			t.Fatalf("logits %v %s, want [1 2 3] float32", s, got.DType())
		}
		want := []float32{6.685888254424364, 0.39997629798177176, 0, 0.9996297941646859, 4.46655100869954, 17.483488360437306}
		wantClose(t, "logits", got.Float32s(), want, 1e-5)
	})
}

// TestHeadSoftcap checks cap·tanh(z/cap) on the tied head, and no cap when it is 0.
func TestHeadSoftcap(t *testing.T) {
	mxtest.Engines(t, func(t *testing.T, e mx.Engine) {
		// h = [1 0] picks column 0 of E, so z = [15, 60, −90, 0.3].
		embed := &Embedding{Dense: handArray(e, []int{4, 2}, 15, 0, 60, 0, -90, 0, 0.3, 0)}
		h := handArray(e, []int{1, 1, 2}, 1, 0)
		for _, c := range []struct {
			softcap float64
			want    []float32
		}{
			// 30·tanh(0.5), 30·tanh(2), 30·tanh(−3), 30·tanh(0.01).
			{30, []float32{13.863514717800292, 28.920827402274508, -29.851642610601914, 0.2999900003999838}},
			{0, []float32{15, 60, -90, 0.3}},
		} {
			m := &Model{Config: handConfig(2, 1, c.softcap), Engine: e, Embed: embed}
			wantClose(t, fmt.Sprintf("head(cap %g)", c.softcap), m.head(h).Float32s(), c.want, 1e-6)
		}
	})
}

// TestAttentionValuesAndGQA builds a one-token attention block whose only key is the token
// itself, so each query head's output is exactly its kv head's value vector.
func TestAttentionValuesAndGQA(t *testing.T) {
	// 4 query heads, 2 kv heads, head dim 2, input width 8, x = one-hot(0), so a projection's
	// output is its weight's column 0. The raw values are [3 4 | 1 −1]:
	//   kv head 0: RMSNormNoScale([3 4]) = [3 4]/√12.5 = [0.848528 1.131371]
	//   kv head 1: RMSNormNoScale([1 −1]) = [1 −1]
	// GQA: query head h uses kv head h/(4/2) → heads (0,1,2,3) read kv (0,0,1,1); o_proj is the
	// identity, so the output is [v0 v0 v1 v1]. (An interleaved h%2 mapping would give
	// [v0 v1 v0 v1].) v gets neither k_norm's weight ([2 2] here) nor RoPE (offset 5 rotates
	// q and k by 5 rad).
	v0a, v0b := float32(0.848528137423857), float32(1.131370849898476)
	want := []float32{v0a, v0b, v0a, v0b, 1, -1, 1, -1}
	col0 := func(e mx.Engine, rows int, vals ...float32) *mx.Array {
		w := make([]float32, rows*8)
		for i, v := range vals {
			w[i*8] = v
		}
		return handArray(e, []int{rows, 8}, w...)
	}
	mxtest.Engines(t, func(t *testing.T, e mx.Engine) {
		for _, full := range []bool{false, true} {
			l := &Layer{
				Full: full, Heads: 4, KVHeads: 2, HeadDim: 2,
				Q:         &Dense{W: col0(e, 8, 1, 2, 3, 4, 5, 6, 7, 8)},
				O:         &Dense{W: handIdentity(e, 8)},
				QNorm:     handArray(e, []int{2}, 1, 1),
				KNorm:     handArray(e, []int{2}, 2, 2),
				ropeFreqs: ropePeriods(e, []float64{1}),
			}
			if full {
				// Full layers take their values from the raw k projection.
				l.K = &Dense{W: col0(e, 4, 3, 4, 1, -1)}
			} else {
				l.K = &Dense{W: col0(e, 4, 5, 0, 0, 5)}
				l.V = &Dense{W: col0(e, 4, 3, 4, 1, -1)}
			}
			x := handArray(e, []int{1, 1, 8}, 1, 0, 0, 0, 0, 0, 0, 0)
			got := l.attention(DecoderPass, x, attendAll, 5, 1e-6)
			wantClose(t, fmt.Sprintf("full=%v attention", full), got.Float32s(), want, 1e-5)
		}
	})
}

// TestRoPEPairs rotates the same token at position 0 (angle 0: identity) and at position p
// and checks, per head, that pair (i, i+d/2) turns by p·base^(−2i/d) for i < angles and is
// left bit-identical otherwise.
func TestRoPEPairs(t *testing.T) {
	e := mxtest.Go(t)
	m, _ := synthModel(t, e, PresetTiny, BitsNone, 3)
	const p = 7
	for _, c := range []struct {
		name        string
		layer       int
		d, angles   int
		base        float64
		changedDims []int
	}{
		// Sliding layer: default RoPE over the whole head, all d/2 = 8 pairs turn.
		{"sliding", 0, 16, 8, 1e4, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}},
		// Full layer: proportional RoPE, angles = floor(0.25·32/2) = 4, so only pairs (0..3,
		// 16..19) turn; the exponent's denominator is the full head dim 32.
		{"full", 1, 32, 4, 1e6, []int{0, 1, 2, 3, 16, 17, 18, 19}},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := m.Layers[c.layer]
			if l.HeadDim != c.d {
				t.Fatalf("head dim %d, want %d", l.HeadDim, c.d)
			}
			x := mxtest.RandN(e, rand.New(rand.NewPCG(4, 5)), 1, 1, 64)
			capture := func(q, k *[]float32) attendFunc {
				return func(qa, ka, va *mx.Array) *mx.Array {
					*q, *k = qa.Float32s(), ka.Float32s()
					return attendAll(qa, ka, va)
				}
			}
			var q0, k0, qp, kp []float32
			l.attention(DecoderPass, x, capture(&q0, &k0), 0, m.eps())
			l.attention(DecoderPass, x, capture(&qp, &kp), p, m.eps())
			for _, v := range []struct {
				name      string
				rest, rot []float32
			}{{"q", q0, qp}, {"k", k0, kp}} {
				var changed []int
				for h := range len(v.rest) / c.d {
					x0, xp := v.rest[h*c.d:(h+1)*c.d], v.rot[h*c.d:(h+1)*c.d]
					for i := range c.d / 2 {
						a, b := i, i+c.d/2
						if i >= c.angles {
							if xp[a] != x0[a] || xp[b] != x0[b] {
								t.Errorf("%s head %d pair %d: (%v, %v) → (%v, %v), want unchanged", v.name, h, i, x0[a], x0[b], xp[a], xp[b])
							}
							continue
						}
						th := p * math.Pow(c.base, -2*float64(i)/float64(c.d))
						cs, sn := math.Cos(th), math.Sin(th)
						wa := float64(x0[a])*cs - float64(x0[b])*sn
						wb := float64(x0[b])*cs + float64(x0[a])*sn
						wantClose(t, fmt.Sprintf("%s head %d pair %d", v.name, h, i), []float32{xp[a], xp[b]}, []float32{float32(wa), float32(wb)}, 1e-5)
					}
					for j := range x0 {
						if xp[j] != x0[j] && !slices.Contains(changed, j) {
							changed = append(changed, j)
						}
					}
				}
				slices.Sort(changed)
				if !slices.Equal(changed, c.changedDims) {
					t.Errorf("%s: dims changed by RoPE %v, want %v", v.name, changed, c.changedDims)
				}
			}
		})
	}
}

// TestFullLayerValues checks v on the tiny model's layers against §3.2 step 4:
// RMSNormNoScale of the raw k projection on full layers, of v_proj on sliding ones.
func TestFullLayerValues(t *testing.T) {
	e := mxtest.Go(t)
	m, _ := synthModel(t, e, PresetTiny, BitsNone, 5)
	x := mxtest.RandN(e, rand.New(rand.NewPCG(6, 7)), 1, 3, 64)
	for _, l := range m.Layers {
		if l.Full != (l.V == nil) {
			t.Fatalf("layer %d: full %v but v_proj present %v", l.Index, l.Full, l.V != nil)
		}
		var got []float32
		l.attention(DecoderPass, x, func(q, k, v *mx.Array) *mx.Array {
			got = v.Float32s()
			return attendAll(q, k, v)
		}, 4, m.eps())
		src := l.V
		if l.Full {
			src = l.K
		}
		raw := mx.Reshape(src.Forward(x), 1, 3, l.KVHeads, l.HeadDim)
		want := mx.Transpose(mx.RMSNorm(raw, nil, m.eps()), 0, 2, 1, 3).Float32s()
		wantIdentical(t, fmt.Sprintf("layer %d v", l.Index), got, want)
	}
}

// TestRoute checks §3.4 on two tokens: u = RMSNormNoScale(h)·scale·H^−½, scores = proj(u),
// top-2, softmax over the two selected scores, then ×per_expert_scale, not renormalised.
func TestRoute(t *testing.T) {
	mxtest.Engines(t, func(t *testing.T, e mx.Engine) {
		// H = 4 → root 0.5; router.scale = [2 2 1 1]; per_expert_scale = [.5 3 2 4];
		// proj rows r0 = [1 0 0 −1], r1 = [0 1 0 3], r2 = [2 0 0 0], r3 = [0 0 1 1].
		// Token a = 3·[1 −1 1 −1]: RMS 3 → [1 −1 1 −1] → ·scale [2 −2 1 −1] → ·0.5
		//   u = [1 −1 .5 −.5]; scores = [1.5, −2.5, 2, 0] → experts {2, 0};
		//   softmax([2, 1.5]) = [0.622459, 0.377541] → ·[2, .5] = [1.244919, 0.188770].
		// Token b = [0 0 0 2]: RMS 1 → [0 0 0 2] → ·scale → ·0.5: u = [0 0 0 1];
		//   scores = [−1, 3, 0, 1] → experts {1, 3};
		//   softmax([3, 1]) = [0.880797, 0.119203] → ·[3, 4] = [2.642391, 0.476812].
		m := &Model{Config: handConfig(4, 2, 30), Engine: e}
		l := &Layer{
			RouterProj:     &Dense{W: handArray(e, []int{4, 4}, 1, 0, 0, -1, 0, 1, 0, 3, 2, 0, 0, 0, 0, 0, 1, 1)},
			RouterScale:    handArray(e, []int{4}, 2, 2, 1, 1),
			PerExpertScale: handArray(e, []int{4}, 0.5, 3, 2, 4),
		}
		idx, w := l.route(m, DecoderPass, handArray(e, []int{1, 2, 4}, 3, -3, 3, -3, 0, 0, 0, 2))
		if !slices.Equal(idx.Shape(), []int{1, 2, 2}) || !slices.Equal(w.Shape(), []int{1, 2, 2}) {
			t.Fatalf("idx %v, w %v, want [1 2 2] each", idx.Shape(), w.Shape())
		}
		want := []map[int32]float32{
			{2: 1.2449186624037092, 0: 0.18877033439907273},
			{1: 2.642391233933647, 3: 0.4768116880884702},
		}
		ids, ws := idx.Int32s(), w.Float32s()
		for tok, wt := range want {
			for k := range 2 {
				id := ids[tok*2+k]
				wv, ok := wt[id]
				if !ok {
					t.Fatalf("token %d: experts %v, want the keys of %v", tok, ids[tok*2:tok*2+2], wt)
				}
				wantClose(t, fmt.Sprintf("token %d expert %d weight", tok, id), ws[tok*2+k:tok*2+k+1], []float32{wv}, 1e-5)
			}
		}
	})
}

// TestExperts checks the fused gate/up split (rows [0, I) gate, [I, 2I) up), GELU-tanh and
// the weighted sum over the selected experts, on hand-made dense experts.
func TestExperts(t *testing.T) {
	mxtest.Engines(t, func(t *testing.T, e mx.Engine) {
		// E = 2, I = 2, H = 2. GELU-tanh: g(1) = 0.841192, g(2) = 1.954598, g(−1) = −0.158808,
		// g(−2) = −0.045402.
		// expert 0: gate rows [0 1],[1 0]; up rows [1 0],[0 1]; down [[1 1],[0 −1]]
		// expert 1: gate rows [−1 0],[0 1]; up rows [−1 0],[0 .5]; down = identity
		// Token A, z = [1 2], experts (1, 0), weights (.25, .5):
		//   e1: gate [−1 2], up [−1 1] → [g(−1)·−1, g(2)·1] = [0.158808 1.954598]
		//   e0: gate [2 1], up [1 2] → [g(2), 2·g(1)] → down → [3.636982 −1.682384]
		//   .25·e1 + .5·e0 = [1.858193 −0.352543]
		// Token B, z = [2 1], experts (0, 1), weights (1, .5):
		//   e0: gate [1 2], up [2 1] → [2·g(1), g(2)] → down → [3.636982 −1.954598]
		//   e1: gate [−2 1], up [−2 .5] → [g(−2)·−2, g(1)·.5] = [0.090805 0.420596]
		//   e0 + .5·e1 = [3.682384 −1.744300]
		// (With gate and up swapped the second components would be −0.556703 and −1.509527.)
		l := &Layer{
			GateUp: &ExpertWeight{Dense: handArray(e, []int{2, 4, 2},
				0, 1, 1, 0, 1, 0, 0, 1,
				-1, 0, 0, 1, -1, 0, 0, 0.5)},
			Experts: &ExpertWeight{Dense: handArray(e, []int{2, 2, 2},
				1, 1, 0, -1,
				1, 0, 0, 1)},
		}
		z := handArray(e, []int{1, 2, 2}, 1, 2, 2, 1)
		idx := mx.FromInt32(e, []int32{1, 0, 0, 1}, 1, 2, 2)
		w := handArray(e, []int{1, 2, 2}, 0.25, 0.5, 1, 0.5)
		got := l.experts(z, idx, w)
		if !slices.Equal(got.Shape(), []int{1, 2, 2}) {
			t.Fatalf("experts shape %v, want [1 2 2]", got.Shape())
		}
		want := []float32{1.858192840000095, -0.352542567086333, 3.6823839812165535, -1.7442996964357058}
		wantClose(t, "experts", got.Float32s(), want, 1e-5)
	})
}

// TestLayerRoutesOnHMid builds a layer whose attention and dense MLP contribute nothing
// (zero o_proj and down_proj), so h_mid = x, and whose expert e writes only coordinate e.
// The output's support then shows which experts were chosen: the router must read h_mid
// itself, not pre_feedforward_layernorm_2(h_mid) (which would pick a different pair).
func TestLayerRoutesOnHMid(t *testing.T) {
	mxtest.Engines(t, func(t *testing.T, e mx.Engine) {
		// x = [2 2 1 1], RMS √2.5. Router on h_mid: u = x/√2.5·0.5 with proj rows
		// r0 = [1 0 0 0], r1 = [0 .9 0 0], r2 = [0 0 1 0], r3 = [0 0 0 .9]:
		// scores ∝ [2, 1.8, 1, .9] → experts {0, 1}. On the pre-normed copy x·[1 1 4 4] the
		// scores would be ∝ [2, 1.8, 4, 3.6] → {2, 3}.
		// s0 − s1 = 0.1/√2.5 → softmax (0.515806, 0.484194) → ·per_expert_scale [1 2] →
		// w = (0.515806, 0.968388). Every expert's GeGLU output is the same G = g(Σz)·Σz, so the
		// mixture is G·[w0 w1 0 0]; post_feedforward_layernorm_2 and post_feedforward_layernorm
		// (unit weights) reduce it to [w0 w1 0 0]/RMS = [0.940229 1.765211 0 0].
		// out = (h_mid + that)·layer_scalar 2 = [5.880459 7.530421 2 2].
		zeros := func(shape ...int) *mx.Array { return mx.Zeros(e, shape, mx.Float32) }
		ones := handArray(e, []int{4}, 1, 1, 1, 1)
		gu := make([]float32, 4*2*4) // per expert: gate row and up row all ones (I = 1)
		for i := range gu {
			gu[i] = 1
		}
		down := make([]float32, 4*4) // expert e: column one-hot(e)
		for ex := range 4 {
			down[ex*4+ex] = 1
		}
		l := &Layer{
			Heads: 1, KVHeads: 1, HeadDim: 2,
			Q: &Dense{W: zeros(2, 4)}, K: &Dense{W: zeros(2, 4)}, V: &Dense{W: zeros(2, 4)}, O: &Dense{W: zeros(4, 2)},
			QNorm: handArray(e, []int{2}, 1, 1), KNorm: handArray(e, []int{2}, 1, 1),
			Gate: &Dense{W: zeros(3, 4)}, Up: &Dense{W: zeros(3, 4)}, Down: &Dense{W: zeros(4, 3)},
			RouterProj:     &Dense{W: handArray(e, []int{4, 4}, 1, 0, 0, 0, 0, 0.9, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0.9)},
			RouterScale:    ones,
			PerExpertScale: handArray(e, []int{4}, 1, 2, 1, 1),
			GateUp:         &ExpertWeight{Dense: handArray(e, []int{4, 2, 4}, gu...)},
			Experts:        &ExpertWeight{Dense: handArray(e, []int{4, 4, 1}, down...)},
			InputNorm:      ones, PostAttnNorm: ones, PreFFNorm: ones, PostFFNorm1: ones,
			PreFFNorm2: handArray(e, []int{4}, 1, 1, 4, 4), PostFFNorm2: ones, PostFFNorm: ones,
			Scalar:    handArray(e, []int{1}, 2),
			ropeFreqs: ropePeriods(e, []float64{1}),
		}
		m := &Model{Config: handConfig(4, 2, 30), Engine: e}
		x := handArray(e, []int{1, 1, 4}, 2, 2, 1, 1)
		got := l.forward(m, DecoderPass, x, l.Scalar, attendAll, 0)
		wantClose(t, "layer output", got.Float32s(), []float32{5.880458508704549, 7.530421475835522, 2, 2}, 1e-5)
	})
}

// TestEncoderMask checks encoderMask's key ranges: query p may see key k iff k ≤ p and, on
// sliding layers, k > p − window.
func TestEncoderMask(t *testing.T) {
	e := mxtest.Go(t)
	for _, c := range []struct {
		name                 string
		offset, s, start, nk int
		full                 bool
		window               int
		lo, hi               []int // per query, the allowed key positions lo..hi
		allAllowedReturnsNil bool
	}{
		// Continuation at 2000 with window 1024: the sliding cache held positions 976..1999
		// and the 3 new keys 2000..2002 were appended. Query 2000 sees 977..2000 (976 is one
		// past the window), 2001 sees 978..2001, 2002 sees 979..2002; later keys are future.
		{"sliding continuation", 2000, 3, 976, 1027, false, 1024, []int{977, 978, 979}, []int{2000, 2001, 2002}, false},
		// Full layers see every past position.
		{"full continuation", 2000, 3, 0, 2003, true, 1024, []int{0, 0, 0}, []int{2000, 2001, 2002}, false},
		// Prefill with window 2: itself and one previous key.
		{"sliding prefill", 0, 4, 0, 4, false, 2, []int{0, 0, 1, 2}, []int{0, 1, 2, 3}, false},
		{"full prefill", 0, 3, 0, 3, true, 2, []int{0, 0, 0}, []int{0, 1, 2}, false},
		// One query at the end of the keys inside the window: nothing to mask.
		{"single query, all visible", 5, 1, 0, 6, false, 8, nil, nil, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			mask := encoderMaskBlocks(e, c.offset, c.s, c.start, c.nk, c.full, c.window, nil)
			if c.allAllowedReturnsNil {
				if mask != nil {
					t.Fatalf("mask %v, want nil (everything allowed)", mask.Shape())
				}
				return
			}
			if mask == nil {
				t.Fatal("mask is nil, want one")
			}
			if !slices.Equal(mask.Shape(), []int{1, 1, c.s, c.nk}) {
				t.Fatalf("mask shape %v, want [1 1 %d %d]", mask.Shape(), c.s, c.nk)
			}
			allow := mask.Bools()
			for i := range c.s {
				for j := range c.nk {
					kp := c.start + j
					want := kp >= c.lo[i] && kp <= c.hi[i]
					if allow[i*c.nk+j] != want {
						t.Fatalf("query %d key %d: allowed %v, want %v", c.offset+i, kp, allow[i*c.nk+j], want)
					}
				}
			}
		})
	}
}

// referenceDecode is §3.6 written the way the reference writes it: the decoder input is
// RMSNormNoScale(E[c]·√H) (no self-conditioning), and each layer attends the whole cached
// K/V plus the canvas under a key-row mask — full layers keep every encoded position,
// sliding layers those ≥ offset − (window−1), the same row for every canvas token.
func referenceDecode(m *Model, canvas *mx.Array, c *Cache) *mx.Array {
	t := &m.Config.TextConfig
	h := mx.RMSNorm(mx.MulScalar(m.Embed.Lookup(canvas), math.Sqrt(float64(t.HiddenSize))), nil, t.RMSNormEps)
	n := canvas.Dim(1)
	for i, l := range m.Layers {
		lc := c.Layers[i]
		h = l.forward(m, DecoderPass, h, l.Scalar, func(q, k, v *mx.Array) *mx.Array {
			enc := 0
			if lc.K != nil {
				enc = lc.K.Dim(2)
				k = mx.Concatenate([]*mx.Array{lc.K, k}, 2)
				v = mx.Concatenate([]*mx.Array{lc.V, v}, 2)
			}
			allow := make([]bool, enc+n)
			for j := range allow {
				allow[j] = j >= enc || l.Full || lc.Start+j >= c.Offset-(t.SlidingWindow-1)
			}
			return mx.ScaledDotProductAttention(q, k, v, 1, mx.FromBool(m.Engine, allow, 1, 1, 1, enc+n))
		}, c.Offset)
	}
	return m.head(mx.RMSNorm(h, m.Norm, t.RMSNormEps))
}

// TestDecodeMatchesReference compares Decode with referenceDecode for prompts shorter than,
// equal to and longer than the tiny sliding window (8): the decoder keeps the last 7
// encoded positions on sliding layers and all of them on full layers, and reads the cache
// without writing to it.
func TestDecodeMatchesReference(t *testing.T) {
	e := mxtest.Go(t)
	m, _ := synthModel(t, e, PresetTiny, BitsNone, 7)
	rng := rand.New(rand.NewPCG(8, 9))
	canvas := randomIDs(e, rng, 512, 5)
	for _, n := range []int{3, 7, 8, 12, 20} {
		c := m.NewCache()
		m.Encode(randomIDs(e, rng, 512, n), c)
		starts := make([]int, len(c.Layers))
		for i, lc := range c.Layers {
			starts[i] = lc.Start
		}
		got := m.Decode(canvas, c, nil).Float32s()
		want := referenceDecode(m, canvas, c).Float32s()
		wantClose(t, fmt.Sprintf("prompt %d logits", n), got, want, 1e-5)
		if c.Offset != n {
			t.Errorf("prompt %d: offset %d after Decode, want %d", n, c.Offset, n)
		}
		for i, lc := range c.Layers {
			if lc.Start != starts[i] || lc.Start+lc.K.Dim(2) != n {
				t.Errorf("prompt %d layer %d: cache covers %d..%d after Decode, want %d..%d", n, i, lc.Start, lc.Start+lc.K.Dim(2)-1, starts[i], n-1)
			}
		}
	}
}

// TestDecoderWindowPerLayer runs single-layer models and alters one cached key/value: only
// positions the decoder keeps may change the logits, and when one does it changes them for
// every canvas token (one shared encoder window, not a per-token sliding one).
func TestDecoderWindowPerLayer(t *testing.T) {
	e := mxtest.Go(t)
	m, _ := synthModel(t, e, PresetTiny, BitsNone, 11)
	rng := rand.New(rand.NewPCG(12, 13))
	const n, window, canvasLen = 12, 8, 6
	prompt := randomIDs(e, rng, 512, n)
	canvas := randomIDs(e, rng, 512, canvasLen)
	for _, c := range []struct {
		name    string
		layer   int
		pos     int
		changes bool
	}{
		// The sliding cache holds 4..11 (window 8) but the decoder keeps 12−7 = 5..11.
		{"sliding, oldest cached position", 0, n - window, false},
		{"sliding, first kept position", 0, n - (window - 1), true},
		{"full, position 0", 1, 0, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			one := *m
			one.Layers = m.Layers[c.layer : c.layer+1]
			one.EncoderScalars = m.EncoderScalars[c.layer : c.layer+1]
			cache := one.NewCache()
			one.Encode(prompt, cache)
			base := one.Decode(canvas, cache, nil).Float32s()
			lc := cache.Layers[0]
			j := c.pos - lc.Start
			if j < 0 || j >= lc.K.Dim(2) {
				t.Fatalf("position %d not cached (start %d, len %d)", c.pos, lc.Start, lc.K.Dim(2))
			}
			alter := func(a *mx.Array) *mx.Array {
				row := mx.SliceAxis(a, 2, j, j+1)
				return mx.Concatenate([]*mx.Array{mx.SliceAxis(a, 2, 0, j), mx.AddScalar(mx.MulScalar(row, -2), 0.5), mx.SliceAxis(a, 2, j+1, a.Dim(2))}, 2)
			}
			lc.K, lc.V = alter(lc.K), alter(lc.V)
			got := one.Decode(canvas, cache, nil).Float32s()
			vocab := len(got) / canvasLen
			for tok := range canvasLen {
				d := maxAbsDiff(got[tok*vocab:(tok+1)*vocab], base[tok*vocab:(tok+1)*vocab])
				if c.changes && d < 1e-4 {
					t.Errorf("canvas token %d: logits moved by %g, want a visible change", tok, d)
				}
				if !c.changes && d != 0 {
					t.Errorf("canvas token %d: logits moved by %g, want none", tok, d)
				}
			}
		})
	}
}

// TestChunkedPrefill encodes one prompt at once and in chunks (some crossing the sliding
// window of 8, one longer than it): caches and the decoder's logits must agree.
func TestChunkedPrefill(t *testing.T) {
	e := mxtest.Go(t)
	m, _ := synthModel(t, e, PresetTiny, BitsNone, 13)
	rng := rand.New(rand.NewPCG(14, 15))
	const n = 13
	prompt := randomIDs(e, rng, 512, n)
	canvas := randomIDs(e, rng, 512, 4)
	ref := m.NewCache()
	m.Encode(prompt, ref)
	refLogits := m.Decode(canvas, ref, nil).Float32s()
	for i, lc := range ref.Layers {
		want := n
		if !m.Layers[i].Full {
			want = 8
		}
		if lc.K.Dim(2) != want || lc.Start != n-want {
			t.Fatalf("one-shot layer %d cache: start %d len %d, want start %d len %d", i, lc.Start, lc.K.Dim(2), n-want, want)
		}
	}
	for _, chunks := range [][]int{{5, 4, 4}, {6, 6, 1}, {3, 10}, {7, 1, 5}, {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}} {
		t.Run(fmt.Sprint(chunks), func(t *testing.T) {
			c := m.NewCache()
			at := 0
			for _, s := range chunks {
				m.Encode(mx.SliceAxis(prompt, 1, at, at+s), c)
				at += s
			}
			if c.Offset != n {
				t.Fatalf("offset %d, want %d", c.Offset, n)
			}
			for i, lc := range c.Layers {
				r := ref.Layers[i]
				if lc.Start != r.Start || !slices.Equal(lc.K.Shape(), r.K.Shape()) || !slices.Equal(lc.V.Shape(), r.V.Shape()) {
					t.Fatalf("layer %d: cache start %d K %v V %v, want start %d K %v V %v", i, lc.Start, lc.K.Shape(), lc.V.Shape(), r.Start, r.K.Shape(), r.V.Shape())
				}
				wantClose(t, fmt.Sprintf("layer %d K", i), lc.K.Float32s(), r.K.Float32s(), 1e-5)
				wantClose(t, fmt.Sprintf("layer %d V", i), lc.V.Float32s(), r.V.Float32s(), 1e-5)
			}
			wantClose(t, "decoder logits", m.Decode(canvas, c, nil).Float32s(), refLogits, 1e-5)
		})
	}
	// An empty chunk is a no-op.
	c := m.NewCache()
	m.Encode(mx.Zeros(e, []int{1, 0}, mx.Int32), c)
	if c.Offset != 0 || c.Layers[0].K != nil {
		t.Errorf("empty Encode: offset %d, cache %v", c.Offset, c.Layers[0].K)
	}
}

// TestForwardDeterministic runs Forward twice on one model and once on a model rebuilt
// from the same seed: the logits must be bit-identical.
func TestForwardDeterministic(t *testing.T) {
	e := mxtest.Go(t)
	rng := rand.New(rand.NewPCG(16, 17))
	prompt, canvas := randomIDs(e, rng, 512, 10), randomIDs(e, rng, 512, 8)
	for _, bits := range []string{BitsNone, Bits4} {
		m, _ := synthModel(t, e, PresetTiny, bits, 21)
		a := m.Forward(prompt, canvas).Float32s()
		wantIdentical(t, "bits "+bits+" second Forward", m.Forward(prompt, canvas).Float32s(), a)
		m2, _ := synthModel(t, e, PresetTiny, bits, 21)
		wantIdentical(t, "bits "+bits+" rebuilt model", m2.Forward(prompt, canvas).Float32s(), a)
	}
}

// dequantizedTwin returns a float32 checkpoint with every quantized module replaced by its
// dequantized dense weight, and the matching config without quantization.
func dequantizedTwin(t *testing.T, cfg *Config, w map[string]*mx.Array) (*Config, map[string]*mx.Array) {
	t.Helper()
	dense := map[string]*mx.Array{}
	for name, a := range w {
		module, quantized := strings.CutSuffix(name, ".scales")
		switch {
		case quantized:
			bits, group, ok := cfg.Quantization.For(module)
			if !ok {
				t.Fatalf("%s has scales but the config does not quantize it", module)
			}
			dense[module+".weight"] = mx.Dequantize(w[module+".weight"], mx.AsType(a, mx.Float32), mx.AsType(w[module+".biases"], mx.Float32), group, bits)
		case strings.HasSuffix(name, ".biases"), strings.HasSuffix(name, ".weight") && w[strings.TrimSuffix(name, ".weight")+".scales"] != nil:
		default:
			dense[name] = mx.AsType(a, mx.Float32)
		}
	}
	twin := *cfg
	twin.Quantization = nil
	twin.TextConfig.Dtype = "float32"
	return &twin, dense
}

// TestQuantizedMatchesDequantized compares each quantized model with its dequantized f32
// twin. Both compute with the same weight values (dequantization is exact), so the logits
// differ only by float32 rounding in the quantized kernels' different summation order:
// the tolerance is 2e-4·max(1, |logit|) (observed ≈ 1.2e-5 on the go engine); a wrong
// bit layout or group would be off by whole units.
func TestQuantizedMatchesDequantized(t *testing.T) {
	e := mxtest.Go(t)
	rng := rand.New(rand.NewPCG(18, 19))
	prompt, canvas := randomIDs(e, rng, 512, 12), randomIDs(e, rng, 512, 8)
	for _, bits := range []string{Bits4, Bits8, BitsMixed} {
		t.Run(bits, func(t *testing.T) {
			m, w := synthModel(t, e, PresetTiny, bits, 23)
			if _, ok := m.Layers[0].Q.(*Quantized); !ok || m.Embed.Quant == nil || m.Layers[0].GateUp.Quant == nil {
				t.Fatal("synthetic model is not quantized")
			}
			twinCfg, dense := dequantizedTwin(t, m.Config, w)
			twin, err := Build(e, twinCfg, dense, LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := twin.Layers[0].Q.(*Dense); !ok {
				t.Fatal("twin is not dense")
			}
			got, want := m.Forward(prompt, canvas).Float32s(), twin.Forward(prompt, canvas).Float32s()
			wantClose(t, "logits", got, want, 2e-4)
			t.Logf("max |quantized − dequantized| = %.3g", maxAbsDiff(got, want))
		})
	}
}

// TestSelfConditioningZeroSignal: with s = 0, n = RMSNorm(0) = 0 and the MLP's GeGLU of 0 is
// 0, so the decoder input is exactly that of no signal; a non-zero signal changes it.
func TestSelfConditioningZeroSignal(t *testing.T) {
	e := mxtest.Go(t)
	rng := rand.New(rand.NewPCG(20, 21))
	prompt, canvas := randomIDs(e, rng, 512, 9), randomIDs(e, rng, 512, 6)
	for _, bits := range []string{BitsNone, Bits4} {
		m, _ := synthModel(t, e, PresetTiny, bits, 25)
		c := m.NewCache()
		m.Encode(prompt, c)
		none := m.Decode(canvas, c, nil).Float32s()
		zero := m.Decode(canvas, c, mx.Zeros(e, []int{1, 6, 64}, mx.Float32)).Float32s()
		wantIdentical(t, "bits "+bits+" zero signal", zero, none)
		signal := m.SoftEmbedding(m.Decode(canvas, c, nil))
		if d := maxAbsDiff(m.Decode(canvas, c, signal).Float32s(), none); d < 1e-3 {
			t.Errorf("bits %s: a soft-embedding signal moved the logits by only %g", bits, d)
		}
	}
	// Without a signal the self-conditioning block is never run.
	m, _ := synthModel(t, e, PresetTiny, BitsNone, 25)
	c := m.NewCache()
	m.Encode(prompt, c)
	want := m.Decode(canvas, c, nil).Float32s()
	noSC := *m
	noSC.SelfCond = nil
	wantIdentical(t, "model without self-conditioning", noSC.Decode(canvas, c, nil).Float32s(), want)
}
