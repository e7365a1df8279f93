package goeng_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
)

// TestGeGLU: the fused op gives GELUTanh(gate)·up's bits, keeps the promoted dtype, and
// refuses arrays of two shapes.
func TestGeGLU(t *testing.T) {
	e := mxtest.Go(t)
	rng := rand.New(rand.NewPCG(35, 36))
	g, u := mx.MulScalar(mxtest.RandN(e, rng, 5, 33), 3), mxtest.RandN(e, rng, 5, 33)
	if got, want := mx.GeGLU(g, u).Float32s(), mx.Multiply(mx.GELUTanh(g), u).Float32s(); !slices.Equal(got, want) {
		t.Fatal("GeGLU differs from GELUTanh(gate)·up")
	}
	if dt := mx.GeGLU(mx.AsType(g, mx.BFloat16), u).DType(); dt != mx.Float32 {
		t.Errorf("bf16 gate with f32 up: dtype %s, want float32", dt)
	}
	msg := func() (msg string) {
		defer func() { msg = fmt.Sprint(recover()) }()
		mx.GeGLU(g, mx.Reshape(u, 33, 5))
		return "no panic"
	}()
	if !strings.Contains(msg, "geglu") || !strings.Contains(msg, "[33 5]") {
		t.Errorf("shape mismatch: panic %q", msg)
	}
}

// TestGeGLUSplit: GeGLU of the halves of the last axis as one op gives the values and
// gradient of the composition GeGLU(slice, slice) — for halves that are whole vectors
// and halves with tails, with a batch axis — and refuses an odd last axis.
func TestGeGLUSplit(t *testing.T) {
	e := mxtest.Go(t)
	rng := rand.New(rand.NewPCG(45, 46))
	for _, shape := range [][]int{{7, 20}, {3, 4, 512}, {1, 2}} {
		x := mx.MulScalar(mxtest.RandN(e, rng, shape...), 3)
		w := shape[len(shape)-1]
		r := mxtest.RandN(e, rng, append(slices.Clone(shape[:len(shape)-1]), w/2)...)
		split := func(a []*mx.Array) []*mx.Array {
			return []*mx.Array{mx.Sum(mx.Multiply(mx.GeGLUSplit(a[0]), r), false)}
		}
		composed := func(a []*mx.Array) []*mx.Array {
			g := mx.GeGLU(mx.SliceAxis(a[0], -1, 0, w/2), mx.SliceAxis(a[0], -1, w/2, w))
			return []*mx.Array{mx.Sum(mx.Multiply(g, r), false)}
		}
		if got, want := mx.GeGLUSplit(x), mx.GeGLU(mx.SliceAxis(x, -1, 0, w/2), mx.SliceAxis(x, -1, w/2, w)); !slices.Equal(got.Shape(), want.Shape()) || !slices.Equal(got.Float32s(), want.Float32s()) {
			t.Fatalf("%v: GeGLUSplit differs from GeGLU of the slices", shape)
		}
		_, g0 := mx.ValueAndGrad(split, 0)([]*mx.Array{x})
		_, g1 := mx.ValueAndGrad(composed, 0)([]*mx.Array{x})
		// == on float32: a −0 cotangent the composition's padding sum turned into +0 is equal.
		if !slices.Equal(g0[0].Float32s(), g1[0].Float32s()) {
			t.Errorf("%v: gradient differs from the composition's", shape)
		}
	}
	msg := func() (msg string) {
		defer func() { msg = fmt.Sprint(recover()) }()
		mx.GeGLUSplit(mx.Zeros(e, []int{2, 3}, mx.Float32))
		return "no panic"
	}()
	if !strings.Contains(msg, "geglu_split") || !strings.Contains(msg, "[2 3]") {
		t.Errorf("odd last axis: panic %q", msg)
	}
}

