//go:build mlx

package mlxeng

import (
	"fmt"
	"math"
	"testing"

	"github.com/dgtune/dgtune/mx"
)

// TestAdditiveMaskMatchesBoolMask: attention with a boolean mask passed to MLX as the
// additive one (additiveMask) gives the values and the q, k, v gradients of MLX's own
// boolean path bit for bit — float32 and bfloat16, grouped-query heads with one mask for
// every head, and a per-head mask. (A row with every key masked is outside the engines'
// contract — the go engine gives NaN there — and there the two paths differ: both give the
// row uniform weights, but only the additive one passes its scores' gradient on.)
func TestAdditiveMaskMatchesBoolMask(t *testing.T) {
	e, err := open()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.boolMasks = false })
	const b, hq, hkv, sq, skv, d = 1, 4, 2, 5, 7, 8
	for _, c := range []struct {
		dt        mx.DType
		maskHeads int
	}{{mx.Float32, 1}, {mx.BFloat16, 1}, {mx.Float32, hq}, {mx.BFloat16, hq}} {
		t.Run(fmt.Sprintf("%s/mask heads %d", c.dt, c.maskHeads), func(t *testing.T) {
			allow := make([]bool, c.maskHeads*sq*skv)
			for h := range c.maskHeads {
				for i := range sq {
					for j := range skv {
						allow[(h*sq+i)*skv+j] = j <= i+h%2 || j == skv-1-i
					}
				}
			}
			mask := mx.FromBool(e, allow, 1, c.maskHeads, sq, skv)
			in := func(seed uint64, heads, s int) *mx.Array {
				return mx.AsType(mx.Normal(mx.Key(e, seed), []int{b, heads, s, d}, mx.Float32), c.dt)
			}
			q, k, v := in(1, hq, sq), in(2, hkv, skv), in(3, hkv, skv)
			cot := in(4, hq, sq)
			run := func(boolMasks bool) [][]float32 {
				e.boolMasks = boolMasks
				vals, grads := mx.ValueAndGrad(func(a []*mx.Array) []*mx.Array {
					out := mx.ScaledDotProductAttention(a[0], a[1], a[2], 0.35, mask)
					return []*mx.Array{mx.Sum(mx.Multiply(mx.AsType(out, mx.Float32), mx.AsType(cot, mx.Float32)), false), out}
				})([]*mx.Array{q, k, v})
				res := [][]float32{mx.AsType(vals[1], mx.Float32).Float32s()}
				for _, g := range grads {
					res = append(res, mx.AsType(g, mx.Float32).Float32s())
				}
				return res
			}
			want, got := run(true), run(false)
			for i, name := range []string{"out", "dq", "dk", "dv"} {
				for j := range want[i] {
					if math.Float32bits(got[i][j]) != math.Float32bits(want[i][j]) {
						t.Fatalf("%s[%d]: additive mask %v, boolean mask %v", name, j, got[i][j], want[i][j])
					}
				}
			}
		})
	}
}
