package diffusiongemma

import (
	"fmt"

	"github.com/dgtune/dgtune/mx"
)

// ParamLinear is a linear that owns trainable arrays (a LoRA adapter). A checkpointed
// layer must receive every array it differentiates as an explicit input, so it takes
// them out with Params and runs the layer on copies made by WithParams.
//
// This is not optim.ValueAndGrad's install/restore protocol, on purpose: the layer is
// recomputed during the backward pass, while the outer ValueAndGrad still has its traced
// arrays installed in the shared linears, so the recompute must not install anything
// into them; it works on copies and leaves the model as it found it.
type ParamLinear interface {
	Linear
	// Params returns the trainable arrays, in a fixed order.
	Params() []*mx.Array
	// WithParams returns a linear that computes as this one with ps in place of
	// Params(). Its Forward calls draw the random numbers (dropout) this one's next
	// calls would, whichever copy of one snapshot runs, and advance this one's draws
	// past them, so re-running a checkpointed layer replays the same masks.
	WithParams(ps []*mx.Array) Linear
}

// linearSlots returns the layer's linear fields that hold a linear, in a fixed order.
func (l *Layer) linearSlots() []*Linear {
	var out []*Linear
	for _, s := range []*Linear{&l.Q, &l.K, &l.V, &l.O, &l.Gate, &l.Up, &l.Down, &l.RouterProj} {
		if *s != nil {
			out = append(out, s)
		}
	}
	return out
}

// runLayer returns body(l, inputs), through mx.GradCheckpoint when m.GradCheckpoint is
// set. body must read arrays that vary with the step (the hidden state, cache keys and
// values) only from its inputs; the trainable arrays of l's ParamLinear linears are
// passed after the inputs and installed into a copy of l that body gets.
func (m *Model) runLayer(l *Layer, inputs []*mx.Array, body func(l *Layer, in []*mx.Array) []*mx.Array) []*mx.Array {
	if !m.GradCheckpoint {
		return body(l, inputs)
	}
	type slot struct {
		index int         // position in linearSlots
		snap  ParamLinear // the linear as it is before the layer runs
		n     int         // number of its arrays
	}
	var slots []slot
	args := append([]*mx.Array(nil), inputs...)
	for i, s := range l.linearSlots() {
		p, ok := (*s).(ParamLinear)
		if !ok {
			continue
		}
		ps := p.Params()
		snap, ok := p.WithParams(ps).(ParamLinear)
		if !ok {
			panic(fmt.Sprintf("diffusiongemma: layer %d: %T.WithParams returned a linear without Params", l.Index, p))
		}
		slots = append(slots, slot{index: i, snap: snap, n: len(ps)})
		args = append(args, ps...)
	}
	f := func(a []*mx.Array) []*mx.Array {
		cp := *l
		lin := cp.linearSlots()
		ps := a[len(inputs):]
		for _, s := range slots {
			*lin[s.index] = s.snap.WithParams(ps[:s.n])
			ps = ps[s.n:]
		}
		return body(&cp, a[:len(inputs)])
	}
	return mx.GradCheckpoint(f)(args)
}
