package optim

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// Schedule maps an optimizer step (the number of updates already applied, 0 for the
// first update) to a learning rate. Call it with opt.Step() before each Update, which is
// where MLX evaluates the schedules it is given.
//
// The schedules below compute in float64; MLX computes them in float32, so values agree
// to float32 rounding, and the optimizer rounds the rate to float32 anyway.
type Schedule func(step int) float64

// ScheduleConfig is mlx-lm's `lr_schedule` config entry:
//
//	lr_schedule:
//	  name: cosine_decay      # cosine_decay | linear_schedule | exponential_decay | step_decay | constant
//	  arguments: [1e-5, 1000] # positional arguments of the mlx.optimizers function
//	  warmup: 100             # optional: linear warmup steps
//	  warmup_init: 1e-7       # optional: warmup start value (default 0)
type ScheduleConfig struct {
	Name       string    `json:"name" yaml:"name" mapstructure:"name"`
	Arguments  []float64 `json:"arguments" yaml:"arguments" mapstructure:"arguments"`
	Warmup     int       `json:"warmup,omitempty" yaml:"warmup,omitempty" mapstructure:"warmup"`
	WarmupInit float64   `json:"warmup_init,omitempty" yaml:"warmup_init,omitempty" mapstructure:"warmup_init"`
}

// ScheduleNames lists the names ParseSchedule accepts.
func ScheduleNames() []string {
	return []string{"constant", "cosine_decay", "cosine_with_min_lr", "exponential_decay", "linear_schedule", "step_decay"}
}

// ParseSchedule builds the schedule cfg describes, as mlx-lm's build_schedule does:
// the named mlx.optimizers schedule applied to cfg.Arguments, preceded when Warmup > 0
// by linear_schedule(WarmupInit, Arguments[0], Warmup) joined at boundary Warmup+1.
// So the rate reaches the schedule's initial value at step Warmup, holds it at step
// Warmup+1 (where the schedule starts at its own step 0), and follows the schedule
// after.
//
// An empty Name (no lr_schedule in the config) means a constant baseLR, as mlx-lm
// falls back to learning_rate; "constant" takes no argument (baseLR) or one (the
// value). Warmup applies to constants too.
//
// "cosine_with_min_lr" [peak, decay_steps, min] is the one schedule that owns its warmup:
// see WarmupCosine.
func ParseSchedule(cfg ScheduleConfig, baseLR float64) (Schedule, error) {
	if cfg.Name == "cosine_with_min_lr" {
		s, err := warmupCosine(cfg)
		if err != nil {
			return nil, fmt.Errorf("optim: lr_schedule %q: %w", cfg.Name, err)
		}
		return s, nil
	}
	s, init, err := namedSchedule(cfg, baseLR)
	if err != nil {
		return nil, fmt.Errorf("optim: lr_schedule %q: %w", cfg.Name, err)
	}
	switch {
	case cfg.Warmup < 0:
		return nil, fmt.Errorf("optim: lr_schedule %q: warmup %d must be >= 0", cfg.Name, cfg.Warmup)
	case !isFinite(cfg.WarmupInit):
		return nil, fmt.Errorf("optim: lr_schedule %q: warmup_init %g must be finite", cfg.Name, cfg.WarmupInit)
	case cfg.Warmup == 0:
		return s, nil
	}
	warm, err := LinearSchedule(cfg.WarmupInit, init, cfg.Warmup)
	if err != nil {
		return nil, fmt.Errorf("optim: lr_schedule %q: warmup: %w", cfg.Name, err)
	}
	return JoinSchedules([]Schedule{warm, s}, []int{cfg.Warmup + 1})
}

// namedSchedule returns the schedule without warmup and its initial value (the warmup
// target, mlx-lm's arguments[0]).
func namedSchedule(cfg ScheduleConfig, baseLR float64) (Schedule, float64, error) {
	args := cfg.Arguments
	for i, a := range args {
		if !isFinite(a) {
			return nil, 0, fmt.Errorf("argument %d is %g, want a finite number", i+1, a)
		}
	}
	arity := func(lo, hi int, usage string) error {
		if len(args) < lo || len(args) > hi {
			return fmt.Errorf("got %d arguments %v, want %s", len(args), args, usage)
		}
		return nil
	}
	switch cfg.Name {
	case "", "constant":
		if err := arity(0, 1, "[] (learning_rate) or [value]"); err != nil {
			return nil, 0, err
		}
		v := baseLR
		if len(args) == 1 {
			v = args[0]
		}
		if !isFinite(v) {
			return nil, 0, fmt.Errorf("constant learning rate %g must be finite", v)
		}
		return Constant(v), v, nil
	case "cosine_decay":
		if err := arity(2, 3, "[init, decay_steps] or [init, decay_steps, end]"); err != nil {
			return nil, 0, err
		}
		steps, err := intArg("decay_steps", args[1])
		if err != nil {
			return nil, 0, err
		}
		end := 0.0
		if len(args) == 3 {
			end = args[2]
		}
		s, err := CosineDecay(args[0], steps, end)
		return s, args[0], err
	case "linear_schedule":
		if err := arity(3, 3, "[init, end, steps]"); err != nil {
			return nil, 0, err
		}
		steps, err := intArg("steps", args[2])
		if err != nil {
			return nil, 0, err
		}
		s, err := LinearSchedule(args[0], args[1], steps)
		return s, args[0], err
	case "exponential_decay":
		if err := arity(2, 2, "[init, decay_rate]"); err != nil {
			return nil, 0, err
		}
		return ExponentialDecay(args[0], args[1]), args[0], nil
	case "step_decay":
		if err := arity(3, 3, "[init, decay_rate, step_size]"); err != nil {
			return nil, 0, err
		}
		size, err := intArg("step_size", args[2])
		if err != nil {
			return nil, 0, err
		}
		s, err := StepDecay(args[0], args[1], size)
		return s, args[0], err
	}
	return nil, 0, fmt.Errorf("unknown schedule name, want one of %v", ScheduleNames())
}

