package train

import (
	"fmt"
	"maps"
	"slices"

	dg "github.com/dgtune/dgtune/model/diffusiongemma"

	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/objective"
	"github.com/dgtune/dgtune/optim"
)

// compileStep prepares compile: true. What a replay cannot see changes nothing only if
// every per-step value is an input: the dense form's ids, weights and normaliser and the
// parameters are; LoRA dropout's keys would be captured, so a run with dropout is refused
// rather than replayed with one mask. Steps without a dense form (encoder loss,
// self-conditioning, images) run uncompiled, as the log says.
func (r *run) compileStep() error {
	if !r.cfg.Compile {
		return nil
	}
	if r.cfg.LoRAParameters.Dropout > 0 {
		return fmt.Errorf("compile: true needs lora_parameters.dropout 0 (a compiled step would replay one dropout mask)")
	}
	if _, ok := r.s.Engine.(mx.Compiler); !ok {
		fmt.Fprintf(r.log, "compile: the %s engine runs the step as it is (only mlx compiles)\n", r.s.Engine.Name())
	}
	o := r.s.Objective
	if o.EncoderWeight != 0 || o.SelfCond > 0 {
		fmt.Fprintf(r.log, "compile: objective %s has encoder loss or self-conditioning steps, which run uncompiled\n", r.cfg.Objective)
	}
	r.compiled = NewDenseStep(r.s.Engine, r.s.Model, r.params)
	return nil
}

// compiledGrad is exampleGrad through the compiled dense step.
func (r *run) compiledGrad(params map[string]*mx.Array, ex objective.Example, c objective.Corruption, count float64) (*mx.Array, optim.Params, error) {
	d, err := r.s.Objective.DenseInputs(r.s.Engine, ex, c, count)
	if err != nil {
		return nil, nil, err
	}
	return r.compiled.Grad(params, d)
}

// DenseStep is one example's dense loss and its gradient with respect to a trainable
// set, compiled by the engine where it can (mx.Compile): the parameters and the Dense
// arrays are the compiled function's inputs, so a replay sees every per-step value.
type DenseStep struct {
	t        optim.Trainable
	names    []string // the parameters in argument order
	compiled func([]*mx.Array) []*mx.Array
	release  func()
}

// NewDenseStep compiles the dense step of model m over t's parameters on e.
func NewDenseStep(e mx.Engine, m *dg.Model, t optim.Trainable) *DenseStep {
	s := &DenseStep{t: t, names: slices.Sorted(maps.Keys(t.Params()))}
	s.compiled, s.release = mx.Compile(e, func(in []*mx.Array) []*mx.Array {
		traced := optim.Params{}
		for i, n := range s.names {
			traced[n] = in[i]
		}
		loss, g, err := optim.ValueAndGrad(t, traced, func() *mx.Array {
			return objective.DenseLoss(m, in[len(s.names):])
		})
		if err != nil {
			panic(err) // SetParams of the params' own names and shapes: a bug
		}
		out := []*mx.Array{loss}
		for _, n := range s.names {
			out = append(out, g[n])
		}
		return out
	})
	return s
}

// Grad returns the loss share of d and its gradient at params (t's current arrays).
func (s *DenseStep) Grad(params map[string]*mx.Array, d objective.Dense) (*mx.Array, optim.Params, error) {
	in := make([]*mx.Array, 0, len(s.names)+5)
	for _, n := range s.names {
		in = append(in, params[n])
	}
	outs := s.compiled(append(in, d.Arrays()...))
	// A trace leaves its own arrays installed in the model; the step's go back.
	if err := s.t.SetParams(params); err != nil {
		return nil, nil, err
	}
	g := optim.Params{}
	for j, n := range s.names {
		g[n] = outs[1+j]
	}
	return outs[0], g, nil
}

// Release drops the engine's traces.
func (s *DenseStep) Release() { s.release() }
