//go:build mlx

package mlxeng

import (
	"fmt"
	"math"
	"testing"

	"github.com/dgtune/dgtune/mx"
)

// TestLoRAAddChoice: LoRAAdd goes through the LoRA kernels for bfloat16 activations with
// widths that are multiples of 8 and float32 factors of rank 1 to 32, with at least one
// row, and nothing else does. The
// choice is shape logic, so it runs on any device with the kernels' switch forced on.
func TestLoRAAddChoice(t *testing.T) {
	e, err := open()
	if err != nil {
		t.Fatal(err)
	}
	saved := e.lora.ok
	t.Cleanup(func() { e.lora.ok = saved })
	e.lora.ok = true
	for _, c := range []struct {
		name      string
		x         []int
		xdt, fdt  mx.DType
		rank, out int
		want      bool
	}{
		{"real q_proj", []int{1, 384, 2816}, mx.BFloat16, mx.Float32, 8, 4096, true},
		{"2-D, rank 1", []int{5, 72}, mx.BFloat16, mx.Float32, 1, 104, true},
		{"K not a multiple of 8", []int{5, 70}, mx.BFloat16, mx.Float32, 8, 104, false},
		{"M not a multiple of 8", []int{5, 72}, mx.BFloat16, mx.Float32, 8, 100, false},
		{"rank 32", []int{5, 64}, mx.BFloat16, mx.Float32, 32, 64, true},
		{"rank 33", []int{5, 64}, mx.BFloat16, mx.Float32, 33, 64, false},
		{"float32 activations", []int{5, 64}, mx.Float32, mx.Float32, 8, 64, false},
		{"float16 activations", []int{5, 64}, mx.Float16, mx.Float32, 8, 64, false},
		{"bfloat16 factors", []int{5, 64}, mx.BFloat16, mx.BFloat16, 8, 64, false},
		{"no rows", []int{0, 64}, mx.BFloat16, mx.Float32, 8, 64, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			k := c.x[len(c.x)-1]
			base := mx.Zeros(e, append(append([]int(nil), c.x[:len(c.x)-1]...), c.out), c.xdt)
			x := mx.Zeros(e, c.x, c.xdt)
			a, b := mx.Zeros(e, []int{k, c.rank}, c.fdt), mx.Zeros(e, []int{c.rank, c.out}, c.fdt)
			if got := e.addsLoRA(get(base.Handle()), get(x.Handle()), get(a.Handle()), get(b.Handle())); got != c.want {
				t.Errorf("addsLoRA = %v, want %v", got, c.want)
			}
		})
	}
}

// TestLoRAAddMatchesComposition: on a CUDA GPU, LoRAAdd through the kernels and through
// MLX's composition (float32 products, TF32 off as the engine sets it) both lie within
// float32 rounding of float64 references — the output and the gradients of base, x, a
// and b — plus the bfloat16 roundings the composition makes (the scaled term and the
// sum; dx); base's gradient is the cotangent in both, bit for bit. At the real 26B-A4B
// geometry's q_proj (384 rows, 2816 → 4096, rank 8) and small odd shapes (3-D x, rank
// 13 and 32, widths that are not multiples of 32). Elsewhere it checks the composition alone.
func TestLoRAAddMatchesComposition(t *testing.T) {
	e, err := open()
	if err != nil {
		t.Fatal(err)
	}
	kernels := e.lora.ok // elsewhere only the composition is checked, against the same references
	t.Cleanup(func() { e.lora.ok = kernels })
	for _, c := range []struct {
		lead        []int // x's leading axes
		k, m, r     int
		alpha       float64
		factorScale float64
	}{
		{[]int{384}, 2816, 4096, 8, 2, 0.02},
		{[]int{1, 5}, 72, 104, 13, -1.5, 0.5},
		{[]int{9}, 64, 64, 32, 16, 0.1},
	} {
		t.Run(fmt.Sprintf("x%v_k%d_m%d_r%d", c.lead, c.k, c.m, c.r), func(t *testing.T) {
			n := 1
			for _, d := range c.lead {
				n *= d
			}
			bf := func(seed uint64, shape ...int) *mx.Array {
				return mx.AsType(mx.Normal(mx.Key(e, seed), shape, mx.Float32), mx.BFloat16)
			}
			x := bf(1, append(append([]int(nil), c.lead...), c.k)...)
			base := bf(2, append(append([]int(nil), c.lead...), c.m)...)
			cot := bf(3, append(append([]int(nil), c.lead...), c.m)...)
			a := mx.MulScalar(mx.Normal(mx.Key(e, 4), []int{c.k, c.r}, mx.Float32), c.factorScale)
			b := mx.MulScalar(mx.Normal(mx.Key(e, 5), []int{c.r, c.m}, mx.Float32), c.factorScale)
			run := func(on bool) [][]float32 {
				e.lora.ok = on
				vals, grads := mx.ValueAndGrad(func(p []*mx.Array) []*mx.Array {
					y := mx.LoRAAdd(p[0], p[1], p[2], p[3], c.alpha)
					return []*mx.Array{mx.Sum(mx.Multiply(mx.AsType(y, mx.Float32), mx.AsType(cot, mx.Float32)), false), y}
				})([]*mx.Array{base, x, a, b})
				out := [][]float32{mx.AsType(vals[1], mx.Float32).Float32s()}
				for _, g := range grads {
					out = append(out, mx.AsType(g, mx.Float32).Float32s())
				}
				return out
			}
			ref := loraReference(mx.AsType(x, mx.Float32).Float32s(), mx.AsType(base, mx.Float32).Float32s(),
				mx.AsType(cot, mx.Float32).Float32s(), a.Float32s(), b.Float32s(), n, c.k, c.m, c.r, c.alpha)
			comp, got := run(false), [][]float32(nil)
			if kernels {
				got = run(true)
			}
			names := []string{"out", "d base", "dx", "da", "db"}
			for i, name := range names {
				if got == nil {
					for j, w := range ref[i].want {
						if d := math.Abs(float64(comp[i][j]) - w); !(d <= ref[i].bound[j]) {
							t.Fatalf("%s [%d]: composition %v, float64 %v ± %.3g", name, j, comp[i][j], w, ref[i].bound[j])
						}
					}
					continue
				}
				if i == 1 {
					for j := range got[i] {
						if math.Float32bits(got[i][j]) != math.Float32bits(comp[i][j]) {
							t.Fatalf("%s [%d]: kernels %v, composition %v", name, j, got[i][j], comp[i][j])
						}
					}
					continue
				}
				for j, w := range ref[i].want {
					bound := ref[i].bound[j]
					if d := math.Abs(float64(got[i][j]) - w); !(d <= bound) {
						t.Fatalf("%s [%d]: kernels %v, float64 %v ± %.3g (composition %v)", name, j, got[i][j], w, bound, comp[i][j])
					}
					if d := math.Abs(float64(comp[i][j]) - w); !(d <= bound) {
						t.Fatalf("%s [%d]: composition %v, float64 %v ± %.3g: the bound is wrong", name, j, comp[i][j], w, bound)
					}
				}
			}
		})
	}
}

