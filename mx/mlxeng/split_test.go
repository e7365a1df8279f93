//go:build mlx

package mlxeng

import (
	"fmt"
	"math"
	"testing"

	"github.com/dgtune/dgtune/mx"
)

// TestSplitMatchesSlices: mx.Split through MLX's split gives the slices' values and,
// through its VJP (one concatenate), the slices' gradient bit for bit (their VJPs write
// each cotangent into zeros and sum them: adding zeros changes no value), for parts of
// unequal and empty size along a middle axis and the last.
func TestSplitMatchesSlices(t *testing.T) {
	e, err := open()
	if err != nil {
		t.Fatal(err)
	}
	x := mx.Normal(mx.Key(e, 1), []int{2, 7, 6}, mx.Float32)
	for _, c := range []struct {
		indices []int
		axis    int
	}{{[]int{3}, 1}, {[]int{0, 2, 2, 5}, 1}, {[]int{3}, -1}} {
		t.Run(fmt.Sprintf("%v_axis%d", c.indices, c.axis), func(t *testing.T) {
			weights := func(parts []*mx.Array) *mx.Array { // Σ (i+1)·Σ part_i²: every part's gradient differs
				var total *mx.Array
				for i, p := range parts {
					term := mx.MulScalar(mx.Sum(mx.Multiply(p, p), false), float64(i+1))
					if total == nil {
						total = term
					} else {
						total = mx.Add(total, term)
					}
				}
				return total
			}
			run := func(split bool) (vals [][]float32, grad []float32) {
				_, grads := mx.ValueAndGrad(func(a []*mx.Array) []*mx.Array {
					var parts []*mx.Array
					if split {
						parts = mx.Split(a[0], c.indices, c.axis)
					} else {
						axis := c.axis
						if axis < 0 {
							axis += a[0].Ndim()
						}
						bounds := append(append([]int{0}, c.indices...), a[0].Dim(axis))
						for i := 0; i+1 < len(bounds); i++ {
							parts = append(parts, mx.SliceAxis(a[0], axis, bounds[i], bounds[i+1]))
						}
					}
					for _, p := range parts {
						vals = append(vals, p.Float32s())
					}
					return []*mx.Array{weights(parts)}
				})([]*mx.Array{x})
				return vals, grads[0].Float32s()
			}
			sv, sg := run(true)
			lv, lg := run(false)
			if len(sv) != len(lv) {
				t.Fatalf("%d parts, slices give %d", len(sv), len(lv))
			}
			for i := range sv {
				if fmt.Sprint(sv[i]) != fmt.Sprint(lv[i]) {
					t.Fatalf("part %d: %v, slices %v", i, sv[i], lv[i])
				}
			}
			for i := range sg {
				if math.Float32bits(sg[i]) != math.Float32bits(lg[i]) {
					t.Fatalf("gradient [%d]: %v, slices %v", i, sg[i], lg[i])
				}
			}
		})
	}
}
