package optim

import (
	"errors"
	"fmt"
	"math"

	"github.com/dgtune/dgtune/mx"
)

// SGDConfig configures SGD (mlx.optimizers.SGD's arguments; all default to 0/false).
type SGDConfig struct {
	LearningRate float64
	Momentum     float64 // μ; 0 disables momentum and its state
	WeightDecay  float64 // L2 penalty added to the gradient (not decoupled)
	Dampening    float64 // τ
	Nesterov     bool    // needs Momentum > 0 and Dampening == 0, as in MLX
}

// SGD is MLX's stochastic gradient descent. Per parameter w with gradient g:
//
//	g ← g + wd·w                          (when WeightDecay ≠ 0)
//	w ← w − lr·g                          (when Momentum = 0)
//	v ← μ·v + (1−τ)·g                     (τ = 0 adds g itself)
//	w ← w − lr·v                          or, Nesterov, w ← w − lr·(g + μ·v)
//
// Unlike PyTorch, the first step uses v = μ·0 + (1−τ)·g, not v = g. State: "v.<param>"
// when Momentum > 0, none otherwise.
type SGD struct {
	core
	cfg SGDConfig
}

// NewSGD builds SGD for params (their names, shapes and dtypes).
func NewSGD(params Params, cfg SGDConfig) (*SGD, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("optim: sgd: %w", err)
	}
	var kinds []string
	if cfg.Momentum > 0 {
		kinds = []string{"v"}
	}
	c, err := newCore(params, cfg.LearningRate, kinds...)
	if err != nil {
		return nil, fmt.Errorf("optim: sgd: %w", err)
	}
	return &SGD{core: c, cfg: cfg}, nil
}

func (c SGDConfig) validate() error {
	switch {
	case !finiteNonNeg(c.LearningRate):
		return fmt.Errorf("learning_rate %g must be finite and >= 0", c.LearningRate)
	case !finiteNonNeg(c.Momentum):
		return fmt.Errorf("momentum %g must be finite and >= 0", c.Momentum)
	case !finiteNonNeg(c.WeightDecay):
		return fmt.Errorf("weight_decay %g must be finite and >= 0", c.WeightDecay)
	case math.IsNaN(c.Dampening) || math.IsInf(c.Dampening, 0):
		return fmt.Errorf("dampening %g must be finite", c.Dampening)
	case c.Nesterov && (c.Momentum <= 0 || c.Dampening != 0):
		return errors.New("nesterov momentum requires a momentum and zero dampening")
	}
	return nil
}

// Update applies one SGD step; see [Optimizer].
func (o *SGD) Update(params, grads Params) Params {
	return o.update(params, grads, o.single)
}

// single follows mlx.optimizers.SGD.apply_single operation by operation.
func (o *SGD) single(p, g *mx.Array, st []*mx.Array) (*mx.Array, []*mx.Array) {
	lr := learningRate(g.Engine(), o.lr, g.DType())
	if o.cfg.WeightDecay != 0 {
		g = mx.Add(g, mx.MulScalar(p, o.cfg.WeightDecay))
	}
	if o.cfg.Momentum <= 0 {
		return mx.Subtract(p, mx.Multiply(lr, g)), nil
	}
	v := mx.MulScalar(st[0], o.cfg.Momentum)
	if o.cfg.Dampening > 0 {
		v = mx.Add(v, mx.MulScalar(g, 1-o.cfg.Dampening))
	} else {
		v = mx.Add(v, g)
	}
	upd := v
	if o.cfg.Nesterov {
		upd = mx.Add(g, mx.MulScalar(v, o.cfg.Momentum))
	}
	return mx.Subtract(p, mx.Multiply(lr, upd)), []*mx.Array{v}
}
