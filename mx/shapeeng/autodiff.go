package shapeeng

import (
	"fmt"
	"slices"

	"github.com/dgtune/dgtune/mx/internal/topo"

	"github.com/dgtune/dgtune/mx"
)

// The tape, as goeng's autodiff.go keeps it: an op whose input descends from a
// ValueAndGrad argument gets a node referring to its inputs and to what its VJP reads; the
// backward walk visits the nodes in the same order as goeng's and runs each op's VJP
// model (ops.go), which makes the cotangents goeng's VJP makes.

// node records how a traced array was made.
type node struct {
	op     string
	inputs []*array
	// vjp makes the inputs' cotangents from the output's (nil entries: none); it runs at
	// the VJP's own time.
	vjp   func(g *array) []*array
	leaf  bool
	depth int
}

// record attaches a node to out when any input is traced (goeng's record); keeps are
// further arrays the VJP reads, which the node then refers to. It returns the array to
// hand out.
func (e *Engine) record(out *array, op string, inputs []*array, vjp func(g *array) []*array, keeps ...*array) *array {
	traced, depth := false, 0
	for _, in := range inputs {
		if in != nil && in.node != nil {
			traced = true
			depth = max(depth, in.node.depth)
		}
	}
	if !traced {
		return e.untraced(out)
	}
	fresh := out.node == nil
	for _, in := range inputs {
		fresh = fresh && in != out
	}
	if !fresh {
		out = e.alias(out)
	}
	out.node = &node{op: op, inputs: inputs, vjp: vjp, depth: depth}
	if e.retention == RetainGraph {
		for _, in := range inputs {
			e.hold(out, in)
		}
		for _, k := range keeps {
			e.hold(out, k)
		}
	}
	return out
}

// untraced is a view of t that no graph sees.
func (e *Engine) untraced(t *array) *array {
	if t.node == nil {
		return t
	}
	return e.alias(t)
}

// StopGradient implements mx.Engine.
func (e *Engine) StopGradient(x mx.Handle) mx.Handle {
	e.tick()
	return e.untraced(h(x))
}

// ValueAndGrad implements mx.Engine as goeng does: f runs on leaves made from the float
// arguments at argnums, then the backward pass walks back from the first output.
func (e *Engine) ValueAndGrad(f func([]mx.Handle) []mx.Handle, args []mx.Handle, argnums []int) ([]mx.Handle, []mx.Handle) {
	e.tick()
	in := make([]mx.Handle, len(args))
	leaves := make([]*array, len(argnums))
	for i, a := range args {
		in[i] = e.untraced(h(a))
	}
	for j, n := range argnums {
		t := h(args[n])
		if !t.dt.IsFloat() {
			continue
		}
		leaf := e.alias(t)
		leaf.node = &node{op: "leaf", leaf: true}
		leaves[j] = leaf
		in[n] = leaf
	}
	outs := f(in)
	y := h(outs[0])
	e.tick()
	seed := e.fresh(y.shape, mx.Float32, "backward")
	grads := e.backward([]*array{y}, []*array{seed}, leaves, 0)
	e.tick()
	values := make([]mx.Handle, len(outs))
	for i, o := range outs {
		values[i] = e.untraced(h(o))
	}
	res := make([]mx.Handle, len(leaves))
	for j, l := range leaves {
		if l == nil {
			continue
		}
		g := grads[l]
		if g == nil {
			g = e.fresh(l.shape, l.dt, "backward")
		}
		g = e.untraced(g)
		if g.dt != l.dt {
			e.read(g)
			g = e.fresh(l.shape, l.dt, "backward")
		}
		res[j] = g
	}
	return values, res
}

// backward walks the graph back from the roots ys seeded with seeds, visiting nodes in
// goeng's order, and returns the cotangent of every traced array of depth minDepth or
// more that the roots reach. A cotangent lives until its array's VJP has run; under
// RetainGraph every visited array lives until the walk ends.
func (e *Engine) backward(ys, seeds, leaves []*array, minDepth int) map[*array]*array {
	cot := map[*array]*array{}
	inside := func(t *array) bool { return t != nil && t.node != nil && t.node.depth >= minDepth }
	inputsOf := func(t *array) []*array { return t.node.inputs }
	var order []*array
	state := map[*array]uint8{}
	for i, y := range ys {
		if !inside(y) || seeds[i] == nil {
			continue
		}
		if prev := cot[y]; prev != nil {
			cot[y] = e.add(prev, seeds[i])
		} else {
			cot[y] = seeds[i]
		}
		order = topo.PostOrder(y, inputsOf, inside, state, order)
	}
	isLeaf := map[*array]bool{}
	for _, l := range leaves {
		if l != nil {
			isLeaf[l] = true
		}
	}
	// owned: running sums this walk made, which a further cotangent is added into in
	// place (goeng's addInto) until a VJP is handed one.
	owned := map[*array]bool{}
	for i := len(order) - 1; i >= 0; i-- {
		t := order[i]
		g := cot[t]
		delete(owned, g)
		if g == nil || t.node.leaf {
			continue
		}
		if !isLeaf[t] {
			delete(cot, t)
		}
		if t.node.vjp == nil {
			panic(fmt.Sprintf("shapeeng: no vjp for op %s", t.node.op))
		}
		e.tick()
		e.use(g)
		gs := t.node.vjp(g)
		for k, in := range t.node.inputs {
			if !inside(in) || k >= len(gs) || gs[k] == nil {
				continue
			}
			gk := gs[k]
			if !slices.Equal(gk.shape, in.shape) {
				panic(fmt.Sprintf("shapeeng: vjp of %s gave cotangent %v for input %v", t.node.op, gk.shape, in.shape))
			}
			prev := cot[in]
			switch {
			case prev == nil:
				cot[in] = gk
			case owned[prev] && prev.dt == mx.Float32 && gk.dt == mx.Float32:
				e.read(prev, gk)
			default:
				cot[in] = e.add(prev, gk)
				owned[cot[in]] = true
			}
		}
	}
	e.tick()
	if e.retention == RetainGraph {
		// The walk's order and state refer to every array it visited until it returns.
		e.use(order...)
	}
	return cot
}

