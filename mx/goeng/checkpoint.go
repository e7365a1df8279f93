package goeng

import (
	"fmt"
	"slices"

	"github.com/dgtune/dgtune/mx"
)

// GradCheckpoint implements mx.Engine. f first runs on untraced views of args, so none of
// its intermediate tensors are kept. When an argument is traced, each output gets a
// node that feeds one hidden "hub" tensor whose inputs are the arguments: the hub's
// cotangent is every output's cotangent flattened side by side in float32 (outputs the
// loss never reaches leave zeros). The backward walk reaches the hub only after all
// outputs, so its VJP re-runs f once on fresh leaves and backpropagates all outputs'
// cotangents together.
func (e *Engine) GradCheckpoint(f func([]mx.Handle) []mx.Handle, args []mx.Handle) []mx.Handle {
	in := make([]*tensor, len(args))
	plain := make([]mx.Handle, len(args))
	traced, depth := false, 0
	for i, a := range args {
		in[i] = tt(a)
		plain[i] = untraced(in[i])
		if n := in[i].node; n != nil {
			traced = true
			depth = max(depth, n.depth)
		}
	}
	raw := f(plain)
	outs := make([]*tensor, len(raw))
	for i, h := range raw {
		outs[i] = untraced(tt(h))
	}
	res := make([]mx.Handle, len(outs))
	if !traced {
		for i, o := range outs {
			res[i] = o
		}
		return res
	}
	// Only shapes and dtypes of the outputs are kept for the backward.
	shapes := make([][]int, len(outs))
	dts := make([]mx.DType, len(outs))
	offsets := make([]int, len(outs)+1)
	for i, o := range outs {
		shapes[i], dts[i] = o.shape, o.dt
		offsets[i+1] = offsets[i] + o.size()
	}
	total := offsets[len(outs)]
	hub := &tensor{shape: []int{total}, dt: mx.Float32}
	hub.node = &node{op: "checkpoint", inputs: in, depth: depth,
		vjp: func(g *tensor) []*tensor { return recompute(f, in, depth+1, g.f32(), shapes, dts, offsets) }}
	for i, o := range outs {
		if !o.dt.IsFloat() {
			res[i] = o // integer outputs carry no gradient
			continue
		}
		lo, n := offsets[i], o.size()
		out := o.alias()
		out.node = &node{op: "checkpoint_output", inputs: []*tensor{hub}, depth: depth,
			vjp: func(g *tensor) []*tensor {
				buf := make([]float32, total)
				copy(buf[lo:lo+n], g.f32())
				return []*tensor{newTensor([]int{total}, mx.Float32, buf)}
			}}
		res[i] = out
	}
	return res
}

// recompute re-runs f on leaves made from the traced arguments (at depth, deeper than
// the graph that holds the checkpoint) and returns each argument's cotangent given the
// outputs' flattened cotangents g.
func recompute(f func([]mx.Handle) []mx.Handle, args []*tensor, depth int, g []float32, shapes [][]int, dts []mx.DType, offsets []int) []*tensor {
	in := make([]mx.Handle, len(args))
	leaves := make([]*tensor, len(args))
	for i, a := range args {
		if a.node == nil {
			in[i] = a
			continue
		}
		leaves[i] = a.alias()
		leaves[i].node = &node{op: "leaf", leaf: true, depth: depth}
		in[i] = leaves[i]
	}
	raw := f(in)
	if len(raw) != len(shapes) {
		panic(fmt.Sprintf("goeng: checkpoint: function gave %d outputs on recomputation, %d before", len(raw), len(shapes)))
	}
	ys := make([]*tensor, len(raw))
	seeds := make([]*tensor, len(raw))
	for i, h := range raw {
		ys[i] = tt(h)
		if !slices.Equal(ys[i].shape, shapes[i]) || ys[i].dt != dts[i] {
			panic(fmt.Sprintf("goeng: checkpoint: output %d is %v %s on recomputation, %v %s before", i, ys[i].shape, ys[i].dt, shapes[i], dts[i]))
		}
		if dts[i].IsFloat() {
			seeds[i] = newTensor(shapes[i], mx.Float32, g[offsets[i]:offsets[i+1]])
		}
	}
	cot := backward(ys, seeds, leaves, depth)
	res := make([]*tensor, len(args))
	for i, l := range leaves {
		if l != nil {
			res[i] = cot[l]
		}
	}
	return res
}
