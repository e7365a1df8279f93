package evaluate

import (
	"math"
	"strings"
	"testing"

	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/objective"
)

// eval.two_pass scores the same corruptions on the second pass of the two-pass step:
// Σ over corrupted positions of the CE of SelfConditioned's logits, over their count.
func TestTwoPassLoss(t *testing.T) {
	s := tinySession(t)
	cfg := s.Config
	cfg.Eval.TwoPass = true
	cfg.Eval.NoiseLevels = []float64{0.5}
	var corrs []objective.Corruption
	ev := &Evaluator{Session: s, Config: cfg, Cases: cases(),
		OnCorruption: func(_ string, _ float64, _ Case, c objective.Corruption) { corrs = append(corrs, c) }}
	res, err := ev.Run("base", false)
	if err != nil {
		t.Fatal(err)
	}
	m, e := s.Model, s.Engine
	v := m.Config.TextConfig.VocabSize
	var sum, sum1, n float64
	for i, c := range cases() {
		cache := m.NewCache()
		m.Encode(mx.FromInt32(e, c.Prompt, 1, len(c.Prompt)), cache)
		canvas := mx.FromInt32(e, corrs[i].Canvas, 1, len(c.Target))
		second := objective.SelfConditioned(m, canvas, cache).Float32s()
		first := m.Decode(canvas, cache, nil).Float32s()
		for j, bad := range corrs[i].Corrupt {
			if bad {
				sum += ce(second[j*v:(j+1)*v], c.Target[j])
				sum1 += ce(first[j*v:(j+1)*v], c.Target[j])
				n++
			}
		}
	}
	if got := res.TwoPassLoss["0.5"]; math.Abs(got-sum/n) > 1e-4 {
		t.Errorf("two-pass loss %v, hand %v", got, sum/n)
	}
	if got := res.Loss["0.5"]; math.Abs(got-sum1/n) > 1e-4 || math.Abs(sum-sum1) < 1e-3 {
		t.Errorf("single-pass loss %v (hand %v), two-pass hand %v: the two must differ", got, sum1/n, sum/n)
	}
	var names []string
	for _, r := range Compare(res, nil) {
		names = append(names, r.Metric)
	}
	if got := strings.Join(names, "|"); got != "loss @ t=0.5|accuracy @ t=0.5|two-pass loss @ t=0.5|two-pass accuracy @ t=0.5" {
		t.Errorf("rows %s", got)
	}
	cfg.Eval.TwoPass = false
	plain, err := (&Evaluator{Session: s, Config: cfg, Cases: cases()}).Run("base", false)
	if err != nil {
		t.Fatal(err)
	}
	if plain.TwoPassLoss != nil || len(Compare(plain, nil)) != 2 {
		t.Errorf("two-pass metrics without eval.two_pass: %v", plain.TwoPassLoss)
	}
}

func ce(row []float32, target int32) float64 {
	top := math.Inf(-1)
	for _, x := range row {
		top = math.Max(top, float64(x))
	}
	s := 0.0
	for _, x := range row {
		s += math.Exp(float64(x) - top)
	}
	return top + math.Log(s) - float64(row[target])
}

// eval.self_conditioning false turns the sampler's self-conditioning off.
func TestGenerateOptionsSelfConditioning(t *testing.T) {
	s := tinySession(t)
	for _, on := range []bool{true, false} {
		cfg := s.Config
		cfg.Eval.SelfCond = on
		opt := (&Evaluator{Session: s, Config: cfg, Cases: cases()}).GenerateOptions(cases()[0], 0)
		if opt.NoSelfConditioning == on {
			t.Errorf("eval.self_conditioning %v: NoSelfConditioning %v", on, opt.NoSelfConditioning)
		}
	}
}