// loraValues are a float64 reference and each value's bound.
type loraValues struct{ want, bound []float64 }

// loraReference computes out = base + α·((x·a)·b) and, for the cotangent g of out, the
// gradients of x (g·α·bᵀ·aᵀ), a and b in float64, as TestLoRAAddMatchesComposition's
// references (index 1, base's gradient, is left empty: it is compared bit for bit). A
// bound is 2e-5 of the sum of its terms' magnitudes (float32 sums of up to a few
// thousand terms) plus, for a bfloat16 value, the half-ulps of the roundings the
// composition makes.
func loraReference(x, base, g, a, b []float32, n, k, m, r int, alpha float64) [5]loraValues {
	const eps, halfULP = 2e-5, 1.01 / 256
	t, ta := make([]float64, n*r), make([]float64, n*r) // x·a and Σ|terms|
	u, ua := make([]float64, n*r), make([]float64, n*r) // (α·g)·bᵀ
	for i := range n {
		for q := range r {
			for c := range k {
				p := float64(x[i*k+c]) * float64(a[c*r+q])
				t[i*r+q] += p
				ta[i*r+q] += math.Abs(p)
			}
			for j := range m {
				p := alpha * float64(g[i*m+j]) * float64(b[q*m+j])
				u[i*r+q] += p
				ua[i*r+q] += math.Abs(p)
			}
		}
	}
	var v [5]loraValues
	for i := range n {
		for j := range m {
			var y, ya float64
			for q := range r {
				y += t[i*r+q] * float64(b[q*m+j])
				ya += ta[i*r+q] * math.Abs(float64(b[q*m+j]))
			}
			term := alpha * y
			want := float64(base[i*m+j]) + term
			v[0].want = append(v[0].want, want)
			v[0].bound = append(v[0].bound, eps*(math.Abs(float64(base[i*m+j]))+math.Abs(alpha)*ya)+halfULP*(math.Abs(term)+math.Abs(want)))
		}
	}
	for i := range n {
		for c := range k {
			var s, sa float64
			for q := range r {
				s += u[i*r+q] * float64(a[c*r+q])
				sa += ua[i*r+q] * math.Abs(float64(a[c*r+q]))
			}
			v[2].want = append(v[2].want, s)
			v[2].bound = append(v[2].bound, eps*sa+halfULP*math.Abs(s))
		}
	}
	for c := range k {
		for q := range r {
			var s, sa float64
			for i := range n {
				s += float64(x[i*k+c]) * u[i*r+q]
				sa += math.Abs(float64(x[i*k+c])) * ua[i*r+q]
			}
			v[3].want = append(v[3].want, s)
			v[3].bound = append(v[3].bound, eps*sa)
		}
	}
	for q := range r {
		for j := range m {
			var s, sa float64
			for i := range n {
				p := alpha * float64(g[i*m+j])
				s += t[i*r+q] * p
				sa += ta[i*r+q] * math.Abs(p)
			}
			v[4].want = append(v[4].want, s)
			v[4].bound = append(v[4].bound, eps*sa)
		}
	}
	return v
}
