package optim

import (
	"math"
	"strings"
	"testing"
)

func TestParseSchedule(t *testing.T) {
	cosine := ScheduleConfig{Name: "cosine_decay", Arguments: []float64{1e-3, 100}}
	warm := cosine
	warm.Warmup = 10
	warmFrom := warm
	warmFrom.WarmupInit = 1e-5
	tests := []struct {
		name   string
		cfg    ScheduleConfig
		baseLR float64
		steps  map[int]float64 // step → hand value
	}{
		// ½(1+cos(π s/100))·1e-3: s=0 → 1e-3; s=50 → cos(π/2)=0 → 5e-4; s=25 → ½(1+√½) → 8.5355339e-4;
		// held at 0 from s=100 on.
		{"cosine", cosine, 0, map[int]float64{0: 1e-3, 25: 8.5355339e-4, 50: 5e-4, 100: 0, 150: 0}},
		// end 1e-4: 1e-4 + ½·(9e-4) = 5.5e-4 at s=50, 1e-4 from s=100.
		{"cosine end", ScheduleConfig{Name: "cosine_decay", Arguments: []float64{1e-3, 100, 1e-4}}, 0, map[int]float64{0: 1e-3, 50: 5.5e-4, 100: 1e-4, 101: 1e-4}},
		// 0 + s·(1e-2/10), held at 1e-2 after 10 steps.
		{"linear", ScheduleConfig{Name: "linear_schedule", Arguments: []float64{0, 1e-2, 10}}, 0, map[int]float64{0: 0, 5: 5e-3, 10: 1e-2, 20: 1e-2}},
		// Decreasing: 1e-2 + 4·(−9e-3/10) = 6.4e-3.
		{"linear down", ScheduleConfig{Name: "linear_schedule", Arguments: []float64{1e-2, 1e-3, 10}}, 0, map[int]float64{4: 6.4e-3, 10: 1e-3}},
		// 0.1·0.9^s: MLX's docstring shows 0.06561 after five updates, i.e. s=4.
		{"exponential", ScheduleConfig{Name: "exponential_decay", Arguments: []float64{0.1, 0.9}}, 0, map[int]float64{0: 0.1, 2: 0.081, 4: 0.06561}},
		// 0.1·0.9^⌊s/10⌋: 0.1 until s=9, 0.09 from 10, 0.081 at 20 and 21 (MLX's docstring).
		{"step decay", ScheduleConfig{Name: "step_decay", Arguments: []float64{0.1, 0.9, 10}}, 0, map[int]float64{9: 0.1, 10: 0.09, 20: 0.081, 21: 0.081}},
		{"no schedule", ScheduleConfig{}, 2e-4, map[int]float64{0: 2e-4, 1000: 2e-4}},
		{"constant default", ScheduleConfig{Name: "constant"}, 2e-4, map[int]float64{0: 2e-4, 7: 2e-4}},
		{"constant value", ScheduleConfig{Name: "constant", Arguments: []float64{3e-4}}, 2e-4, map[int]float64{0: 3e-4, 7: 3e-4}},
		// mlx-lm joins linear_schedule(0, init, 10) and the cosine at boundary 11: the
		// warmup is s·1e-4 for s ≤ 10 (reaching 1e-3 at s=10), s=11 is cosine(0) = 1e-3,
		// s=12 is cosine(1) = ½(1+cos(π/100))·1e-3 = 9.9975328e-4, s=61 is cosine(50) = 5e-4.
		{"warmup", warm, 0, map[int]float64{0: 0, 5: 5e-4, 9: 9e-4, 10: 1e-3, 11: 1e-3, 12: 9.9975328e-4, 61: 5e-4, 111: 0}},
		// From 1e-5: 1e-5 + 5·(1e-3 − 1e-5)/10 = 5.05e-4 at s=5.
		{"warmup init", warmFrom, 0, map[int]float64{0: 1e-5, 5: 5.05e-4, 10: 1e-3, 11: 1e-3}},
		// A warmed-up constant: s·(2e-4/4) until 4, then 2e-4.
		{"warmup constant", ScheduleConfig{Warmup: 4}, 2e-4, map[int]float64{0: 0, 2: 1e-4, 4: 2e-4, 5: 2e-4, 100: 2e-4}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := ParseSchedule(tc.cfg, tc.baseLR)
			if err != nil {
				t.Fatal(err)
			}
			for step, want := range tc.steps {
				if got := s(step); !(math.Abs(got-want) <= 1e-12+1e-7*math.Abs(want)) {
					t.Errorf("schedule(%d) = %.10g, want %.10g", step, got, want)
				}
			}
		})
	}
}

