package optim

import (
	"fmt"

	"github.com/dgtune/dgtune/mx"
)

// ValueAndGrad differentiates loss with respect to a named parameter set. install puts
// arrays into the model (for example lora.Adapter.SetParams); it is called with the
// traced arguments while loss runs and with the original params afterwards, so the model
// never keeps traced arrays. loss must return a scalar.
func ValueAndGrad(params Params, install func(map[string]*mx.Array) error, loss func() *mx.Array) (*mx.Array, Params, error) {
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
		if err := install(traced); err != nil {
			installErr = err
			return []*mx.Array{mx.Scalar(a[0].Engine(), 0, mx.Float32)}
		}
		return []*mx.Array{loss()}
	})(args)
	if err := install(params); err != nil {
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
