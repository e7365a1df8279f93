package optim

import (
	"fmt"
	"maps"
	"math"

	"github.com/dgtune/dgtune/mx"
)

// AdamConfig configures Adam and AdamW. Start from [AdamWDefaults] or [AdamDefaults]:
// the zero value has betas of 0, a valid but very different optimizer.
type AdamConfig struct {
	LearningRate   float64
	Betas          [2]float64 // β1, β2 in [0, 1)
	Eps            float64
	WeightDecay    float64 // decoupled (AdamW); must be 0 for NewAdam
	BiasCorrection bool    // MLX's default is false, and optiq trains with false
}

// AdamWDefaults is mlx.optimizers.AdamW's defaults: betas (0.9, 0.999), eps 1e-8,
// weight decay 0.01, no bias correction — the optimizer optiq trains with.
func AdamWDefaults(lr float64) AdamConfig {
	return AdamConfig{LearningRate: lr, Betas: [2]float64{0.9, 0.999}, Eps: 1e-8, WeightDecay: 0.01}
}

// AdamDefaults is mlx.optimizers.Adam's defaults (AdamWDefaults without weight decay).
func AdamDefaults(lr float64) AdamConfig {
	c := AdamWDefaults(lr)
	c.WeightDecay = 0
	return c
}

// Adam is MLX's Adam, or AdamW when WeightDecay is set. Per parameter w with gradient g,
// at step t (counted from 1):
//
//	m ← β1·m + (1−β1)·g
//	v ← β2·v + (1−β2)·g²
//	w ← w·(1 − lr·wd)                          (AdamW only, before the Adam step)
//	w ← w − lr·m / (√v + eps)                  (no bias correction)
//	w ← w − c1·m / (√v·c2 + eps)               c1 = lr/(1−β1^t), c2 = 1/√(1−β2^t)
//
// State: "m.<param>" and "v.<param>", zeros at the start, in the parameter's dtype.
type Adam struct {
	core
	cfg AdamConfig
}

// NewAdamW builds AdamW for params (their names, shapes and dtypes; the values are not
// kept).
func NewAdamW(params Params, cfg AdamConfig) (*Adam, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("optim: adamw: %w", err)
	}
	c, err := newCore(params, cfg.LearningRate, "m", "v")
	if err != nil {
		return nil, fmt.Errorf("optim: adamw: %w", err)
	}
	return &Adam{core: c, cfg: cfg}, nil
}

// NewAdam builds Adam for params; cfg.WeightDecay must be 0 (use NewAdamW for decay).
func NewAdam(params Params, cfg AdamConfig) (*Adam, error) {
	if cfg.WeightDecay != 0 {
		return nil, fmt.Errorf("optim: adam: weight_decay %g is set; Adam has no weight decay, use AdamW", cfg.WeightDecay)
	}
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("optim: adam: %w", err)
	}
	c, err := newCore(params, cfg.LearningRate, "m", "v")
	if err != nil {
		return nil, fmt.Errorf("optim: adam: %w", err)
	}
	return &Adam{core: c, cfg: cfg}, nil
}

func (c AdamConfig) validate() error {
	if !finiteNonNeg(c.LearningRate) {
		return fmt.Errorf("learning_rate %g must be finite and >= 0", c.LearningRate)
	}
	for i, b := range c.Betas {
		if !(b >= 0 && b < 1) {
			return fmt.Errorf("beta%d %g must be in [0, 1)", i+1, b)
		}
	}
	if !finiteNonNeg(c.Eps) {
		return fmt.Errorf("eps %g must be finite and >= 0", c.Eps)
	}
	if !finiteNonNeg(c.WeightDecay) {
		return fmt.Errorf("weight_decay %g must be finite and >= 0", c.WeightDecay)
	}
	return nil
}

func finiteNonNeg(v float64) bool { return v >= 0 && !math.IsInf(v, 1) }

// Update applies one Adam(W) step; see [Optimizer].
func (o *Adam) Update(params, grads Params) Params {
	if out, ok := o.fusedAll(params, grads); ok {
		return out
	}
	return o.update(params, grads, o.single)
}

