//go:build mlx

package mlxeng

import (
	"math"
	"testing"

	"github.com/dgtune/dgtune/mx"
)

// fusedExpertsEngine is the engine on the dequant route with both fused experts kernels
// made, off until a test calls use with a kernel for both directions (expertsOff: the
// dequant route's grouped GEMM), restored when tb ends; it skips where MLX has no GPU.
func fusedExpertsEngine(tb testing.TB) (e *Engine, use func(expertsKind)) {
	e, err := open()
	if err != nil {
		tb.Fatal(err)
	}
	if e.device != "gpu" {
		tb.Skip("custom CUDA kernels run on a GPU only")
	}
	savedRoute, savedExperts, savedKernels := e.quantized, e.experts, e.expertsKernels
	tb.Cleanup(func() { e.quantized, e.experts, e.expertsKernels = savedRoute, savedExperts, savedKernels })
	for _, kind := range []expertsKind{expertsWMMA, expertsMMA} {
		k, ok := newExpertsKernel(kind)
		if !ok {
			tb.Fatalf("could not make the %s", expertsKindNames[kind])
		}
		e.expertsKernels[kind] = k
	}
	e.quantized, e.experts = routeDequant, expertsRoute{}
	return e, func(kind expertsKind) { e.experts = expertsRoute{kind, kind} }
}

// expertsKindNames names the experts' kernels for subtests and messages.
var expertsKindNames = map[expertsKind]string{expertsOff: "dequant route", expertsWMMA: "wmma kernel", expertsMMA: "mma kernel"}

// TestExpertsRouteChoice: no fused experts kernel off CUDA or with
// MLXENG_EXPERTS=dequant; wmma and mma put both directions on that kernel; anything
// else is mma.sync forward and WMMA backward. On a CUDA GPU the engine also makes each
// kernel (making one compiles nothing, but MLX without CUDA refuses it).
func TestExpertsRouteChoice(t *testing.T) {
	for _, c := range []struct {
		env, device string
		want        expertsRoute
	}{
		{"dequant", "gpu", expertsRoute{}},
		{"", "cpu", expertsRoute{}},
		{"wmma", "cpu", expertsRoute{}},
		{"", "gpu", expertsRoute{expertsMMA, expertsWMMA}},
		{"fused", "gpu", expertsRoute{expertsMMA, expertsWMMA}},
		{"wmma", "gpu", expertsRoute{expertsWMMA, expertsWMMA}},
		{"mma", "gpu", expertsRoute{expertsMMA, expertsMMA}},
	} {
		if got := chooseExpertsRoute(c.device, c.env); got != c.want {
			t.Errorf("%s=%q on %s: %+v, want %+v", expertsEnv, c.env, c.device, got, c.want)
		}
	}
	e, err := open()
	if err != nil {
		t.Fatal(err)
	}
	if !isCUDA(e.device) {
		return
	}
	for _, kind := range []expertsKind{expertsWMMA, expertsMMA} {
		if _, ok := newExpertsKernel(kind); !ok {
			t.Errorf("could not make the %s", expertsKindNames[kind])
		}
	}
}