// The example of mlx.optimizers.join_schedules' docstring: linear warmup over 10
// steps into cosine_decay(0.1, 200) at boundary 10; after 12 updates MLX reports
// 0.0999938 = cosine(1) = 0.05·(1+cos(π/200)) (the 12th update used step 11).
func TestJoinSchedulesDocExample(t *testing.T) {
	lin, err := LinearSchedule(0, 0.1, 10)
	if err != nil {
		t.Fatal(err)
	}
	cos, err := CosineDecay(0.1, 200, 0)
	if err != nil {
		t.Fatal(err)
	}
	s, err := JoinSchedules([]Schedule{lin, cos}, []int{10})
	if err != nil {
		t.Fatal(err)
	}
	for step, want := range map[int]float64{0: 0, 9: 0.09, 10: 0.1, 11: 0.0999938} {
		if got := s(step); !(math.Abs(got-want) <= 1e-7) {
			t.Errorf("schedule(%d) = %.8g, want %.8g", step, got, want)
		}
	}
}

func TestScheduleErrors(t *testing.T) {
	tests := []struct {
		name string
		cfg  ScheduleConfig
		want string
	}{
		{"unknown", ScheduleConfig{Name: "cosine"}, `lr_schedule "cosine": unknown schedule name, want one of [constant cosine_decay`},
		{"cosine one arg", ScheduleConfig{Name: "cosine_decay", Arguments: []float64{1e-3}}, "got 1 arguments [0.001], want [init, decay_steps] or [init, decay_steps, end]"},
		{"cosine four args", ScheduleConfig{Name: "cosine_decay", Arguments: []float64{1, 2, 3, 4}}, "got 4 arguments"},
		{"cosine zero steps", ScheduleConfig{Name: "cosine_decay", Arguments: []float64{1e-3, 0}}, "decay_steps must be greater than 0, but got 0"},
		{"cosine fractional steps", ScheduleConfig{Name: "cosine_decay", Arguments: []float64{1e-3, 10.5}}, "decay_steps 10.5 must be a whole number"},
		{"linear two args", ScheduleConfig{Name: "linear_schedule", Arguments: []float64{0, 1}}, "want [init, end, steps]"},
		{"linear negative steps", ScheduleConfig{Name: "linear_schedule", Arguments: []float64{0, 1, -3}}, "steps must be greater than 0, but got -3"},
		{"exponential three args", ScheduleConfig{Name: "exponential_decay", Arguments: []float64{1, 0.9, 2}}, "want [init, decay_rate]"},
		{"step decay zero size", ScheduleConfig{Name: "step_decay", Arguments: []float64{1, 0.9, 0}}, "step_size must be greater than 0"},
		{"constant two args", ScheduleConfig{Name: "constant", Arguments: []float64{1, 2}}, "want [] (learning_rate) or [value]"},
		{"nan argument", ScheduleConfig{Name: "exponential_decay", Arguments: []float64{math.NaN(), 0.9}}, "argument 1 is NaN"},
		{"negative warmup", ScheduleConfig{Name: "constant", Warmup: -1}, "warmup -1 must be >= 0"},
		{"inf warmup init", ScheduleConfig{Name: "constant", Warmup: 3, WarmupInit: math.Inf(1)}, "warmup_init +Inf must be finite"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := ParseSchedule(tc.cfg, 1e-4)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ParseSchedule(%+v) error %v, want one containing %q", tc.cfg, err, tc.want)
			}
			if s != nil {
				t.Fatal("schedule returned with an error")
			}
		})
	}
	t.Run("non-finite base", func(t *testing.T) {
		if _, err := ParseSchedule(ScheduleConfig{}, math.Inf(1)); err == nil || !strings.Contains(err.Error(), "constant learning rate +Inf must be finite") {
			t.Fatalf("error %v", err)
		}
	})
	t.Run("join", func(t *testing.T) {
		c := Constant(1)
		if _, err := JoinSchedules(nil, nil); err == nil || !strings.Contains(err.Error(), "at least 1 schedule") {
			t.Errorf("JoinSchedules(nil) error %v", err)
		}
		if _, err := JoinSchedules([]Schedule{c, c}, []int{1, 2}); err == nil || !strings.Contains(err.Error(), "received 2 boundaries but expected 1") {
			t.Errorf("JoinSchedules error %v", err)
		}
	})
}
