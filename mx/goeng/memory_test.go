package goeng_test

import (
	"runtime"
	"testing"

	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
)

// mlpLoss is mean((tanh(x·W1 + b1)·W2 + b2 − y)²) over params [W1, b1, W2, b2] with the
// data x, y appended as the last two arguments.
func mlpLoss(a []*mx.Array) []*mx.Array {
	w1, b1, w2, b2, x, y := a[0], a[1], a[2], a[3], a[4], a[5]
	h := mx.Tanh(mx.Add(mx.Matmul(x, w1), b1))
	out := mx.Add(mx.Matmul(h, w2), b2)
	return []*mx.Array{mx.Mean(mx.Square(mx.Subtract(out, y)), false)}
}

// heapInuse is the heap in use once everything unreachable has been collected.
func heapInuse() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC() // a second cycle also frees what the first one's finalizers released
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// TestTrainingMemoryIsFlat runs 1,000 SGD steps of a small MLP, keeping only the latest
// parameters, and checks that the heap does not grow between step 100 and step 1,000:
// every step's activations, tape and gradients must become unreachable once the step
// returns. One step's parameters are about 10 KiB, so a leak of even one parameter set
// per step (≈ 9 MiB over 900 steps) fails the 2 MiB slack by far.
func TestTrainingMemoryIsFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("1,000 training steps")
	}
	e := mxtest.Go(t)
	rng := newRand(11)
	x := mxtest.RandN(e, rng, 32, 16)
	y := mxtest.RandN(e, rng, 32, 4)
	params := []*mx.Array{
		mx.MulScalar(mxtest.RandN(e, rng, 16, 128), 0.25), mx.Zeros(e, []int{128}, mx.Float32),
		mx.MulScalar(mxtest.RandN(e, rng, 128, 4), 0.1), mx.Zeros(e, []int{4}, mx.Float32),
	}
	step := mx.ValueAndGrad(mlpLoss, 0, 1, 2, 3)
	const slack = 2 << 20
	var at100 uint64
	var first, last float64
	for it := 1; it <= 1000; it++ {
		vals, grads := step(append(append([]*mx.Array(nil), params...), x, y))
		loss := vals[0].Item()
		if it == 1 {
			first = loss
		}
		last = loss
		for i, g := range grads {
			params[i] = mx.Subtract(params[i], mx.MulScalar(g, 0.05))
		}
		switch it {
		case 100:
			at100 = heapInuse()
		case 1000:
			at1000 := heapInuse()
			t.Logf("HeapInuse after GC: step 100 %d B, step 1000 %d B (%+d B)", at100, at1000, int64(at1000)-int64(at100))
			if at1000 > at100+slack {
				t.Errorf("heap grew from %d to %d bytes between steps 100 and 1000 (slack %d)", at100, at1000, slack)
			}
		}
	}
	// The loop must really be training, or the test would measure nothing.
	if !(last < 0.5*first) {
		t.Errorf("loss went from %v to %v; expected the MLP to fit", first, last)
	}
}

// TestNoAllocatorCounters: the go engine allocates on Go's heap and keeps no counters of
// its own, so mx.Memory reports none (callers fall back to the process's peak RSS).
func TestNoAllocatorCounters(t *testing.T) {
	if s, ok := mx.Memory(mxtest.Go(t)); ok {
		t.Errorf("mx.Memory(go engine) = %+v, true; want false", s)
	}
}