// fusedAll is update with every parameter through the engine's one-call update of all of
// them (mx.AdamStepAll), when it has one and the parameters are float32 without bias
// correction: per element the same operations as fused, so the same bits as single.
func (o *Adam) fusedAll(params, grads Params) (Params, bool) {
	if o.cfg.BiasCorrection {
		return nil, false
	}
	names := o.gradNames(params, grads) // panics on a bad gradient, as update does
	if len(names) == 0 {
		return nil, false
	}
	var ps, gs, ms, vs []*mx.Array
	for _, n := range names {
		ps, gs = append(ps, params[n]), append(gs, grads[n])
		ms, vs = append(ms, o.state[stateKey("m", n)]), append(vs, o.state[stateKey("v", n)])
	}
	np, nm, nv, ok := mx.AdamStepAll(ps, gs, ms, vs, o.constants())
	if !ok {
		return nil, false
	}
	o.step++
	out := maps.Clone(params)
	for i, n := range names {
		out[n] = np[i]
		o.state[stateKey("m", n)], o.state[stateKey("v", n)] = nm[i], nv[i]
		ms[i].Free()
		vs[i].Free()
	}
	return out, true
}

// single follows mlx.optimizers.Adam(W).apply_single operation by operation so that
// the mlx engine reproduces MLX's rounding. Float32 without bias correction, the common
// case, is mx.AdamStep (the engine's one-pass update, or mx's composition of these ops);
// other dtypes and bias correction compose here, with the scalars in the gradient's dtype.
func (o *Adam) single(p, g *mx.Array, st []*mx.Array) (*mx.Array, []*mx.Array) {
	e, dt := g.Engine(), g.DType()
	b1, b2 := o.cfg.Betas[0], o.cfg.Betas[1]
	if dt == mx.Float32 && !o.cfg.BiasCorrection {
		np, nm, nv := mx.AdamStep(p, g, st[0], st[1], o.constants())
		return np, []*mx.Array{nm, nv}
	}
	lr := learningRate(e, o.lr, dt)
	if o.cfg.WeightDecay != 0 {
		p = mx.Multiply(p, mx.Subtract(mx.Scalar(e, 1, dt), mx.MulScalar(lr, o.cfg.WeightDecay)))
	}
	m := mx.Add(mx.MulScalar(st[0], b1), mx.MulScalar(g, 1-b1))
	v := mx.Add(mx.MulScalar(st[1], b2), mx.MulScalar(mx.Square(g), 1-b2))
	if !o.cfg.BiasCorrection {
		step := mx.Divide(mx.Multiply(lr, m), mx.AddScalar(mx.Sqrt(v), o.cfg.Eps))
		return mx.Subtract(p, step), []*mx.Array{m, v}
	}
	// MLX computes β^t in float32 from the integer step and casts the corrections to the
	// gradient's dtype only at the end.
	t := mx.Scalar(e, float64(o.step), mx.Float32)
	one := mx.Scalar(e, 1, mx.Float32)
	c1 := mx.AsType(mx.Divide(lr, mx.Subtract(one, mx.Power(mx.Scalar(e, b1, mx.Float32), t))), dt)
	c2 := mx.AsType(mx.Rsqrt(mx.Subtract(one, mx.Power(mx.Scalar(e, b2, mx.Float32), t))), dt)
	num := mx.Multiply(c1, m)
	den := mx.AddScalar(mx.Multiply(mx.Sqrt(v), c2), o.cfg.Eps)
	return mx.Subtract(p, mx.Divide(num, den)), []*mx.Array{m, v}
}

// constants are the scalars of the float32 composition without bias correction, each the
// value the composition's scalar array holds.
func (o *Adam) constants() mx.AdamConstants {
	b1, b2 := o.cfg.Betas[0], o.cfg.Betas[1]
	lr := float32(o.lr) // learningRate: the rate as float32
	c := mx.AdamConstants{
		LR: lr,
		B1: float32(b1), OneMinusB1: float32(1 - b1),
		B2: float32(b2), OneMinusB2: float32(1 - b2),
		Eps: float32(o.cfg.Eps),
	}
	if wd := o.cfg.WeightDecay; wd != 0 {
		// 1 − lr·wd as Subtract(1, MulScalar(lr, wd)) rounds it: the conversion keeps
		// the product from fusing into the subtraction.
		c.HasDecay, c.WeightDecay, c.Decay = true, float32(wd), 1-float32(lr*float32(wd))
	}
	return c
}