// TestFusedExpertsMatchExact: on a GPU, each fused experts kernel (mma.sync and WMMA, each
// for both directions, then the default route, mma.sync forward and WMMA backward) gives x·W[e]ᵀ and its input gradient g·W[e] for rows sorted by expert — an expert with
// no rows, one with a single row, one spanning two 32-row tiles — within bfloat16's
// rounding of the float64 products of the same bfloat16 inputs and dequantized weights,
// and so does the dequant route it replaces. MLX's CPU backend has no custom kernels.
func TestFusedExpertsMatchExact(t *testing.T) {
	e, _ := fusedExpertsEngine(t)

	const experts, n, kd = 5, 192, 128
	counts := []int{3, 0, 40, 1, 26} // rows of each expert, in order
	var idx []int32
	for ex, c := range counts {
		for range c {
			idx = append(idx, int32(ex))
		}
	}
	rows := len(idx)
	lcg := uint64(7)
	rnd := func(m int, scale float32) []float32 {
		v := make([]float32, m)
		for i := range v {
			lcg = lcg*6364136223846793005 + 1442695040888963407
			v[i] = scale * (float32(int64(lcg>>40)%2001-1000) / 1000)
		}
		return v
	}
	bf := func(v []float32, shape ...int) *mx.Array {
		return mx.AsType(mx.FromFloat32(e, v, shape...), mx.BFloat16)
	}
	x := bf(rnd(rows*kd, 1), rows, kd)
	cot := bf(rnd(rows*n, 1), rows, n)
	wq, ws, wb := mx.Quantize(bf(rnd(experts*n*kd, 0.1), experts, n, kd), 64, 4)
	ids := mx.FromInt32(e, idx, rows)
	xs := mx.AsType(x, mx.Float32).Float32s()
	cs := mx.AsType(cot, mx.Float32).Float32s()
	wd := mx.AsType(mx.Dequantize(wq, ws, wb, 64, 4), mx.Float32).Float32s() // [E, N, K]

	// The float64 products of the bfloat16 values: y = x·W[e]ᵀ, dx = cot·W[e].
	wantY, wantDX := make([]float64, rows*n), make([]float64, rows*kd)
	for r, ex := range idx {
		w := wd[int(ex)*n*kd:]
		for j := range n {
			for c := range kd {
				wantY[r*n+j] += float64(xs[r*kd+c]) * float64(w[j*kd+c])
				wantDX[r*kd+c] += float64(cs[r*n+j]) * float64(w[j*kd+c])
			}
		}
	}
	check := func(what string, got []float32, want []float64) {
		t.Helper()
		scale := 0.0
		for _, v := range want {
			scale = math.Max(scale, math.Abs(v))
		}
		for i, v := range want {
			// one bfloat16 rounding of the result (2⁻⁸ relative) and float32 sums
			if d := math.Abs(float64(got[i]) - v); d > math.Abs(v)/256+scale*1e-4 {
				t.Fatalf("%s [%d]: %v, want %v (scale %v)", what, i, got[i], v, scale)
			}
		}
	}
	for _, r := range []expertsRoute{{expertsMMA, expertsMMA}, {expertsWMMA, expertsWMMA}, chooseExpertsRoute("gpu", ""), {}} {
		e.experts = r
		if r.forward != expertsOff && !e.fusesExperts(get(mx.Reshape(x, rows, 1, kd).Handle()), get(wq.Handle()), get(ws.Handle()), get(ids.Handle()), mx.QuantParams{GroupSize: 64, Bits: 4}, true) {
			t.Fatal("the fused kernel refused the test's shapes")
		}
		vals, grads := mx.ValueAndGrad(func(a []*mx.Array) []*mx.Array {
			y := mx.GatherQMM(a[0], wq, ws, wb, ids, true, 64, 4, true)
			return []*mx.Array{mx.Sum(mx.Multiply(mx.AsType(y, mx.Float32), mx.AsType(cot, mx.Float32)), false), y}
		})([]*mx.Array{x})
		name := expertsKindNames[r.forward] + " forward, " + expertsKindNames[r.backward] + " backward:"
		check(name+" y", mx.AsType(vals[1], mx.Float32).Float32s(), wantY)
		check(name+" dx", mx.AsType(grads[0], mx.Float32).Float32s(), wantDX)
	}
}

// The real 26B-A4B geometry's expert products: 3,072 (token, slot) rows sorted over 128
// experts, 24 an expert, and the gate/up and down weights [N, K].
const realExperts, realExpertRows = 128, 3072

var realExpertShapes = []struct {
	name string
	n, k int
}{{"gate_up", 1408, 2816}, {"down", 2816, 704}}

// realExpertIDs are the rows' experts, sorted.
func realExpertIDs(e mx.Engine) *mx.Array {
	idx := make([]int32, realExpertRows)
	for i := range idx {
		idx[i] = int32(i * realExperts / realExpertRows)
	}
	return mx.FromInt32(e, idx, realExpertRows)
}

