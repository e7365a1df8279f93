package evaluate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/dgtune/dgtune/config"
	"github.com/dgtune/dgtune/lora"
	dg "github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/model/diffusiongemma/dgtest"
	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
	"github.com/dgtune/dgtune/objective"
	"github.com/dgtune/dgtune/session"
)

// tinySession builds a tiny random model with a byte-level synthetic tokenizer, in memory.
func tinySession(t *testing.T) *session.Session {
	t.Helper()
	e := mxtest.Go(t)
	m := dgtest.Tiny(1, dg.BitsNone).Model(t, e)
	tok := dgtest.Tokenizer(t, m.Config)
	cfg := config.Defaults()
	cfg.MaxCanvas = 8
	cfg.Eval.Steps = 4
	return &session.Session{Config: cfg, Engine: e, Model: m, Tokenizer: tok}
}

// cases are two hand-made examples; their Index values are not their positions, so a
// key derived from the wrong one would show.
func cases() []Case {
	return []Case{
		{Index: 3, Prompt: []int32{2, 105, 300, 301, 302, 106, 107, 105, 200, 107, 100, 101},
			Target: []int32{205, 217, 214, 214, 225, 364, 120, 230}, Reference: "hello", RefTokens: 8},
		{Index: 7, Prompt: []int32{2, 105, 310, 311, 106, 107, 105, 200, 107, 100, 101},
			Target: []int32{240, 241, 242, 243, 1, 1, 1, 1}, Reference: "x", RefTokens: 4},
	}
}

// mountRandom attaches a rank-4 adapter with B uniform in ±amp (amp 0 keeps B = 0, an
// adapter that adds exactly nothing).
func mountRandom(t *testing.T, m *dg.Model, amp float64) *lora.Adapter {
	t.Helper()
	a, err := lora.Attach(m, lora.Config{Rank: 4, Scale: 2}, 5)
	if err != nil {
		t.Fatal(err)
	}
	if amp == 0 {
		return a
	}
	rng := rand.New(rand.NewPCG(5, 6))
	p := a.Params()
	for name, arr := range p {
		if strings.HasSuffix(name, ".lora_b") {
			p[name] = mx.MulScalar(mxtest.RandN(m.Engine, rng, arr.Shape()...), amp)
		}
	}
	if err := a.SetParams(p); err != nil {
		t.Fatal(err)
	}
	return a
}

// TestPairedCorruptions: the adapter run scores exactly the canvases the base run scored.
func TestPairedCorruptions(t *testing.T) {
	s := tinySession(t)
	seen := map[string]map[string]objective.Corruption{} // label → "t/index" → corruption
	ev := &Evaluator{Session: s, Config: s.Config, Cases: cases(),
		OnCorruption: func(label string, level float64, c Case, corr objective.Corruption) {
			if seen[label] == nil {
				seen[label] = map[string]objective.Corruption{}
			}
			seen[label][fmt.Sprintf("%g/%d", level, c.Index)] = corr
		}}
	base, err := ev.Run("base", false)
	if err != nil {
		t.Fatal(err)
	}
	mountRandom(t, s.Model, 0.1)
	adapted, err := ev.Run("adapter", false)
	if err != nil {
		t.Fatal(err)
	}

	// 3 default noise levels × 2 cases, each scored once per run.
	if len(seen["base"]) != 6 || len(seen["adapter"]) != 6 {
		t.Fatalf("saw %d base and %d adapter corruptions, want 6 each", len(seen["base"]), len(seen["adapter"]))
	}
	for k, b := range seen["base"] {
		a, ok := seen["adapter"][k]
		if !ok || !slices.Equal(a.Canvas, b.Canvas) || !slices.Equal(a.Corrupt, b.Corrupt) || a.T != b.T {
			t.Errorf("%s: adapter canvas %v %v, base %v %v", k, a.Canvas, a.Corrupt, b.Canvas, b.Corrupt)
		}
	}
	// The pairing is not vacuous: levels draw different corruptions, and the adapter
	// changes the scores.
	if slices.Equal(seen["base"]["0.25/3"].Canvas, seen["base"]["0.75/3"].Canvas) {
		t.Error("t=0.25 and t=0.75 corrupted case 3 identically")
	}
	differs := false
	for k, v := range base.Loss {
		differs = differs || v != adapted.Loss[k]
	}
	if !differs {
		t.Error("the adapter left every loss unchanged: the pairing test proves nothing")
	}

	// Same seed, same model: the same numbers, bit for bit.
	again, err := (&Evaluator{Session: s, Config: s.Config, Cases: cases()}).Run("again", false)
	if err != nil {
		t.Fatal(err)
	}
	for k := range adapted.Loss {
		if again.Loss[k] != adapted.Loss[k] || again.Accuracy[k] != adapted.Accuracy[k] {
			t.Errorf("t=%s: rerun loss %v accuracy %v, first run %v %v", k, again.Loss[k], again.Accuracy[k], adapted.Loss[k], adapted.Accuracy[k])
		}
	}
}