// TestTakeWeightedSum: the experts' combine as one op gives the composition's bits — Take,
// Multiply by the weights, Sum over K — for the value and the gradient of y (and the
// gradient of w to rounding),
// with a permutation (the MoE case), repeated rows and rows no one picks, K = 1 and 4, and
// a batch axis; bad shapes and dtypes are refused.
func TestTakeWeightedSum(t *testing.T) {
	e := mxtest.Go(t)
	rng := rand.New(rand.NewPCG(47, 48))
	for _, c := range []struct {
		name   string
		r, h   int
		ishape []int
		ids    []int32
	}{
		{"permutation", 6, 20, []int{3, 2}, []int32{4, 0, 5, 1, 2, 3}},
		{"repeats and gaps", 7, 37, []int{2, 2, 4}, []int32{0, 0, 6, 2, 2, 2, 6, 0, 3, 6, 6, 6, 0, 1, 2, 2}},
		{"one slot", 4, 9, []int{5, 1}, []int32{3, 3, 1, 0, 3}},
	} {
		y := mxtest.RandN(e, rng, c.r, c.h)
		w := mxtest.RandN(e, rng, c.ishape...)
		idx := mx.FromInt32(e, c.ids, c.ishape...)
		k := c.ishape[len(c.ishape)-1]
		rs := mxtest.RandN(e, rng, append(slices.Clone(c.ishape[:len(c.ishape)-1]), c.h)...)
		composed := func(a []*mx.Array) *mx.Array {
			p := mx.Reshape(mx.Take(a[0], mx.Reshape(idx, len(c.ids)), 0), append(slices.Clone(c.ishape), c.h)...)
			return mx.Sum(mx.Multiply(p, mx.ExpandDims(a[1], -1)), false, len(c.ishape)-1)
		}
		fused := func(a []*mx.Array) *mx.Array { return mx.TakeWeightedSum(a[0], idx, a[1]) }
		got, want := fused([]*mx.Array{y, w}), composed([]*mx.Array{y, w})
		if !slices.Equal(got.Shape(), want.Shape()) || !slices.Equal(got.Float32s(), want.Float32s()) {
			t.Fatalf("%s (K=%d): value differs from the composition's", c.name, k)
		}
		loss := func(f func([]*mx.Array) *mx.Array) func([]*mx.Array) []*mx.Array {
			return func(a []*mx.Array) []*mx.Array { return []*mx.Array{mx.Sum(mx.Multiply(f(a), rs), false)} }
		}
		_, g0 := mx.ValueAndGrad(loss(fused), 0, 1)([]*mx.Array{y, w})
		_, g1 := mx.ValueAndGrad(loss(composed), 0, 1)([]*mx.Array{y, w})
		if !slices.Equal(g0[0].Float32s(), g1[0].Float32s()) {
			t.Errorf("%s: dy differs from the composition's", c.name)
		}
		// dw sums exact products in float64 partial sums, the composition float32-rounded
		// ones in order: equal to rounding.
		if ok, at := mxtest.Close(g0[1].Float32s(), g1[1].Float32s(), 1e-5, 1e-6); !ok {
			t.Errorf("%s: dw[%d] = %v, composition %v", c.name, at, g0[1].Float32s()[at], g1[1].Float32s()[at])
		}
	}
	for _, bad := range []func(){
		func() {
			mx.TakeWeightedSum(mx.Zeros(e, []int{3}, mx.Float32), mx.Zeros(e, []int{2}, mx.Int32), mx.Zeros(e, []int{2}, mx.Float32))
		},
		func() {
			mx.TakeWeightedSum(mx.Zeros(e, []int{3, 4}, mx.Float32), mx.Zeros(e, []int{2}, mx.Float32), mx.Zeros(e, []int{2}, mx.Float32))
		},
		func() {
			mx.TakeWeightedSum(mx.Zeros(e, []int{3, 4}, mx.Float32), mx.Zeros(e, []int{2}, mx.Int32), mx.Zeros(e, []int{3}, mx.Float32))
		},
	} {
		msg := func() (msg string) {
			defer func() { msg = fmt.Sprint(recover()) }()
			bad()
			return "no panic"
		}()
		if !strings.Contains(msg, "take_weighted_sum") {
			t.Errorf("bad input: panic %q", msg)
		}
	}
}