// add is goeng's kadd of two cotangents: a fresh sum.
func (e *Engine) add(a, b *array) *array {
	e.read(a, b)
	out, err := mx.BroadcastShapes(a.shape, b.shape)
	if err != nil {
		panic(fmt.Sprintf("shapeeng: add: %v", err))
	}
	return e.fresh(out, mx.PromoteTypes(a.dt, b.dt), "backward")
}

// GradCheckpoint implements mx.Engine as goeng does: f runs on untraced views of args, so
// nothing it makes is kept; with a traced argument, the outputs feed a hub whose VJP runs
// f again on fresh leaves and walks its graph back.
func (e *Engine) GradCheckpoint(f func([]mx.Handle) []mx.Handle, args []mx.Handle) []mx.Handle {
	e.tick()
	in := make([]*array, len(args))
	plain := make([]mx.Handle, len(args))
	traced, depth := false, 0
	for i, a := range args {
		in[i] = h(a)
		plain[i] = e.untraced(in[i])
		if n := in[i].node; n != nil {
			traced = true
			depth = max(depth, n.depth)
		}
	}
	raw := f(plain)
	e.tick()
	outs := make([]*array, len(raw))
	for i, r := range raw {
		outs[i] = e.untraced(h(r))
	}
	res := make([]mx.Handle, len(outs))
	if !traced {
		for i, o := range outs {
			res[i] = o
		}
		return res
	}
	shapes := make([][]int, len(outs))
	dts := make([]mx.DType, len(outs))
	offsets := make([]int, len(outs)+1)
	for i, o := range outs {
		shapes[i], dts[i] = o.shape, o.dt
		offsets[i+1] = offsets[i] + o.size()
	}
	total := offsets[len(outs)]
	hub := e.newArray([]int{total}, mx.Float32, nil) // no elements: a join in the graph
	hub.node = &node{op: "checkpoint", inputs: in, depth: depth, vjp: func(g *array) []*array {
		return e.recompute(f, in, depth+1, g, shapes, dts, offsets)
	}}
	if e.retention == RetainGraph {
		for _, a := range in {
			e.hold(hub, a)
		}
	}
	for i, o := range outs {
		if !o.dt.IsFloat() {
			res[i] = o
			continue
		}
		out := e.alias(o)
		out.node = &node{op: "checkpoint_output", inputs: []*array{hub}, depth: depth, vjp: func(g *array) []*array {
			e.read(g)
			return []*array{e.fresh([]int{total}, mx.Float32, "backward")}
		}}
		if e.retention == RetainGraph {
			e.hold(out, hub)
		}
		res[i] = out
	}
	return res
}

// recompute re-runs f on leaves made from the traced arguments and returns their
// cotangents given the outputs' flattened cotangents g (goeng's recompute).
func (e *Engine) recompute(f func([]mx.Handle) []mx.Handle, args []*array, depth int, g *array, shapes [][]int, dts []mx.DType, offsets []int) []*array {
	e.read(g)
	in := make([]mx.Handle, len(args))
	leaves := make([]*array, len(args))
	for i, a := range args {
		if a.node == nil {
			in[i] = a
			continue
		}
		leaves[i] = e.alias(a)
		leaves[i].node = &node{op: "leaf", leaf: true, depth: depth}
		in[i] = leaves[i]
	}
	raw := f(in)
	e.tick()
	if len(raw) != len(shapes) {
		panic(fmt.Sprintf("shapeeng: checkpoint: function gave %d outputs on recomputation, %d before", len(raw), len(shapes)))
	}
	ys := make([]*array, len(raw))
	seeds := make([]*array, len(raw))
	for i, r := range raw {
		ys[i] = h(r)
		if !slices.Equal(ys[i].shape, shapes[i]) || ys[i].dt != dts[i] {
			panic(fmt.Sprintf("shapeeng: checkpoint: output %d is %v %s on recomputation, %v %s before", i, ys[i].shape, ys[i].dt, shapes[i], dts[i]))
		}
		if dts[i].IsFloat() {
			seeds[i] = e.newArray(shapes[i], mx.Float32, e.data(g)) // a slice of g's elements
		}
	}
	cot := e.backward(ys, seeds, leaves, depth)
	res := make([]*array, len(args))
	for i, l := range leaves {
		if l != nil {
			res[i] = cot[l]
		}
	}
	return res
}