// realExpertInputs are a random 4-bit weight [realExperts, n, k] (groups of 64, bfloat16
// scales) and bfloat16 rows [realExpertRows, k], evaluated, the float weight (1 GB for
// gate/up) already freed.
func realExpertInputs(e mx.Engine, n, k int) (wq, ws, wb, x *mx.Array) {
	w := mx.AsType(mx.Multiply(mx.Scalar(e, 0.02, mx.Float32), mx.Normal(mx.Key(e, 1), []int{realExperts, n, k}, mx.Float32)), mx.BFloat16)
	wq, ws, wb = mx.Quantize(w, 64, 4)
	x = mx.AsType(mx.Normal(mx.Key(e, 2), []int{realExpertRows, k}, mx.Float32), mx.BFloat16)
	mx.Eval(wq, ws, wb, x)
	w.Free()
	return wq, ws, wb, x
}

// fusedEverywhere is TestFusesExpertsShapes' want for shapes every fused route takes.
var fusedEverywhere = map[string]bool{"wmma": true, "mma": true, "mma forward, wmma backward": true, "wmma forward, mma backward": true}

// TestFusesExpertsShapes: the fused kernels take bfloat16 rows over 4-bit, group-64
// weights whose widths are multiples of 64, and nothing else; the mma.sync kernel also
// wants the contraction of each direction it takes within mmaExpertsMaxContraction. The
// choice is pure shape logic, so it runs on any device with each route forced on.
func TestFusesExpertsShapes(t *testing.T) {
	e, err := open()
	if err != nil {
		t.Fatal(err)
	}
	saved := e.experts
	t.Cleanup(func() { e.experts = saved })
	routes := map[string]expertsRoute{"dequant route": {}, "wmma": {expertsWMMA, expertsWMMA}, "mma": {expertsMMA, expertsMMA},
		"mma forward, wmma backward": {expertsMMA, expertsWMMA}, "wmma forward, mma backward": {expertsWMMA, expertsMMA}}
	for _, c := range []struct {
		name          string
		experts, n, k int
		bits, group   int
		dt            mx.DType
		want          map[string]bool // by route; absent: false
	}{
		{"real gate_up", 128, 1408, 2816, 4, 64, mx.BFloat16, fusedEverywhere},
		{"real down", 128, 2816, 704, 4, 64, mx.BFloat16, fusedEverywhere},
		{"K at the mma bound", 2, 64, 8192, 4, 64, mx.BFloat16, fusedEverywhere},
		// K is the forward's contraction, N the input gradient's.
		{"K past the mma bound", 2, 64, 8256, 4, 64, mx.BFloat16, map[string]bool{"wmma": true, "wmma forward, mma backward": true}},
		{"N past the mma bound", 2, 8256, 64, 4, 64, mx.BFloat16, map[string]bool{"wmma": true, "mma forward, wmma backward": true}},
		{"K not a tile multiple", 4, 128, 96, 4, 64, mx.BFloat16, nil},
		{"N not a tile multiple", 4, 96, 128, 4, 64, mx.BFloat16, nil},
		{"8 bits", 4, 128, 128, 8, 64, mx.BFloat16, nil},
		{"groups of 32", 4, 128, 128, 4, 32, mx.BFloat16, nil},
		{"float32 rows", 4, 128, 128, 4, 64, mx.Float32, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			x := mx.Zeros(e, []int{8, 1, c.k}, c.dt)
			wq := mx.Zeros(e, []int{c.experts, c.n, c.k * c.bits / 32}, mx.Uint32)
			ws := mx.Zeros(e, []int{c.experts, c.n, c.k / c.group}, mx.BFloat16)
			ids := mx.Zeros(e, []int{8}, mx.Int32)
			p := mx.QuantParams{GroupSize: c.group, Bits: c.bits}
			for name, r := range routes {
				e.experts = r
				if got := e.fusesExperts(get(x.Handle()), get(wq.Handle()), get(ws.Handle()), get(ids.Handle()), p, true); got != c.want[name] {
					t.Errorf("%s: fusesExperts = %v, want %v", name, got, c.want[name])
				}
			}
		})
	}
}

