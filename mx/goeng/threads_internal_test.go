package goeng

import (
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"

	"github.com/dgtune/dgtune/mx/internal/dims"

	"github.com/dgtune/dgtune/mx"
)

func randF32(rng *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	return v
}

// sameBits reports the first element whose bits differ (-1: none).
func sameBits(a, b []float32) int {
	if len(a) != len(b) {
		return 0
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}

// TestKernelsIndependentOfThreads runs the kernels that split their work by the
// number of goroutines (or by sizes that depend on it) at GOMAXPROCS 1, 2 and 16 and
// wants the same bits from each: rms_norm's VJP (dx by rows, dw by blocks of rows and
// column ranges), take's VJP with repeated indices (destination rows summed in order),
// slice's VJP, rope, the cotangent sum and a product a single panel wide (cut by rows).
func TestKernelsIndependentOfThreads(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 9))
	const rows, d = 300, 520 // neither a multiple of the row blocks nor of the column chunks
	x := newTensor([]int{rows, d}, mx.Float32, randF32(rng, rows*d))
	g := newTensor([]int{rows, d}, mx.Float32, randF32(rng, rows*d))
	w := newTensor([]int{d}, mx.Float32, randF32(rng, d))
	ids := make([]int32, 700)
	for i := range ids {
		ids[i] = int32(rng.IntN(rows / 3)) // many repeats, a third of the rows unused
	}
	idx := newTensor([]int{len(ids)}, mx.Int32, ids)
	gTake := newTensor([]int{len(ids), d}, mx.Float32, randF32(rng, len(ids)*d))
	q := newTensor([]int{2, 4, 96, 64}, mx.Float32, randF32(rng, 2*4*96*64))
	a := newTensor([]int{200, 512}, mx.Float32, randF32(rng, 200*512))
	b := newTensor([]int{512, 8}, mx.Float32, randF32(rng, 512*8))
	// The VJP computes only the cotangents of traced inputs: trace both.
	xTraced, wTraced := x.alias(), w.alias()
	xTraced.node, wTraced.node = &node{op: "leaf", leaf: true}, &node{op: "leaf", leaf: true}
	_, inv := rmsNormKernel(x, w, 1e-6)
	kernels := map[string]func() []*tensor{
		"rms_norm vjp": func() []*tensor { return rmsNormVJP(xTraced, wTraced, inv)(g) },
		"rms_norm": func() []*tensor {
			y, _ := rmsNormKernel(x, w, 1e-6)
			return []*tensor{y}
		},
		"take vjp": func() []*tensor { return takeVJP(x, idx, 0)(gTake)[:1] },
		"slice vjp": func() []*tensor {
			return sliceVJP(x, []int{3, 10}, []int{rows - 5, d - 7}, []int{2, 3})(sliceKernel(g, []int{3, 10}, []int{rows - 5, d - 7}, []int{2, 3}))
		},
		"rope": func() []*tensor {
			return []*tensor{ropeKernel(nil, q, mx.RoPEParams{Dims: 48, Base: 10000, Scale: 1, Offset: 5}, nil, 1)}
		},
		"cotangent sum":    func() []*tensor { return []*tensor{kadd(x, g)} },
		"x·A, rank 8 wide": func() []*tensor { return []*tensor{matmulKernel(a, b)} },
		"aᵀ·g, rank 8 wide": func() []*tensor {
			return []*tensor{matmulOp(a, newTensor([]int{200, 8}, mx.Float32, randF32(rand.New(rand.NewPCG(1, 1)), 1600)), true, false)}
		},
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for name, k := range kernels {
		runtime.GOMAXPROCS(1)
		want := k()
		if !slices.ContainsFunc(want, func(t *tensor) bool { return t != nil }) {
			t.Fatalf("%s: no output to compare", name)
		}
		for _, p := range []int{2, 16} {
			runtime.GOMAXPROCS(p)
			got := k()
			for i := range want {
				if want[i] == nil {
					continue
				}
				if !slices.Equal(got[i].shape, want[i].shape) {
					t.Fatalf("%s: shape %v at GOMAXPROCS %d, %v at 1", name, got[i].shape, p, want[i].shape)
				}
				if at := sameBits(got[i].f32(), want[i].f32()); at >= 0 {
					t.Errorf("%s, output %d: element %d differs at GOMAXPROCS %d (%v) from 1 (%v)", name, i, at, p, got[i].f32()[at], want[i].f32()[at])
				}
			}
		}
	}
}