// intArg accepts a whole number given as a config float (YAML's 1000 and 1000.0 alike).
func intArg(name string, v float64) (int, error) {
	if v != math.Trunc(v) || math.Abs(v) > 1<<53 {
		return 0, fmt.Errorf("%s %g must be a whole number", name, v)
	}
	return int(v), nil
}

func isFinite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// warmupCosine parses cosine_with_min_lr's arguments [peak, decay_steps, min].
func warmupCosine(cfg ScheduleConfig) (Schedule, error) {
	args := cfg.Arguments
	if len(args) != 3 {
		return nil, fmt.Errorf("got %d arguments %v, want [peak, decay_steps, min]", len(args), args)
	}
	for i, a := range append(slices.Clone(args), cfg.WarmupInit) {
		if !isFinite(a) {
			return nil, fmt.Errorf("argument %d is %g, want a finite number", i+1, a)
		}
	}
	steps, err := intArg("decay_steps", args[1])
	if err != nil {
		return nil, err
	}
	return WarmupCosine(cfg.WarmupInit, args[0], args[2], cfg.Warmup, steps)
}

// WarmupCosine is the warm-up + cosine schedule of Megatron's and NeMo AutoModel's
// OptimizerParamScheduler (lr_decay_style cosine) and of transformers'
// cosine_with_min_lr: from init at step 0 linearly to peak at step warmup, then
// min + (peak−min)·½(1 + cos(π·(step−warmup)/(decaySteps−warmup))) down to min at
// decaySteps, min after. Unlike mlx-lm's warmup joined to cosine_decay, the decay counts
// from step warmup and ends at decaySteps in all.
func WarmupCosine(init, peak, minLR float64, warmup, decaySteps int) (Schedule, error) {
	switch {
	case warmup < 0:
		return nil, fmt.Errorf("warmup %d must be >= 0", warmup)
	case decaySteps <= warmup:
		return nil, fmt.Errorf("decay_steps %d must be greater than warmup %d", decaySteps, warmup)
	}
	return func(step int) float64 {
		switch {
		case warmup > 0 && step <= warmup:
			return init + (peak-init)*float64(step)/float64(warmup)
		case step > decaySteps:
			return minLR
		}
		ratio := float64(step-warmup) / float64(decaySteps-warmup)
		return minLR + 0.5*(math.Cos(math.Pi*ratio)+1)*(peak-minLR)
	}, nil
}

// Constant is the schedule that is always v.
func Constant(v float64) Schedule { return func(int) float64 { return v } }

// CosineDecay is mlx.optimizers.cosine_decay: end + (init−end)·½(1 + cos(π·min(step,
// decaySteps)/decaySteps)), constant at end after decaySteps.
func CosineDecay(init float64, decaySteps int, end float64) (Schedule, error) {
	if decaySteps < 1 {
		return nil, fmt.Errorf("cosine_decay: decay_steps must be greater than 0, but got %d", decaySteps)
	}
	return func(step int) float64 {
		s := float64(min(step, decaySteps))
		decay := 0.5 * (1 + math.Cos(math.Pi/float64(decaySteps)*s))
		return end + decay*(init-end)
	}, nil
}

// LinearSchedule is mlx.optimizers.linear_schedule: init + min(step, steps)·(end−init)/steps,
// constant at end after steps.
func LinearSchedule(init, end float64, steps int) (Schedule, error) {
	if steps < 1 {
		return nil, fmt.Errorf("linear_schedule: steps must be greater than 0, but got %d", steps)
	}
	return func(step int) float64 {
		return float64(min(step, steps))*((end-init)/float64(steps)) + init
	}, nil
}

// ExponentialDecay is mlx.optimizers.exponential_decay: init·rate^step.
func ExponentialDecay(init, rate float64) Schedule {
	return func(step int) float64 { return init * math.Pow(rate, float64(step)) }
}

// StepDecay is mlx.optimizers.step_decay: init·rate^⌊step/stepSize⌋.
func StepDecay(init, rate float64, stepSize int) (Schedule, error) {
	if stepSize < 1 {
		return nil, fmt.Errorf("step_decay: step_size must be greater than 0, but got %d", stepSize)
	}
	return func(step int) float64 {
		return init * math.Pow(rate, math.Floor(float64(step)/float64(stepSize)))
	}, nil
}

// JoinSchedules is mlx.optimizers.join_schedules: schedule i+1 takes over at
// boundaries[i] and sees the steps counted from that boundary.
func JoinSchedules(schedules []Schedule, boundaries []int) (Schedule, error) {
	if len(schedules) == 0 {
		return nil, errors.New("join_schedules: must provide at least 1 schedule to join")
	}
	if len(schedules) != len(boundaries)+1 {
		return nil, fmt.Errorf("join_schedules: received %d boundaries but expected %d", len(boundaries), len(schedules)-1)
	}
	return func(step int) float64 {
		out := schedules[0](step)
		for i, b := range boundaries {
			if step >= b {
				out = schedules[i+1](step - b)
			}
		}
		return out
	}, nil
}
