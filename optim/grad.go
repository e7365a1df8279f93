package optim

import (
	"fmt"

	"github.com/dgtune/dgtune/mx"
)

// Trainable is the set of arrays a run optimises, by name: a LoRA adapter's A/B
// matrices (lora.Adapter), or a model's own tensors for fine_tune_type full.
type Trainable interface {
	// Params returns the arrays in use, by name.
	Params() map[string]*mx.Array
	// SetParams installs arrays (possibly traced ones, inside ValueAndGrad) by name.
	SetParams(map[string]*mx.Array) error
}

// ValueAndGrad differentiates loss with respect to params, the arrays of t by name. It is
// the one install/restore protocol of a gradient pass: t.SetParams is called with the
// traced arguments while loss runs and with params afterwards, so t never keeps traced
// arrays. loss must return a scalar. An install error is returned (the loss is then not
// run).
func ValueAndGrad(t Trainable, params Params, loss func() *mx.Array) (*mx.Array, Params, error) {
	names := params.Names()
	if len(names) == 0 {
		return nil, nil, fmt.Errorf("optim: value and grad: no parameters")
	}
	args := make([]*mx.Array, len(names))
	for i, n := range names {
		args[i] = params[n]
	}
	var installErr error
	vals, grads := mx.ValueAndGrad(func(a []*mx.Array) []*mx.Array {
		traced := make(map[string]*mx.Array, len(names))
		for i, n := range names {
			traced[n] = a[i]
		}
		if err := t.SetParams(traced); err != nil {
			installErr = err
			return []*mx.Array{mx.Scalar(a[0].Engine(), 0, mx.Float32)}
		}
		return []*mx.Array{loss()}
	})(args)
	if err := t.SetParams(params); err != nil {
		return nil, nil, err
	}
	if installErr != nil {
		return nil, nil, installErr
	}
	g := make(Params, len(names))
	for i, n := range names {
		g[n] = grads[i]
	}
	return vals[0], g, nil
}
