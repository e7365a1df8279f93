//go:build mlx

package mlxeng

import (
	"fmt"
	"math"
	"testing"

	"github.com/dgtune/dgtune/mx"
)

// TestFoldedSDPAChoice: the folded attention is on only on CUDA with MLXENG_SDPA=folded,
// and takes grouped-query attention of more than 8 queries where MLX has no fused kernel
// (a head size above 128 or float32), with no mask or an additive one of q's dtype. The
// shape logic runs on any device with the switch forced on.
func TestFoldedSDPAChoice(t *testing.T) {
	for _, c := range []struct {
		device, env string
		onCUDA      bool // the answer where device is a CUDA GPU (off anywhere else)
	}{{"gpu", "folded", true}, {"gpu", "", false}, {"cpu", "folded", false}} {
		want := c.onCUDA && isCUDA(c.device)
		if got := foldedSDPAOn(c.device, c.env); got != want {
			t.Errorf("foldedSDPAOn(%q, %q) = %v, want %v", c.device, c.env, got, want)
		}
	}
	e, err := open()
	if err != nil {
		t.Fatal(err)
	}
	saved := e.foldedSDPA
	t.Cleanup(func() { e.foldedSDPA = saved })
	e.foldedSDPA = true
	bf, f32 := mx.BFloat16, mx.Float32
	for _, c := range []struct {
		name       string
		hq, hkv, l int
		d, dv      int
		dt, maskDT mx.DType
		mask       bool
		want       bool
	}{
		{"real sliding layer", 16, 8, 384, 256, 256, bf, bf, true, true},
		{"real global layer", 16, 2, 384, 512, 512, bf, bf, true, true},
		{"no mask", 16, 8, 384, 256, 256, bf, bf, false, true},
		{"float32, small heads", 4, 2, 16, 16, 16, f32, f32, true, true},
		{"cuDNN's sizes", 16, 8, 384, 128, 128, bf, bf, true, false},
		{"one kv head a query head", 8, 8, 384, 256, 256, bf, bf, true, false},
		{"8 queries", 16, 8, 8, 256, 256, bf, bf, true, false},
		{"mask of another dtype", 16, 8, 384, 256, 256, bf, f32, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			q := get(mx.Zeros(e, []int{1, c.hq, c.l, c.d}, c.dt).Handle())
			k := get(mx.Zeros(e, []int{1, c.hkv, c.l, c.d}, c.dt).Handle())
			v := get(mx.Zeros(e, []int{1, c.hkv, c.l, c.dv}, c.dt).Handle())
			var m *array
			if c.mask {
				m = get(mx.Zeros(e, []int{1, 1, c.l, c.l}, c.maskDT).Handle())
			}
			if got := e.foldsAttention(q, k, v, m); got != c.want {
				t.Errorf("foldsAttention = %v, want %v", got, c.want)
			}
		})
	}
}

// TestJoinsAttentionChoice: the engine asks the model for joined attention only on CUDA
// (unless MLXENG_JOIN_ATTENTION=0), and only where MLX has no fused kernel for q — a head
// size above 128 or not a multiple of 8, or float32. The shape logic runs on any device
// with the switch forced on.
func TestJoinsAttentionChoice(t *testing.T) {
	for _, c := range []struct {
		device, env string
		onCUDA      bool
	}{{"gpu", "", true}, {"gpu", "1", true}, {"gpu", "0", false}, {"cpu", "", false}} {
		want := c.onCUDA && isCUDA(c.device)
		if got := joinAttentionOn(c.device, c.env); got != want {
			t.Errorf("joinAttentionOn(%q, %q) = %v, want %v", c.device, c.env, got, want)
		}
	}
	e, err := open()
	if err != nil {
		t.Fatal(err)
	}
	saved := e.joinAttention
	t.Cleanup(func() { e.joinAttention = saved })
	bf, f32 := mx.BFloat16, mx.Float32
	for _, c := range []struct {
		name string
		d    int
		dt   mx.DType
		on   bool
		want bool
	}{
		{"real sliding layer", 256, bf, true, true},
		{"real global layer", 512, bf, true, true},
		{"float32", 64, f32, true, true},
		{"head size 100", 100, bf, true, true},
		{"cuDNN's sizes", 128, bf, true, false},
		{"switched off", 256, bf, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			e.joinAttention = c.on
			if got := mx.JoinsAttention(e, c.dt, c.d); got != c.want {
				t.Errorf("JoinsAttention = %v, want %v", got, c.want)
			}
		})
	}
}