// TestAddMM: beta·c + alpha·(a·b) as one op gives the bits of the three separate ops
// forward, and backward for dc and (alpha a power of two) da and db — to float32 rounding
// otherwise — also for alpha = beta = 1, a broadcast c, and batched operands; a c that does
// not broadcast is refused.
func TestAddMM(t *testing.T) {
	e := mxtest.Go(t)
	rng := rand.New(rand.NewPCG(37, 38))
	for _, c := range []struct {
		name        string
		cs, as, bs  []int
		alpha, beta float64
	}{
		{"lora", []int{2, 5, 7}, []int{2, 5, 3}, []int{3, 7}, 8, 1},
		{"plain", []int{4, 6}, []int{4, 9}, []int{9, 6}, 1, 1},
		{"both scaled", []int{4, 6}, []int{4, 9}, []int{9, 6}, 0.5, -2},
		{"broadcast c", []int{6}, []int{4, 9}, []int{9, 6}, 3, 1},
		// Rows of whole and partial vector widths, finished inside the product.
		{"lora wide", []int{1, 70, 100}, []int{1, 70, 8}, []int{8, 100}, 2.5, 1},
		{"plain wide", []int{50, 64}, []int{50, 16}, []int{16, 64}, 1, 1},
		{"both scaled wide", []int{30, 45}, []int{30, 20}, []int{20, 45}, 0.3, 1.7},
	} {
		args := []*mx.Array{mxtest.RandN(e, rng, c.cs...), mxtest.RandN(e, rng, c.as...), mxtest.RandN(e, rng, c.bs...)}
		r := mxtest.RandN(e, rng, append(c.as[:len(c.as)-1:len(c.as)-1], c.bs[len(c.bs)-1])...)
		fused := func(a []*mx.Array) []*mx.Array {
			return []*mx.Array{mx.Sum(mx.Multiply(mx.AddMM(a[0], a[1], a[2], c.alpha, c.beta), r), false)}
		}
		split := func(a []*mx.Array) []*mx.Array {
			return []*mx.Array{mx.Sum(mx.Multiply(split1(a, c.alpha, c.beta), r), false)}
		}
		if got, want := mx.AddMM(args[0], args[1], args[2], c.alpha, c.beta).Float32s(), split1(args, c.alpha, c.beta).Float32s(); !slices.Equal(got, want) {
			t.Errorf("%s: addmm differs from the separate ops'", c.name)
		}
		v0, g0 := mx.ValueAndGrad(fused, 0, 1, 2)(args)
		v1, g1 := mx.ValueAndGrad(split, 0, 1, 2)(args)
		if !slices.Equal(v0[0].Float32s(), v1[0].Float32s()) {
			t.Errorf("%s: value %v, separate ops %v", c.name, v0[0].Float32s(), v1[0].Float32s())
		}
		for i := range g0 {
			got, want := g0[i].Float32s(), g1[i].Float32s()
			// dc is the separate ops' bit for bit; da and db put alpha on the other factor,
			// which rounds differently unless alpha is a power of two.
			if exact := i == 0 || c.alpha == math.Exp2(math.Round(math.Log2(c.alpha))); exact && !slices.Equal(got, want) {
				t.Errorf("%s: gradient %d differs from the separate ops'", c.name, i)
			}
			if ok, k := mxtest.Close(got, want, 1e-5, 1e-6); !ok {
				t.Errorf("%s: gradient %d element %d = %v, separate ops %v", c.name, i, k, got[k], want[k])
			}
		}
	}
	msg := func() (msg string) {
		defer func() { msg = fmt.Sprint(recover()) }()
		z := func(s ...int) *mx.Array { return mx.Zeros(e, s, mx.Float32) }
		mx.AddMM(z(3, 5), z(4, 2), z(2, 5), 1, 1)
		return "no panic"
	}()
	if !strings.Contains(msg, "addmm") || !strings.Contains(msg, "[3 5]") {
		t.Errorf("bad c: panic %q", msg)
	}
}

// split1 is β·c + α·(a·b) op by op.
func split1(a []*mx.Array, alpha, beta float64) *mx.Array {
	cc := a[0]
	if beta != 1 {
		cc = mx.MulScalar(cc, beta)
	}
	p := mx.Matmul(a[1], a[2])
	if alpha != 1 {
		p = mx.MulScalar(p, alpha)
	}
	return mx.Add(cc, p)
}