// TestFusedExpertsMatchDequantRouteReal: on a GPU, at the real 26B-A4B geometry's expert
// shapes (3,072 rows over 128 experts, gate/up [1408, 2816] and down [2816, 704]) each
// fused kernel's forward and input gradient agree with the dequant route's (dequantize,
// then MLX's grouped GEMM) within two bfloat16 roundings: the two sum the same products of
// the same bfloat16 values in float32, in different orders. TestFusedExpertsMatchExact
// checks small shapes against float64; this one covers the long contractions and the
// grid at the size the model runs.
func TestFusedExpertsMatchDequantRouteReal(t *testing.T) {
	e, use := fusedExpertsEngine(t)
	ids := realExpertIDs(e)
	for _, shape := range realExpertShapes {
		t.Run(shape.name, func(t *testing.T) {
			wq, ws, wb, x := realExpertInputs(e, shape.n, shape.k)
			cot := mx.AsType(mx.Normal(mx.Key(e, 3), []int{realExpertRows, shape.n}, mx.Float32), mx.BFloat16)
			run := func(kind expertsKind) (y, dx []float32) {
				use(kind)
				vals, grads := mx.ValueAndGrad(func(a []*mx.Array) []*mx.Array {
					y := mx.GatherQMM(a[0], wq, ws, wb, ids, true, 64, 4, true)
					return []*mx.Array{mx.Sum(mx.Multiply(mx.AsType(y, mx.Float32), mx.AsType(cot, mx.Float32)), false), y}
				})([]*mx.Array{x})
				return mx.AsType(vals[1], mx.Float32).Float32s(), mx.AsType(grads[0], mx.Float32).Float32s()
			}
			dy, ddx := run(expertsOff)
			for _, kind := range []expertsKind{expertsWMMA, expertsMMA} {
				fy, fdx := run(kind)
				for _, c := range []struct {
					what      string
					got, want []float32
				}{{"y", fy, dy}, {"dx", fdx, ddx}} {
					scale := 0.0
					for _, v := range c.want {
						scale = math.Max(scale, math.Abs(float64(v)))
					}
					bad := 0
					for i, v := range c.want {
						if d := math.Abs(float64(c.got[i] - v)); d > math.Abs(float64(v))/128+scale*1e-3 {
							if bad++; bad <= 3 {
								t.Errorf("%s %s [%d]: %v, dequant route %v (scale %v)", expertsKindNames[kind], c.what, i, c.got[i], v, scale)
							}
						}
					}
					if bad > 0 {
						t.Errorf("%s %s: %d of %d values apart", expertsKindNames[kind], c.what, bad, len(c.want))
					}
				}
			}
		})
	}
}

// BenchmarkFusedExperts times one expert product of the real 26B-A4B geometry on a GPU —
// 3,072 (token, slot) rows sorted over 128 experts, 4-bit weights in groups of 64 — on the
// dequant route (dequantize + CUTLASS grouped GEMM) and through each fused kernel, forward
// (x·Wᵀ) and with the input gradient (value and grad of a sum). MLX's CPU backend has no
// custom kernels.
func BenchmarkFusedExperts(b *testing.B) {
	e, use := fusedExpertsEngine(b)
	ids := realExpertIDs(e)
	for _, shape := range realExpertShapes {
		wq, ws, wb, x := realExpertInputs(e, shape.n, shape.k)
		for _, kind := range []expertsKind{expertsOff, expertsWMMA, expertsMMA} {
			route := map[expertsKind]string{expertsOff: "dequant", expertsWMMA: "wmma", expertsMMA: "mma"}[kind]
			forward := func() { mx.Eval(mx.GatherQMM(x, wq, ws, wb, ids, true, 64, 4, true)) }
			both := func() {
				v, g := mx.ValueAndGrad(func(a []*mx.Array) []*mx.Array {
					y := mx.GatherQMM(a[0], wq, ws, wb, ids, true, 64, 4, true)
					return []*mx.Array{mx.Sum(mx.AsType(y, mx.Float32), false)}
				})([]*mx.Array{x})
				mx.Eval(v[0], g[0])
			}
			for _, c := range []struct {
				pass string
				run  func()
			}{{"forward", forward}, {"forward+dx", both}} {
				b.Run(shape.name+"/"+route+"/"+c.pass, func(b *testing.B) {
					use(kind)
					c.run() // kernel JIT
					b.ResetTimer()
					for range b.N {
						c.run()
					}
				})
			}
		}
	}
}