// TestTakeVJPSumsRepeats checks take's VJP against the plain scatter-add: rows that
// repeat an index are summed in order, unused rows stay zero.
func TestTakeVJPSumsRepeats(t *testing.T) {
	x := newTensor([]int{4, 3}, mx.Float32, make([]float32, 12))
	idx := newTensor([]int{5}, mx.Int32, []int32{2, 0, 2, -1, 2})
	// Row 2 receives rows 0, 2 and 4 in that order: (1e8 + 1) − 1e8 is 0 in float32,
	// where another order would give 1.
	g := newTensor([]int{5, 3}, mx.Float32, []float32{1e8, 2, 3, 10, 20, 30, 1, 200, 300, 1e-8, 2e-8, 3e-8, -1e8, 2000, 3000})
	got := takeVJP(x, idx, 0)(g)[0].f32()
	want := []float32{10, 20, 30, 0, 0, 0, 0, (2 + 200) + 2000, (3 + 300) + 3000, 1e-8, 2e-8, 3e-8}
	if at := sameBits(got, want); at >= 0 {
		t.Errorf("take vjp %v, want %v", got, want)
	}
}

// TestLogSumExpRowGradMatchesComposition wants the fused logsumexp VJP over the last
// axis to agree with the composition exp(x − out)·g it replaces.
func TestLogSumExpRowGradMatchesComposition(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	x := newTensor([]int{3, 5, 700}, mx.Float32, randF32(rng, 3*5*700))
	x.f32()[17] = float32(math.Inf(-1))
	out := reduceKernel(mx.ReduceLogSumExp, x, []int{2}, false)
	g := newTensor([]int{3, 5}, mx.Float32, randF32(rng, 15))
	got := lseRowGrad(x, out, g, []int{2})
	if got == nil {
		t.Fatal("fused path not taken")
	}
	kept := dims.Reduced(x.shape, []int{2}, true)
	want := kmul(unaryKernel(mx.OpExp, ksub(x, reshapeKernel(out, kept))), reshapeKernel(g, kept))
	// The fused VJP takes its exponentials as the forward does (expInto, within about
	// an ulp of math.Exp): the two agree to float32 rounding, not bitwise.
	for i, w := range want.f32() {
		if d := math.Abs(float64(got.f32()[i] - w)); d > 4e-7*math.Abs(float64(w))+1e-30 {
			t.Fatalf("element %d: fused %v, composition %v (|Δ| %.3g)", i, got.f32()[i], w, d)
		}
	}
	if lseRowGrad(x, out, g, []int{1}) != nil {
		t.Error("fused path taken for a middle axis")
	}
}

// TestCountingArgsortIsStable wants the counting argsort of integer rows to give what
// the stable comparison sort gives, ties in order of position, and to decline a range
// too wide for counting.
func TestCountingArgsortIsStable(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, c := range []struct{ n, span, offset int }{{1, 1, 0}, {37, 4, -2}, {1024, 32, 0}, {2048, 128, 1000}, {300, 1200, -50}} {
		row := make([]int64, c.n)
		for i := range row {
			row[i] = int64(rng.IntN(c.span) + c.offset)
		}
		want := make([]int32, c.n)
		for i := range want {
			want[i] = int32(i)
		}
		slices.SortStableFunc(want, func(a, b int32) int { return int(row[a] - row[b]) })
		got := make([]int32, c.n)
		if !countingArgsort(row, got) {
			t.Fatalf("n %d span %d: declined", c.n, c.span)
		}
		if !slices.Equal(got, want) {
			t.Errorf("n %d span %d: %v, want %v", c.n, c.span, got[:min(c.n, 12)], want[:min(c.n, 12)])
		}
	}
	if countingArgsort([]int64{0, 1 << 40}, make([]int32, 2)) {
		t.Error("a range of 2^40 counted")
	}
}

// TestRoPETablesCached: RoPE with the engine's table cache gives the bits of freshly made
// tables, for more distinct tables than the cache holds (evicted ones are made again), both
// signs, and a second round that finds the recent ones.
func TestRoPETablesCached(t *testing.T) {
	e := New()
	rng := rand.New(rand.NewPCG(3, 4))
	x := fromF32([]int{2, 3, 7, 16}, mx.Float32, randF32(rng, 2*3*7*16))
	for round := range 2 {
		for off := range ropeCacheSize + 4 {
			for _, sign := range []float64{1, -1} {
				p := mx.RoPEParams{Dims: 12, Base: 10000, Scale: 1, Offset: off}
				got, want := ropeKernel(e, x, p, nil, sign).f32(), ropeKernel(nil, x, p, nil, sign).f32()
				if !slices.Equal(got, want) {
					t.Fatalf("round %d, offset %d, sign %v: cached tables differ", round, off, sign)
				}
			}
		}
	}
	if n := len(e.rope.entries); n != ropeCacheSize {
		t.Errorf("cache holds %d tables, want %d", n, ropeCacheSize)
	}
}