// TestSumMiddleAxes: a sum over axes that are not last (summed in place, without moving
// them) gives the bits of the same sum with the axes moved last first.
func TestSumMiddleAxes(t *testing.T) {
	e := mxtest.Go(t)
	rng := rand.New(rand.NewPCG(39, 40))
	x := mxtest.RandN(e, rng, 3, 5, 4, 700)
	for _, c := range []struct {
		axes []int
		perm []int
	}{{[]int{1}, []int{0, 2, 3, 1}}, {[]int{1, 2}, []int{0, 3, 1, 2}}, {[]int{0}, []int{1, 2, 3, 0}}} {
		got := mx.Sum(x, false, c.axes...)
		moved := mx.Add(mx.Transpose(x, c.perm...), mx.Scalar(e, 0, mx.Float32)) // materialised
		var last []int
		for i := len(c.perm) - len(c.axes); i < len(c.perm); i++ {
			last = append(last, i)
		}
		want := mx.Sum(moved, false, last...)
		if !slices.Equal(got.Shape(), want.Shape()) || !slices.Equal(got.Float32s(), want.Float32s()) {
			t.Errorf("sum over %v: %v differs from the moved sum %v", c.axes, got.Shape(), want.Shape())
		}
	}
}

// TestLoRALinear: the one-op LoRA linear (dense and 4-bit bases) gives the composition's
// bits — base, x·a and AddMM — forward and for every cotangent (dx, da, db), with blocked
// products and with too few rows for one, alpha 1 and not, and its gradient passes the
// finite-difference check; bad shapes are refused.
func TestLoRALinear(t *testing.T) {
	e := mxtest.Go(t)
	rng := rand.New(rand.NewPCG(39, 40))
	const k, n, r = 128, 96, 8
	w := mxtest.RandN(e, rng, n, k)
	wq, ws, wb := mx.Quantize(w, 64, 4)
	for _, c := range []struct {
		name   string
		xs     []int
		quant  bool
		alpha  float64
		fdStep bool
	}{
		{"dense", []int{2, 37, k}, false, 2, true},
		{"dense alpha 1", []int{1, 70, k}, false, 1, false},
		{"dense two rows", []int{1, 2, k}, false, 0.75, false},
		{"4-bit", []int{2, 37, k}, true, 2, true},
		{"4-bit two rows", []int{2, 1, k}, true, 1.5, false},
		{"4-bit wide", []int{300, k}, true, 0.5, false},
	} {
		x := mxtest.RandN(e, rng, c.xs...)
		a := mx.MulScalar(mxtest.RandN(e, rng, k, r), 0.1)
		b := mxtest.RandN(e, rng, r, n)
		proj := mxtest.RandN(e, rng, append(c.xs[:len(c.xs)-1:len(c.xs)-1], n)...)
		fused := func(v []*mx.Array) *mx.Array {
			if c.quant {
				return mx.LoRAQuantized(v[0], wq, ws, wb, 64, 4, v[1], v[2], c.alpha)
			}
			return mx.LoRADense(v[0], w, v[1], v[2], c.alpha)
		}
		composed := func(v []*mx.Array) *mx.Array {
			base := mx.Matmul(v[0], mx.Transpose(w))
			if c.quant {
				base = mx.QuantizedMatmul(v[0], wq, ws, wb, true, 64, 4)
			}
			return mx.AddMM(base, mx.Matmul(v[0], v[1]), v[2], c.alpha, 1)
		}
		args := []*mx.Array{x, a, b}
		if got, want := fused(args).Float32s(), composed(args).Float32s(); !slices.Equal(got, want) {
			t.Errorf("%s: forward differs from the composition", c.name)
		}
		loss := func(f func([]*mx.Array) *mx.Array) func([]*mx.Array) []*mx.Array {
			return func(v []*mx.Array) []*mx.Array { return []*mx.Array{mx.Sum(mx.Multiply(f(v), proj), false)} }
		}
		_, g0 := mx.ValueAndGrad(loss(fused), 0, 1, 2)(args)
		_, g1 := mx.ValueAndGrad(loss(composed), 0, 1, 2)(args)
		for i, name := range []string{"dx", "da", "db"} {
			if !slices.Equal(g0[i].Float32s(), g1[i].Float32s()) {
				t.Errorf("%s: %s differs from the composition's", c.name, name)
			}
		}
		if c.fdStep {
			mxtest.GradCheck(t, func(v []*mx.Array) *mx.Array { return mx.Sum(mx.Multiply(fused(v), proj), false) }, args, []int{0, 1, 2}, mxtest.GradCheckOptions{})
		}
	}
	msg := func() (msg string) {
		defer func() { msg = fmt.Sprint(recover()) }()
		mx.LoRADense(mxtest.RandN(e, rng, 3, k), w, mxtest.RandN(e, rng, k, r), mxtest.RandN(e, rng, r+1, n), 1)
		return "no panic"
	}()
	if !strings.Contains(msg, "lora_dense") || !strings.Contains(msg, "[9 96]") {
		t.Errorf("bad b: panic %q", msg)
	}
}

