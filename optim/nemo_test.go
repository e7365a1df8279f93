package optim

import (
	"encoding/json"
	"math"
	"os"
	"testing"

	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
)

// NeMo AutoModel's own numbers at 36044ad (interop/nemo_golden.py): the learning rate of
// each of diffusion_gemma_lora.yaml's 800 steps, and torch's AdamW over a few gradients.
type nemoGolden struct {
	LR struct {
		LR []float64 `json:"lr"`
	} `json:"lr"`
	AdamW struct {
		Init        []float32   `json:"init"`
		LR          float64     `json:"lr"`
		Betas       [2]float64  `json:"betas"`
		Eps         float64     `json:"eps"`
		WeightDecay float64     `json:"weight_decay"`
		Grads       [][]float32 `json:"grads"`
		Params      [][]float32 `json:"params"`
	} `json:"adamw"`
}

func readNeMoGolden(t *testing.T) nemoGolden {
	t.Helper()
	b, err := os.ReadFile("../interop/testdata/nemo/golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var g nemoGolden
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	return g
}

// recipe: nemo's lr_schedule (cosine_with_min_lr [1.5e-4, 800, 1.5e-5], warmup 25 from 0)
// gives, at each of the 800 steps, the rate NeMo's OptimizerParamScheduler (get_lr) set on
// torch's AdamW for that step: 0 for the first, 1.5e-4 at step 25, 1.5e-5 + … after. mlx-lm's
// warm-up joined to cosine_decay [1.5e-4, 800, 1.5e-5] does not (it decays 26 steps late).
func TestCosineWithMinLRMatchesNeMo(t *testing.T) {
	want := readNeMoGolden(t).LR.LR
	if len(want) != 800 {
		t.Fatalf("%d golden steps, want 800", len(want))
	}
	s, err := ParseSchedule(ScheduleConfig{Name: "cosine_with_min_lr", Arguments: []float64{1.5e-4, 800, 1.5e-5}, Warmup: 25}, 0)
	if err != nil {
		t.Fatal(err)
	}
	joined, err := ParseSchedule(ScheduleConfig{Name: "cosine_decay", Arguments: []float64{1.5e-4, 800, 1.5e-5}, Warmup: 25}, 0)
	if err != nil {
		t.Fatal(err)
	}
	worst, joinedWorst := 0.0, 0.0
	for step, w := range want {
		got := s(step)
		if d := math.Abs(got - w); d > 1e-15*math.Max(w, 1e-12) && d > 1e-20 {
			t.Errorf("step %d (update %d): lr %.17g, NeMo's %.17g", step, step+1, got, w)
		}
		worst = math.Max(worst, math.Abs(got-w))
		joinedWorst = math.Max(joinedWorst, math.Abs(joined(step)-w))
	}
	if want[0] != 0 || want[25] != 1.5e-4 {
		t.Errorf("NeMo's schedule: step 0 %g, step 25 %g", want[0], want[25])
	}
	if joinedWorst < 1e-7 {
		t.Errorf("mlx-lm's warm-up + cosine_decay is within %g of NeMo's: this test cannot tell them apart", joinedWorst)
	}
	t.Logf("largest difference %g (mlx-lm's joined schedule: %g)", worst, joinedWorst)
}

func TestBadCosineWithMinLR(t *testing.T) {
	cases := []struct {
		cfg  ScheduleConfig
		want string
	}{
		{ScheduleConfig{Name: "cosine_with_min_lr", Arguments: []float64{1e-4, 800}}, `optim: lr_schedule "cosine_with_min_lr": got 2 arguments [0.0001 800], want [peak, decay_steps, min]`},
		{ScheduleConfig{Name: "cosine_with_min_lr", Arguments: []float64{1e-4, 20, 0}, Warmup: 25}, `optim: lr_schedule "cosine_with_min_lr": decay_steps 20 must be greater than warmup 25`},
		{ScheduleConfig{Name: "cosine_with_min_lr", Arguments: []float64{1e-4, 80.5, 0}}, `optim: lr_schedule "cosine_with_min_lr": decay_steps 80.5 must be a whole number`},
		{ScheduleConfig{Name: "cosine_with_min_lr", Arguments: []float64{1e-4, 80, 0}, Warmup: -1}, `optim: lr_schedule "cosine_with_min_lr": warmup -1 must be >= 0`},
		{ScheduleConfig{Name: "cosine_with_min_lr", Arguments: []float64{math.Inf(1), 80, 0}}, `optim: lr_schedule "cosine_with_min_lr": argument 1 is +Inf, want a finite number`},
	}
	for _, c := range cases {
		if _, err := ParseSchedule(c.cfg, 0); err == nil || err.Error() != c.want {
			t.Errorf("ParseSchedule(%+v) = %v, want %q", c.cfg, err, c.want)
		}
	}
}

// AdamW with bias correction and the recipe's betas, eps and decay takes torch.optim.AdamW's
// steps (float32, within 1e-6).
func TestAdamWMatchesTorch(t *testing.T) {
	g := readNeMoGolden(t).AdamW
	mxtest.Engines(t, func(t *testing.T, e mx.Engine) {
		p := Params{"w": mx.FromFloat32(e, g.Init, len(g.Init))}
		opt, err := NewAdamW(p, AdamConfig{LearningRate: g.LR, Betas: g.Betas, Eps: g.Eps, WeightDecay: g.WeightDecay, BiasCorrection: true})
		if err != nil {
			t.Fatal(err)
		}
		for i, gr := range g.Grads {
			p = opt.Update(p, Params{"w": mx.FromFloat32(e, gr, len(gr))})
			got := p["w"].Float32s()
			for j, w := range g.Params[i] {
				if math.Abs(float64(got[j]-w)) > 1e-6 {
					t.Errorf("step %d: w[%d] = %.8f, torch %.8f", i+1, j, got[j], w)
				}
			}
		}
	})
}
