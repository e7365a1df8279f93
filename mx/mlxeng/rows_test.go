//go:build mlx

package mlxeng

import (
	"math"
	"testing"

	"github.com/dgtune/dgtune/mx"
)

// TestTakesRowsChoice: takes of rows of 2-D bfloat16 or float32 arrays with an even row
// length, by 32- or 8-bit indices, go through the row kernels, and nothing else does. The
// choice is shape logic, so it runs on any device with the kernels' switch forced on.
func TestTakesRowsChoice(t *testing.T) {
	e, err := open()
	if err != nil {
		t.Fatal(err)
	}
	saved := e.rows.ok
	t.Cleanup(func() { e.rows.ok = saved })
	e.rows.ok = true
	for _, c := range []struct {
		name  string
		shape []int
		dt    mx.DType
		idx   mx.DType
		axis  int
		want  bool
	}{
		{"bfloat16 rows", []int{384, 2816}, mx.BFloat16, mx.Uint32, 0, true},
		{"float32 rows, axis −2", []int{5, 4}, mx.Float32, mx.Int32, -2, true},
		{"uint8 indices", []int{5, 4}, mx.Float32, mx.Uint8, 0, true},
		{"columns", []int{5, 4}, mx.Float32, mx.Int32, 1, false},
		{"3-D", []int{2, 5, 4}, mx.Float32, mx.Int32, 0, false},
		{"odd rows", []int{5, 3}, mx.Float32, mx.Int32, 0, false},
		{"float16", []int{5, 4}, mx.Float16, mx.Int32, 0, false},
		{"int64 indices", []int{5, 4}, mx.Float32, mx.Int64, 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			x := mx.Zeros(e, c.shape, c.dt)
			idx := mx.Zeros(e, []int{3}, c.idx)
			if got := e.takesRows(get(x.Handle()), get(idx.Handle()), c.axis); got != c.want {
				t.Errorf("takesRows = %v, want %v", got, c.want)
			}
		})
	}
}

// TestTakeRowsMatchesMLX: on a CUDA GPU the row kernels' take gives MLX's take bit for
// bit, and its gradient MLX's scatter-add bit for bit where each row is picked at most
// once (a permutation; negative indices) and within the rounding of the adds' order
// where rows are picked several times (the experts' dispatch: each token's row k times,
// in sorted order), against float64 sums — for the real 26B-A4B geometry's bfloat16
// rows and small float32 ones, with flat and 2-D indices.
func TestTakeRowsMatchesMLX(t *testing.T) {
	e, err := open()
	if err != nil {
		t.Fatal(err)
	}
	if !e.rows.ok {
		t.Skip("the row kernels run on a CUDA GPU only")
	}
	t.Cleanup(func() { e.rows.ok = true })
	for _, c := range []struct {
		name    string
		r, h    int
		dt      mx.DType
		idx     func(r int) []int32
		idxDims []int // nil: flat
		repeats bool
	}{
		{"permutation bfloat16 real", 3072, 2816, mx.BFloat16, func(r int) []int32 {
			p := make([]int32, r)
			for i := range p {
				p[i] = int32((i*1237 + 11) % r)
			}
			return p
		}, []int{384, 8}, false},
		{"negative float32", 50, 64, mx.Float32, func(r int) []int32 { return []int32{-1, 3, -50, 49, 0} }, nil, false},
		{"dispatch bfloat16 real", 384, 2816, mx.BFloat16, func(r int) []int32 {
			p := make([]int32, 8*r)
			for i := range p {
				p[i] = int32((i*7919 + 3) % (8 * r) / 8) // each token 8 times, scattered order
			}
			return p
		}, nil, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			x := mx.AsType(mx.Normal(mx.Key(e, 1), []int{c.r, c.h}, mx.Float32), c.dt)
			ids := c.idx(c.r)
			idx := mx.FromInt32(e, ids, len(ids))
			if c.idxDims != nil {
				idx = mx.Reshape(idx, c.idxDims...)
			}
			cot := mx.AsType(mx.Normal(mx.Key(e, 2), append(append([]int(nil), idx.Shape()...), c.h), mx.Float32), c.dt)
			run := func(kernels bool) (y, dx []float32) {
				e.rows.ok = kernels
				vals, grads := mx.ValueAndGrad(func(a []*mx.Array) []*mx.Array {
					y := mx.Take(a[0], idx, 0)
					return []*mx.Array{mx.Sum(mx.Multiply(mx.AsType(y, mx.Float32), mx.AsType(cot, mx.Float32)), false), y}
				})([]*mx.Array{x})
				return mx.AsType(vals[1], mx.Float32).Float32s(), mx.AsType(grads[0], mx.Float32).Float32s()
			}
			ky, kdx := run(true)
			my, mdx := run(false)
			for i := range my {
				if math.Float32bits(ky[i]) != math.Float32bits(my[i]) {
					t.Fatalf("take [%d]: kernels %v, MLX %v", i, ky[i], my[i])
				}
			}
			if !c.repeats {
				for i := range mdx {
					if math.Float32bits(kdx[i]) != math.Float32bits(mdx[i]) {
						t.Fatalf("dx [%d]: kernels %v, MLX %v", i, kdx[i], mdx[i])
					}
				}
				return
			}
			// Rows picked 8 times: each of the 8 adds rounds to bfloat16 (at most 2⁻⁸ of a
			// partial sum, which is at most Σ|g|), in an order that varies, as MLX's do.
			cs := mx.AsType(cot, mx.Float32).Float32s()
			want, abs := make([]float64, c.r*c.h), make([]float64, c.r*c.h)
			for j, r := range ids {
				for h := range c.h {
					want[int(r)*c.h+h] += float64(cs[j*c.h+h])
					abs[int(r)*c.h+h] += math.Abs(float64(cs[j*c.h+h]))
				}
			}
			for i, w := range want {
				tol := 8 * abs[i] / 256
				if d := math.Abs(float64(kdx[i]) - w); d > tol {
					t.Fatalf("dx [%d]: kernels %v, float64 %v (MLX %v, bound %v)", i, kdx[i], w, mdx[i], tol)
				}
				if d := math.Abs(float64(mdx[i]) - w); d > tol {
					t.Fatalf("dx [%d]: MLX %v, float64 %v (bound %v): the bound is wrong", i, mdx[i], w, tol)
				}
			}
		})
	}
}