// TestLoRAAdd: on an engine without LoRA kernels LoRAAdd is its composition — the term
// in the factors' float32, cast to the activations' bfloat16, added — forward and for
// every cotangent; arrays that do not fit are refused with the op's name.
func TestLoRAAdd(t *testing.T) {
	e := mxtest.Go(t)
	rng := rand.New(rand.NewPCG(41, 42))
	const k, n, r, alpha = 40, 24, 4, 1.5
	bf := func(shape ...int) *mx.Array { return mx.AsType(mxtest.RandN(e, rng, shape...), mx.BFloat16) }
	args := []*mx.Array{bf(2, 3, n), bf(2, 3, k), mx.MulScalar(mxtest.RandN(e, rng, k, r), 0.1), mxtest.RandN(e, rng, r, n)}
	proj := mxtest.RandN(e, rng, 2, 3, n)
	loss := func(f func([]*mx.Array) *mx.Array) func([]*mx.Array) []*mx.Array {
		return func(v []*mx.Array) []*mx.Array {
			return []*mx.Array{mx.Sum(mx.Multiply(mx.AsType(f(v), mx.Float32), proj), false), f(v)}
		}
	}
	fused := func(v []*mx.Array) *mx.Array { return mx.LoRAAdd(v[0], v[1], v[2], v[3], alpha) }
	composed := func(v []*mx.Array) *mx.Array {
		return mx.Add(v[0], mx.AsType(mx.MulScalar(mx.Matmul(mx.Matmul(v[1], v[2]), v[3]), alpha), mx.BFloat16))
	}
	v0, g0 := mx.ValueAndGrad(loss(fused), 0, 1, 2, 3)(args)
	v1, g1 := mx.ValueAndGrad(loss(composed), 0, 1, 2, 3)(args)
	if v0[1].DType() != mx.BFloat16 || !slices.Equal(mx.AsType(v0[1], mx.Float32).Float32s(), mx.AsType(v1[1], mx.Float32).Float32s()) {
		t.Errorf("forward %s differs from the composition", v0[1].DType())
	}
	for i, name := range []string{"d base", "dx", "da", "db"} {
		if !slices.Equal(mx.AsType(g0[i], mx.Float32).Float32s(), mx.AsType(g1[i], mx.Float32).Float32s()) {
			t.Errorf("%s differs from the composition's", name)
		}
	}
	for _, c := range []struct {
		name string
		args []*mx.Array
		want string
	}{
		{"b's width", []*mx.Array{args[0], args[1], args[2], mxtest.RandN(e, rng, r, n+1)}, "lora_add: base [2 3 24] bfloat16 for x [2 3 40] bfloat16 and b [4 25]"},
		{"a's height", []*mx.Array{args[0], args[1], mxtest.RandN(e, rng, k+1, r), args[3]}, "lora_add: x [2 3 40], weight [24 40], a [41 4]"},
		{"base's rows", []*mx.Array{bf(3, 3, n), args[1], args[2], args[3]}, "lora_add: base [3 3 24] bfloat16 for x [2 3 40]"},
		{"base's dtype", []*mx.Array{mxtest.RandN(e, rng, 2, 3, n), args[1], args[2], args[3]}, "lora_add: base [2 3 24] float32"},
	} {
		msg := func() (msg string) {
			defer func() { msg = fmt.Sprint(recover()) }()
			fused(c.args)
			return "no panic"
		}()
		if !strings.Contains(msg, c.want) {
			t.Errorf("%s: panic %q, want %q", c.name, msg, c.want)
		}
	}
}

