package topo

import (
	"slices"
	"testing"
)

// TestPostOrder: on the graph d ← b ← a, d ← c ← a (a is the leaf every path reaches) plus
// an outside node x under c, each node comes after its inputs, a shared node once, the
// outside node never, and a second root already seen adds nothing.
func TestPostOrder(t *testing.T) {
	inputs := map[string][]string{"d": {"b", "c"}, "b": {"a"}, "c": {"a", "x"}}
	in := func(n string) []string { return inputs[n] }
	inside := func(n string) bool { return n != "x" }
	state := map[string]uint8{}
	order := PostOrder("d", in, inside, state, nil)
	if want := []string{"a", "b", "c", "d"}; !slices.Equal(order, want) {
		t.Errorf("PostOrder(d) = %v, want %v", order, want)
	}
	if again := PostOrder("b", in, inside, state, order); !slices.Equal(again, order) {
		t.Errorf("a second root already visited changed the order: %v", again)
	}
}
