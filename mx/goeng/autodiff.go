package goeng

import (
	"fmt"
	"slices"

	"github.com/dgtune/dgtune/mx/internal/topo"

	"github.com/dgtune/dgtune/mx"
)

// node records how a traced tensor was made. A tensor is traced when it descends from
// an argument of an active ValueAndGrad; only traced tensors carry nodes, so ordinary
// inference builds no graph.
type node struct {
	op     string
	inputs []*tensor
	// vjp maps the output cotangent to one cotangent per input (nil entries: none).
	// A nil vjp on a non-leaf means the op has no derivative.
	vjp  func(g *tensor) []*tensor
	leaf bool
	// depth is how many checkpoint recomputations deep the tensor was made (0 for the
	// graph of ValueAndGrad). A recomputation's backward walks only its own depth and
	// deeper, so arrays its function captured from outside stay constants, as on MLX.
	depth int
}

// record attaches a node to out when any input is traced. vjp is only called during
// the backward pass.
func record(out *tensor, op string, inputs []*tensor, vjp func(g *tensor) []*tensor) mx.Handle {
	mark(op, out.shape)
	traced, depth := false, 0
	for _, in := range inputs {
		if in != nil && in.node != nil {
			traced = true
			depth = max(depth, in.node.depth)
		}
	}
	if !traced {
		return untraced(out)
	}
	fresh := out.node == nil
	for _, in := range inputs {
		fresh = fresh && in != out
	}
	if !fresh { // out is an input (or traced already): give it its own identity
		out = out.alias()
	}
	out.node = &node{op: op, inputs: inputs, vjp: vjp, depth: depth}
	return out
}

// untraced returns a view of t that no graph can see.
func untraced(t *tensor) *tensor {
	if t.node == nil {
		return t
	}
	return t.alias()
}

// ValueAndGrad evaluates f on leaves made from args and walks the recorded graph back
// from the first output.
func (e *Engine) ValueAndGrad(f func([]mx.Handle) []mx.Handle, args []mx.Handle, argnums []int) ([]mx.Handle, []mx.Handle) {
	in := make([]mx.Handle, len(args))
	leaves := make([]*tensor, len(argnums))
	for i, a := range args {
		in[i] = untraced(tt(a))
	}
	for j, n := range argnums {
		t := tt(args[n])
		if !t.dt.IsFloat() {
			continue
		}
		leaf := t.alias()
		leaf.node = &node{op: "leaf", leaf: true}
		leaves[j] = leaf
		in[n] = leaf
	}
	outs := f(in)
	y := tt(outs[0])
	grads := backward([]*tensor{y}, []*tensor{fromF32(y.shape, mx.Float32, fill(y.size(), 1))}, leaves, 0)
	values := make([]mx.Handle, len(outs))
	for i, o := range outs {
		values[i] = untraced(tt(o))
	}
	res := make([]mx.Handle, len(leaves))
	for j, l := range leaves {
		if l == nil {
			continue
		}
		g := grads[l]
		if g == nil {
			g = fromF32(l.shape, l.dt, make([]float32, l.size()))
		}
		res[j] = castTensor(untraced(g), l.dt)
	}
	return values, res
}

// backward walks the graph back from the roots ys, seeded with their cotangents
// seeds (nil: none), and returns the cotangent of every traced tensor of depth
// minDepth or more that the roots reach. Several roots are walked as one graph, so a
// tensor shared by two of them is visited once with the sum of its cotangents.
func backward(ys, seeds []*tensor, leaves []*tensor, minDepth int) map[*tensor]*tensor {
	cot := map[*tensor]*tensor{}
	inside := func(t *tensor) bool { return t != nil && t.node != nil && t.node.depth >= minDepth }
	inputsOf := func(t *tensor) []*tensor { return t.node.inputs }
	// Topological order by iterative depth-first search.
	var order []*tensor
	state := map[*tensor]uint8{} // 1 = on stack, 2 = done
	for i, y := range ys {
		if !inside(y) || seeds[i] == nil {
			continue
		}
		if prev := cot[y]; prev != nil {
			cot[y] = binaryKernel(mx.OpAdd, prev, seeds[i])
		} else {
			cot[y] = seeds[i]
		}
		order = topo.PostOrder(y, inputsOf, inside, state, order)
	}
	isLeaf := map[*tensor]bool{}
	for _, l := range leaves {
		if l != nil {
			isLeaf[l] = true
		}
	}
	// owned holds the running sums this walk made itself (kadd's fresh outputs) that no
	// VJP has seen yet: nothing else refers to them, so a further cotangent is added into
	// one in place — the same float32 additions in the same order, without allocating and
	// writing a fresh array for every term of a tensor with many consumers. A VJP may
	// return its own cotangent (or one tensor for two inputs), so a sum stops being owned
	// when it is handed to one.
	owned := map[*tensor]bool{}
	for i := len(order) - 1; i >= 0; i-- {
		t := order[i]
		g := cot[t]
		delete(owned, g)
		if g == nil || t.node.leaf {
			continue
		}
		if !isLeaf[t] {
			delete(cot, t) // free cotangents as soon as they are consumed
		}
		if t.node.vjp == nil {
			panic(fmt.Sprintf("goeng: no vjp for op %s", t.node.op))
		}
		enterVJP()
		gs := t.node.vjp(g)
		leaveVJP(t.node.op, t.shape)
		for k, in := range t.node.inputs {
			if !inside(in) || k >= len(gs) || gs[k] == nil {
				continue
			}
			gk := gs[k]
			if !slices.Equal(gk.shape, in.shape) {
				panic(fmt.Sprintf("goeng: vjp of %s gave cotangent %v for input %v", t.node.op, gk.shape, in.shape))
			}
			if prev := cot[in]; prev != nil {
				if owned[prev] && prev.dt == mx.Float32 && gk.dt == mx.Float32 {
					addInto(prev, gk)
				} else {
					cot[in] = kadd(prev, gk)
					owned[cot[in]] = true
				}
				mark("backward:accumulate", nil)
			} else {
				cot[in] = gk
			}
		}
	}
	return cot
}

// addInto sets sum = sum + g in place; sum is a float32 tensor of its own (a running
// cotangent sum) with g's shape.
func addInto(sum, g *tensor) {
	sv, gv := sum.data.([]float32), g.f32()
	parallelFor(len(sv), 1, func(lo, hi int) { addScaledRow(sv[lo:hi], gv[lo:hi], 1, 1) })
}

func fill(n int, v float32) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = v
	}
	return out
}
