package train

import (
	"fmt"
	"slices"

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
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range r.params.Params() {
			if !yield(n) {
				return
			}
		}
	})
	m := r.s.Model
	r.compiledNames = names
	r.compiled, r.release = mx.Compile(r.s.Engine, func(in []*mx.Array) []*mx.Array {
		traced := optim.Params{}
		for i, n := range names {
			traced[n] = in[i]
		}
		loss, g, err := optim.ValueAndGrad(r.params, traced, func() *mx.Array {
			return objective.DenseLoss(m, in[len(names):])
		})
		if err != nil {
			panic(err) // SetParams of the params' own names and shapes: a bug
		}
		out := []*mx.Array{loss}
		for _, n := range names {
			out = append(out, g[n])
		}
		return out
	})
	return nil
}

// compiledGrad is exampleGrad through the compiled dense step.
func (r *run) compiledGrad(params map[string]*mx.Array, ex objective.Example, c objective.Corruption, count float64) (float64, optim.Params, error) {
	d, err := r.s.Objective.DenseInputs(r.s.Engine, ex, c, count)
	if err != nil {
		return 0, nil, err
	}
	in := make([]*mx.Array, 0, len(r.compiledNames)+5)
	for _, n := range r.compiledNames {
		in = append(in, params[n])
	}
	outs := r.compiled(append(in, d.Arrays()...))
	// A trace leaves its own arrays installed in the model; the step's go back.
	if err := r.params.SetParams(params); err != nil {
		return 0, nil, err
	}
	g := optim.Params{}
	for j, n := range r.compiledNames {
		g[n] = outs[1+j]
	}
	return outs[0].Item(), g, nil
}
