// Package topo is the order in which a backward pass visits a recorded graph. The go
// engine runs its VJPs in this order and the shape-only engine replays it to record the
// same lifetimes, so the order is written once, here.
package topo

// PostOrder appends to order every node reachable from root through inputs (only those
// inside accepts, and only those state has not seen), each after all of its inputs, by
// an iterative depth-first search in input order. state marks nodes 1 while on the stack
// and 2 when done; callers keep it across several roots so that a shared node is visited
// once.
func PostOrder[T comparable](root T, inputs func(T) []T, inside func(T) bool, state map[T]uint8, order []T) []T {
	if state[root] != 0 {
		return order
	}
	type frame struct {
		t    T
		next int
	}
	stack := []frame{{t: root}}
	state[root] = 1
	for len(stack) > 0 {
		top := &stack[len(stack)-1]
		if ins := inputs(top.t); top.next < len(ins) {
			in := ins[top.next]
			top.next++
			if inside(in) && state[in] == 0 {
				state[in] = 1
				stack = append(stack, frame{t: in})
			}
			continue
		}
		state[top.t] = 2
		order = append(order, top.t)
		stack = stack[:len(stack)-1]
	}
	return order
}