// TestExpertOrder: mx.ExpertOrder's order is the stable argsort of the ids (ties in
// position order) and its inverse undoes it, for ids with ties, empty experts and one
// id; bad arguments panic with the op's name.
func TestExpertOrder(t *testing.T) {
	e := mxtest.Go(t)
	for _, ids := range [][]int32{{3, 0, 3, 1, 0, 3, 2, 0}, {5}, {1, 1, 1, 1}, {7, 0, 7, 0, 4, 4, 0, 7, 1}} {
		order, inverse := mx.ExpertOrder(mx.FromInt32(e, ids, len(ids)), 8)
		o, inv := order.Int32s(), inverse.Int32s()
		want := make([]int32, len(ids))
		for i := range want {
			want[i] = int32(i)
		}
		slices.SortStableFunc(want, func(a, b int32) int { return int(ids[a]) - int(ids[b]) })
		if !slices.Equal(o, want) {
			t.Fatalf("ids %v: order %v, want %v", ids, o, want)
		}
		for p, i := range o {
			if inv[i] != int32(p) {
				t.Fatalf("ids %v: inverse %v does not undo order %v", ids, inv, o)
			}
		}
	}
	for _, c := range []struct {
		name    string
		idx     *mx.Array
		experts int
	}{
		{"two axes", mx.FromInt32(e, []int32{0, 1, 2, 3}, 2, 2), 4},
		{"int64", mx.AsType(mx.FromInt32(e, []int32{0, 1}, 2), mx.Int64), 4},
		{"no experts", mx.FromInt32(e, []int32{0, 1}, 2), 0},
	} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "expert_order") {
					t.Errorf("%s: panic %v, want one naming expert_order", c.name, r)
				}
			}()
			mx.ExpertOrder(c.idx, c.experts)
		}()
	}
}

// TestNormRoPE: mx.NormRoPE on an engine without the op is the composition it documents,
// bit for bit, values and gradients; missing or misshapen arguments panic with the op's
// name.
func TestNormRoPE(t *testing.T) {
	e := mxtest.Go(t)
	rng := rand.New(rand.NewPCG(51, 52))
	x := mxtest.RandN(e, rng, 2, 3, 4, 8)
	w := mxtest.RandN(e, rng, 8)
	freqs := mx.FromFloat32(e, []float32{1, 10, 100, float32(math.Inf(1))}, 4)
	g := mxtest.RandN(e, rng, 2, 4, 3, 8)
	run := func(f func(a []*mx.Array) *mx.Array) ([]float32, []float32) {
		vals, grads := mx.ValueAndGrad(func(a []*mx.Array) []*mx.Array {
			y := f(a)
			return []*mx.Array{mx.Sum(mx.Multiply(y, g), false), y}
		})([]*mx.Array{x, w})
		return vals[1].Float32s(), append(grads[0].Float32s(), grads[1].Float32s()...)
	}
	gotY, gotG := run(func(a []*mx.Array) *mx.Array { return mx.NormRoPE(a[0], a[1], 1e-6, 1, 5, freqs) })
	wantY, wantG := run(func(a []*mx.Array) *mx.Array {
		return mx.RoPE(mx.Transpose(mx.RMSNorm(a[0], a[1], 1e-6), 0, 2, 1, 3), 8, false, 0, 1, 5, freqs)
	})
	if !slices.Equal(gotY, wantY) || !slices.Equal(gotG, wantG) {
		t.Fatal("NormRoPE differs from its composition")
	}
	for _, c := range []struct {
		name     string
		x, w, fr *mx.Array
	}{
		{"three axes", mxtest.RandN(e, rng, 3, 4, 8), w, freqs},
		{"weight of another size", x, mxtest.RandN(e, rng, 6), freqs},
		{"freqs of another size", x, w, mx.FromFloat32(e, []float32{1, 2}, 2)},
		{"no freqs", x, w, nil},
	} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "norm_rope") {
					t.Errorf("%s: panic %v, want one naming norm_rope", c.name, r)
				}
			}()
			mx.NormRoPE(c.x, c.w, 1e-6, 1, 0, c.fr)
		}()
	}
}