// TestPairedSamplerSeeds: with temperature sampling, base and an adapter that adds nothing
// must generate the same texts — only possible when both runs use the same sampler seeds.
func TestPairedSamplerSeeds(t *testing.T) {
	s := tinySession(t)
	s.Config.Eval.Temperature = 1
	ev := &Evaluator{Session: s, Config: s.Config, Cases: cases()}
	base, err := ev.Run("base", true)
	if err != nil {
		t.Fatal(err)
	}
	mountRandom(t, s.Model, 0) // B = 0: the adapted model computes what the base did
	adapted, err := ev.Run("adapter", true)
	if err != nil {
		t.Fatal(err)
	}
	for i := range base.Generations {
		b, a := base.Generations[i], adapted.Generations[i]
		if b.Text != a.Text || b.Steps != a.Steps {
			t.Errorf("case %d: base %q (%d steps), zero adapter %q (%d steps)", b.Index, b.Text, b.Steps, a.Text, a.Steps)
		}
	}
	// The seed matters: another run seed samples something else.
	cfg := s.Config
	cfg.Seed++
	other, err := (&Evaluator{Session: s, Config: cfg, Cases: cases()}).Run("other", true)
	if err != nil {
		t.Fatal(err)
	}
	same := true
	for i := range other.Generations {
		same = same && other.Generations[i].Text == base.Generations[i].Text
	}
	if same {
		t.Error("a different seed generated the same texts: the test cannot tell seeds apart")
	}
	if base.ExactMatch == nil || base.TokenF1 == nil || base.MeanSteps == nil || base.TokensPerS == nil || *base.MeanSteps < 1 {
		t.Errorf("generation metrics missing: %+v", base)
	}
}

func TestTokenF1(t *testing.T) {
	tests := []struct {
		pred, ref string
		want      float64
	}{
		{"a b c", "a b c", 1},
		// precision 2/2, recall 2/4: F1 = 2·1·½/(1+½) = 2/3.
		{"a b", "a b c d", 2.0 / 3},
		// ref has a×1, b×2; pred a, a, b matches a once and b once: P = R = 2/3.
		{"a a b", "a b b", 2.0 / 3},
		{"  a\tb\n", "a b", 1},
		{"", "", 1},
		{"x", "", 0},
		{"x y", "z", 0},
	}
	for _, tc := range tests {
		if got := TokenF1(tc.pred, tc.ref); got != tc.want {
			t.Errorf("TokenF1(%q, %q) = %v, want %v", tc.pred, tc.ref, got, tc.want)
		}
	}
	for in, want := range map[string]string{"  a \n\t b  ": "a b", "": "", "x": "x"} {
		if got := Normalize(in); got != want {
			t.Errorf("Normalize(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCompareTableJSON(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	base := &Metrics{Loss: map[string]float64{"0.5": 2, "0.25": 1}, Accuracy: map[string]float64{"0.5": 0.25, "0.25": 0.5}, ExactMatch: f(0.5)}
	adapted := &Metrics{Loss: map[string]float64{"0.5": 1.5, "0.25": 1.25}, Accuracy: map[string]float64{"0.5": 0.5, "0.25": 0.5}, ExactMatch: f(1)}
	rows := Compare(base, adapted)
	// Levels sorted numerically, loss rows then accuracy rows; delta = adapter − base.
	want := []struct {
		metric        string
		base, adapter float64
		delta         float64
	}{
		{"loss @ t=0.25", 1, 1.25, 0.25},
		{"loss @ t=0.5", 2, 1.5, -0.5},
		{"accuracy @ t=0.25", 0.5, 0.5, 0},
		{"accuracy @ t=0.5", 0.25, 0.5, 0.25},
		{"exact match", 0.5, 1, 0.5},
	}
	if len(rows) != len(want) {
		t.Fatalf("%d rows, want %d: %+v", len(rows), len(want), rows)
	}
	for i, w := range want {
		r := rows[i]
		if r.Metric != w.metric || r.Base != w.base || *r.Adapter != w.adapter || *r.Delta != w.delta {
			t.Errorf("row %d = %s %v %v %v, want %+v", i, r.Metric, r.Base, *r.Adapter, *r.Delta, w)
		}
	}
	var buf bytes.Buffer
	if err := WriteTable(&buf, rows, 17); err != nil {
		t.Fatal(err)
	}
	// The first row is the number of examples, for base and adapter, no delta.
	if !regexp.MustCompile(`(?m)^│ examples +│ 17 +│ 17 +│ +│$`).MatchString(buf.String()) {
		t.Errorf("table has no examples row of 17:\n%s", buf.String())
	}
	for _, s := range []string{"METRIC", "ADAPTER", "DELTA", "loss @ t=0.5", "1.5000", "-0.5000", "+0.2500"} {
		if !strings.Contains(strings.ToUpper(buf.String()), strings.ToUpper(s)) {
			t.Errorf("table lacks %q:\n%s", s, buf.String())
		}
	}
	if base := Compare(base, nil); base[0].Adapter != nil {
		t.Error("base-only rows carry an adapter column")
	}

	path := filepath.Join(t.TempDir(), "r.json")
	if err := WriteJSON(path, &Report{Model: "m", Split: "test", Examples: 2, Rows: rows, Base: base, Adapted: adapted}); err != nil {
		t.Fatal(err)
	}
	var back Report
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Adapted.Loss["0.5"] != 1.5 || *back.Rows[1].Delta != -0.5 {
		t.Errorf("JSON round trip: %+v", back)
	}
	if err := WriteJSON(filepath.Join(t.TempDir(), "no", "such", "dir.json"), &back); err == nil || !strings.Contains(err.Error(), "--json") {
		t.Errorf("WriteJSON into a missing directory: %v", err)
	}
}