// TestFoldedSDPAMatchesMLX: the folded attention gives MLX's own attention's values and
// q, k and v gradients — float32 within float32 rounding, bfloat16 within its own — for
// two query heads a kv head with a mask (made additive by the engine), eight with none,
// and masks that differ from head to head (three query heads a kv head, and four at head
// size 256, where MLX itself takes its fallback composition). It runs on MLX's CPU backend too: the composition is
// plain MLX ops.
func TestFoldedSDPAMatchesMLX(t *testing.T) {
	e, err := open()
	if err != nil {
		t.Fatal(err)
	}
	saved := e.foldedSDPA
	t.Cleanup(func() { e.foldedSDPA = saved })
	for _, c := range []struct {
		b, hq, hkv, l, lk, d, dv int
		dt                       mx.DType
		mask                     string // "", "bool" [1, 1, L, Lk] or "heads" ([1, Hq, L, Lk])
	}{
		{1, 4, 2, 16, 24, 16, 16, mx.Float32, "bool"},
		{2, 8, 1, 12, 12, 8, 24, mx.Float32, ""},
		{1, 6, 2, 12, 20, 16, 8, mx.Float32, "heads"}, // G ≠ Hkv: a mask misassigned to heads fails
		{1, 8, 2, 10, 10, 256, 256, mx.BFloat16, "heads"},
	} {
		t.Run(fmt.Sprintf("b%d_hq%d_hkv%d_l%d_lk%d_d%d_%s_%s", c.b, c.hq, c.hkv, c.l, c.lk, c.d, c.dt, c.mask), func(t *testing.T) {
			rnd := func(seed uint64, shape ...int) *mx.Array {
				return mx.AsType(mx.Normal(mx.Key(e, seed), shape, mx.Float32), c.dt)
			}
			q, k, v := rnd(1, c.b, c.hq, c.l, c.d), rnd(2, c.b, c.hkv, c.lk, c.d), rnd(3, c.b, c.hkv, c.lk, c.dv)
			cot := rnd(4, c.b, c.hq, c.l, c.dv)
			var mask *mx.Array
			switch c.mask {
			case "bool": // causal with an offset: every row keeps some keys
				allow := make([]bool, c.l*c.lk)
				for i := range c.l {
					for j := range c.lk {
						allow[i*c.lk+j] = j <= i+c.lk-c.l
					}
				}
				mask = mx.FromBool(e, allow, 1, 1, c.l, c.lk)
			case "heads": // a different pattern a head, the diagonal always kept
				allow := make([]bool, c.hq*c.l*c.lk)
				for h := range c.hq {
					for i := range c.l {
						for j := range c.lk {
							allow[(h*c.l+i)*c.lk+j] = j == i || (i*7+j*3+h)%4 != 0
						}
					}
				}
				mask = mx.FromBool(e, allow, 1, c.hq, c.l, c.lk)
			}
			scale := 1 / math.Sqrt(float64(c.d))
			run := func(folded bool) [][]float32 {
				e.foldedSDPA = folded
				if folded {
					m := (*array)(nil)
					if mask != nil {
						m = get(mask.Handle())
						if add := e.additiveMask(m, c.dt); add != nil {
							defer e.free(add)
							m = add
						}
					}
					if !e.foldsAttention(get(q.Handle()), get(k.Handle()), get(v.Handle()), m) {
						t.Fatal("foldsAttention refused the case")
					}
				}
				vals, grads := mx.ValueAndGrad(func(a []*mx.Array) []*mx.Array {
					out := mx.ScaledDotProductAttention(a[0], a[1], a[2], scale, mask)
					return []*mx.Array{mx.Sum(mx.Multiply(mx.AsType(out, mx.Float32), mx.AsType(cot, mx.Float32)), false), out}
				})([]*mx.Array{q, k, v})
				var res [][]float32
				for _, a := range []*mx.Array{vals[1], grads[0], grads[1], grads[2]} {
					res = append(res, mx.AsType(a, mx.Float32).Float32s())
				}
				return res
			}
			got, want := run(true), run(false)
			rel := 1e-5
			if c.dt == mx.BFloat16 {
				rel = 1.0 / 64 // bfloat16 roundings of the scores, probabilities and products
			}
			for i, what := range []string{"out", "dq", "dk", "dv"} {
				scale := 0.0
				for _, w := range want[i] {
					scale = math.Max(scale, math.Abs(float64(w)))
				}
				for j, w := range want[i] {
					if d := math.Abs(float64(got[i][j] - w)); d > math.Abs(float64(w))*rel+scale*rel/4 {
						t.Fatalf("%s[%d] = %v folded, %v MLX's (scale %v)", what, j, got[i][j], w, scale)
					}
				}
			}
		})
	}
}
