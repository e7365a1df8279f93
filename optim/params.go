package optim

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/dgtune/dgtune/mx"
)

// Params is a named set of arrays: trainable parameters, their gradients, or anything
// else keyed by parameter name.
type Params map[string]*mx.Array

// Names returns the names in sorted order, the order every deterministic walk uses.
func (p Params) Names() []string {
	return slices.Sorted(maps.Keys(p))
}

// Arrays returns the arrays in Names' order (to evaluate or keep them all at once).
func (p Params) Arrays() []*mx.Array {
	out := make([]*mx.Array, 0, len(p))
	for _, n := range p.Names() {
		out = append(out, p[n])
	}
	return out
}

// Sentinel errors, wrapped with the details (errors.Is finds them).
var (
	// ErrStateMismatch: a state map given to LoadState does not fit the optimizer
	// (missing, unexpected or misshapen entries).
	ErrStateMismatch = errors.New("optimizer state does not match the parameters")
	// ErrGradMismatch: gradients given to Accumulator.Add differ in names, shapes or
	// dtypes from the ones already accumulated.
	ErrGradMismatch = errors.New("gradients do not match the accumulator")
	// ErrAccumulatorEmpty: Accumulator.Average before any Add.
	ErrAccumulatorEmpty = errors.New("optim: no gradients accumulated")
)

// slot describes one parameter the optimizer was built for.
type slot struct {
	shape []int
	dtype mx.DType
}

// describeParams checks the parameters an optimizer is built for and records their
// shapes and dtypes, so later grads and loaded state can be validated against them.
func describeParams(params Params) (mx.Engine, map[string]slot, error) {
	if len(params) == 0 {
		return nil, nil, errors.New("no parameters to optimize")
	}
	var e mx.Engine
	slots := make(map[string]slot, len(params))
	for _, n := range params.Names() {
		a := params[n]
		if a == nil {
			return nil, nil, fmt.Errorf("parameter %q is nil", n)
		}
		if !a.DType().IsFloat() {
			return nil, nil, fmt.Errorf("parameter %q has dtype %s, want a float type", n, a.DType())
		}
		if e == nil {
			e = a.Engine()
		} else if a.Engine() != e {
			return nil, nil, fmt.Errorf("parameter %q is on engine %s, others on %s", n, a.Engine().Name(), e.Name())
		}
		slots[n] = slot{shape: a.Shape(), dtype: a.DType()}
	}
	return e, slots, nil
}

// problems collects every mismatch so one error lists them all, as a user fixing a
// checkpoint wants to see the whole picture at once.
type problems []string

func (p *problems) addf(format string, args ...any) { *p = append(*p, fmt.Sprintf(format, args...)) }

func (p problems) err(context string, sentinel error) error {
	if len(p) == 0 {
		return nil
	}
	return fmt.Errorf("%s: %w: %s", context, sentinel, strings.Join(p, "; "))
}
