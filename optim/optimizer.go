package optim

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/dgtune/dgtune/mx"
)

// Optimizer updates a named parameter set from its gradients, one step per Update.
type Optimizer interface {
	// Update applies one step and returns the new parameters: every entry of params,
	// replaced by its updated value where grads has a non-nil gradient for it. Neither
	// params nor grads is modified or freed. A gradient for a parameter the optimizer was
	// not built for, or one whose shape or dtype differs, is a programmer error and
	// panics naming the parameter.
	Update(params, grads Params) Params
	// Step is the number of updates applied so far (MLX's optimizer.step).
	Step() int
	// LearningRate is the rate the next Update uses.
	LearningRate() float64
	// SetLearningRate sets the rate for the following updates; the value is rounded to
	// float32 when applied, as MLX stores it in a float32 array.
	SetLearningRate(lr float64)
	// State returns the optimizer's state arrays keyed "<kind>.<param>" (for example
	// "m.<param>" and "v.<param>"). The map is a fresh copy; the arrays are valid until
	// the next Update or LoadState.
	State() map[string]*mx.Array
	// LoadState replaces the state and the step with ones saved from State and Step. It
	// checks every name, shape, dtype and engine first and changes nothing on error; on
	// success it takes ownership of the arrays.
	LoadState(state map[string]*mx.Array, step int) error
}

var (
	_ Optimizer = (*Adam)(nil)
	_ Optimizer = (*SGD)(nil)
)

// core is the bookkeeping every optimizer shares: which parameters it was built for,
// the state arrays per parameter, the step and the learning rate.
type core struct {
	e     mx.Engine
	slots map[string]slot
	kinds []string // state arrays per parameter, e.g. "m", "v"
	state map[string]*mx.Array
	step  int
	lr    float64
}

func newCore(params Params, lr float64, kinds ...string) (core, error) {
	e, slots, err := describeParams(params)
	if err != nil {
		return core{}, err
	}
	c := core{e: e, slots: slots, kinds: kinds, state: make(map[string]*mx.Array, len(kinds)*len(slots)), lr: lr}
	for n, s := range slots {
		for _, k := range kinds {
			c.state[stateKey(k, n)] = mx.Zeros(e, s.shape, s.dtype)
		}
	}
	return c, nil
}

func stateKey(kind, param string) string { return kind + "." + param }

// Step is the number of updates applied so far (MLX's optimizer.step).
func (c *core) Step() int { return c.step }

// LearningRate is the rate the next Update uses.
func (c *core) LearningRate() float64 { return c.lr }

// SetLearningRate sets the rate for the following updates (rounded to float32 when
// applied, as MLX stores it).
func (c *core) SetLearningRate(lr float64) { c.lr = lr }

// State returns the state arrays keyed "<kind>.<param>" in a fresh map; the arrays
// stay valid until the next Update or LoadState.
func (c *core) State() map[string]*mx.Array { return maps.Clone(c.state) }

// LoadState replaces the state and the step with saved ones after checking every name,
// shape, dtype and engine; on error (wrapping ErrStateMismatch, listing every problem)
// nothing changes. It takes ownership of the arrays and frees the ones it replaces.
func (c *core) LoadState(state map[string]*mx.Array, step int) error {
	if step < 0 {
		return fmt.Errorf("optim: load state: step %d is negative", step)
	}
	var bad problems
	want := make(map[string]slot, len(c.state))
	for n, s := range c.slots {
		for _, k := range c.kinds {
			want[stateKey(k, n)] = s
		}
	}
	for _, key := range slices.Sorted(maps.Keys(want)) {
		s := want[key]
		a, ok := state[key]
		switch {
		case !ok:
			bad.addf("missing %q", key)
		case a == nil:
			bad.addf("%q is nil", key)
		case a.Engine() != c.e:
			bad.addf("%q is on engine %s, want %s", key, a.Engine().Name(), c.e.Name())
		case !slices.Equal(a.Shape(), s.shape):
			bad.addf("%q has shape %v, want %v", key, a.Shape(), s.shape)
		case a.DType() != s.dtype:
			bad.addf("%q has dtype %s, want %s", key, a.DType(), s.dtype)
		}
	}
	for _, key := range slices.Sorted(maps.Keys(state)) {
		if _, ok := want[key]; !ok {
			bad.addf("unexpected %q", key)
		}
	}
	if err := bad.err("optim: load state", ErrStateMismatch); err != nil {
		return err
	}
	kept := make(map[*mx.Array]bool, len(state))
	for _, a := range state {
		kept[a] = true
	}
	for _, old := range c.state {
		if !kept[old] {
			old.Free()
		}
	}
	c.state = maps.Clone(state)
	c.step = step
	return nil
}

// gradNames validates grads against params and the optimizer's parameters and returns
// the names to update, sorted. Mismatches are programmer errors (the trainer builds
// both maps from the same model), so they panic with every offending name listed.
func (c *core) gradNames(params, grads Params) []string {
	var bad problems
	var names []string
	for _, n := range grads.Names() {
		g := grads[n]
		if g == nil {
			continue
		}
		s, known := c.slots[n]
		p, inParams := params[n]
		switch {
		case !known:
			bad.addf("gradient for %q, a parameter the optimizer was not built for", n)
		case !inParams || p == nil:
			bad.addf("gradient for %q, which is missing from params", n)
		case !slices.Equal(p.Shape(), s.shape) || p.DType() != s.dtype:
			bad.addf("parameter %q is %v %s, the optimizer was built for %v %s", n, p.Shape(), p.DType(), s.shape, s.dtype)
		case !slices.Equal(g.Shape(), s.shape) || g.DType() != s.dtype:
			bad.addf("gradient %q is %v %s, parameter is %v %s", n, g.Shape(), g.DType(), s.shape, s.dtype)
		default:
			names = append(names, n)
		}
	}
	if len(bad) > 0 {
		panic("optim: update: " + strings.Join(bad, "; "))
	}
	return names
}

// singleFunc computes one parameter's update: the new parameter and its new state
// arrays (in the order of core.kinds) from the parameter, gradient and old state.
type singleFunc func(p, g *mx.Array, state []*mx.Array) (*mx.Array, []*mx.Array)

// update advances the step (first, as MLX does, so the update sees the new count) and
// applies single to every parameter with a gradient, freeing the replaced state.
func (c *core) update(params, grads Params, single singleFunc) Params {
	names := c.gradNames(params, grads)
	c.step++
	out := maps.Clone(params)
	for _, n := range names {
		old := make([]*mx.Array, len(c.kinds))
		for i, k := range c.kinds {
			old[i] = c.state[stateKey(k, n)]
		}
		res := mx.Tidy(c.e, func() []*mx.Array {
			p, st := single(params[n], grads[n], old)
			return append([]*mx.Array{p}, st...)
		})
		out[n] = res[0]
		for i, k := range c.kinds {
			c.state[stateKey(k, n)] = res[1+i]
			if old[i] != res[1+i] {
				old[i].Free()
			}
		}
	}
	return out
}

// learningRate is MLX's `self.learning_rate.astype(dtype)`: the rate is stored as a
// float32 array and cast to the gradient's dtype.
func learningRate(e mx.Engine, lr float64, dt mx.DType) *mx.Array {
	return mx.AsType(mx.Scalar(e, lr, mx.Float32), dt)
}
