package lora

import (
	"strings"
	"testing"

	"github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
)

func TestWithParams(t *testing.T) {
	e := mxtest.Go(t)
	f := func(v []float32, shape ...int) *mx.Array { return mx.FromFloat32(e, v, shape...) }
	base := &diffusiongemma.Dense{W: f([]float32{1, 0, 0, 1}, 2, 2)} // identity
	inner := &Linear{Base: base, A: f([]float32{1, 0}, 2, 1), B: f([]float32{0, 1}, 1, 2), Scale: 1}
	outer := &Linear{Base: inner, A: f([]float32{0, 1}, 2, 1), B: f([]float32{1, 0}, 1, 2), Scale: 2}
	ps := outer.Params()
	if len(ps) != 4 || ps[0] != outer.A || ps[1] != outer.B || ps[2] != inner.A || ps[3] != inner.B {
		t.Fatalf("Params = %v, want outer A, B then inner A, B", ps)
	}
	// x = [3, 5]. With A = [[1], [1]] and B = [[1, 1]] at both levels:
	// inner: x + 1·(x·A)·B = [3, 5] + 8·[1, 1] = [11, 13];
	// outer: inner + 2·(x·A)·B = [11, 13] + 16·[1, 1] = [27, 29].
	ones21, ones12 := f([]float32{1, 1}, 2, 1), f([]float32{1, 1}, 1, 2)
	c := outer.WithParams([]*mx.Array{ones21, ones12, ones21, ones12})
	got := c.Forward(f([]float32{3, 5}, 1, 2)).Float32s()
	if ok, _ := mxtest.Close(got, []float32{27, 29}, 0, 0); !ok {
		t.Errorf("copy computes %v, want [27 29]", got)
	}
	if outer.A != ps[0] || inner.A != ps[2] {
		t.Error("WithParams changed the original")
	}

	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "3 arrays for 4 parameters") {
			t.Errorf("panic %v, want one about 3 arrays for 4 parameters", r)
		}
	}()
	outer.WithParams(ps[:3])
}

// TestWithParamsDropoutReplay: copies of one snapshot draw the mask the original would
// draw next, however often they run, and move the original past it.
func TestWithParamsDropoutReplay(t *testing.T) {
	e := mxtest.Go(t)
	x := mx.Ones(e, []int{1, 64}, mx.Float32)
	mk := func() *Linear {
		l := &Linear{Base: &diffusiongemma.Dense{W: mx.Zeros(e, []int{1, 64}, mx.Float32)},
			A: mx.Ones(e, []int{64, 1}, mx.Float32), B: mx.Ones(e, []int{1, 1}, mx.Float32), Scale: 1, Dropout: 0.5}
		l.SetTraining(mx.Key(e, 4))
		return l
	}
	ref := mk()
	first, second := ref.Forward(x).Item(), ref.Forward(x).Item() // masks 0 and 1
	if first == second {
		t.Fatalf("masks 0 and 1 give the same output %v: the test cannot tell them apart", first)
	}
	l := mk()
	snap := l.WithParams(l.Params()).(*Linear)
	for run := range 2 {
		if got := snap.WithParams(l.Params()).Forward(x).Item(); got != first {
			t.Errorf("run %d of the snapshot gives %v, want mask 0's %v", run, got, first)
		}
	}
	if got := l.Forward(x).Item(); got != second {
		t.Errorf("the original then gives %v, want mask 1's %v", got, second)
	}
}
