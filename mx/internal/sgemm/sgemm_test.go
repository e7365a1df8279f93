package sgemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// stored lays out a logical rows×cols matrix x (row-major) as sgemm reads it: transposed
// when t, with ld-1-cols of padding (filled with NaN, which must never be read) per row.
func stored(x []float32, rows, cols int, t Trans, pad int) ([]float32, int) {
	r, c := rows, cols
	if t {
		r, c = cols, rows
	}
	ld := c + pad
	s := make([]float32, max(r*ld, 0))
	for i := range s {
		s[i] = float32(math.NaN())
	}
	for i := range rows {
		for j := range cols {
			if t {
				s[j*ld+i] = x[i*cols+j]
			} else {
				s[i*ld+j] = x[i*cols+j]
			}
		}
	}
	return s, ld
}

func randMat(rng *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	return x
}

// intMat has entries in {-3..3}: every product and partial sum below 2^24 is an exact
// float32, so any correct kernel, in any order, returns exactly the integer result.
func intMat(rng *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.IntN(7) - 3)
	}
	return x
}

// ref returns c0 + a·b in float64 and, per element, Σ|a||b| + |c0| — the scale of the
// float32 rounding error (each of K roundings is at most 2^-24 of a partial sum).
func ref(a, b, c0 []float32, m, k, n int) (want, scale []float64) {
	want, scale = make([]float64, m*n), make([]float64, m*n)
	for i := range m {
		for j := range n {
			var s, abs float64
			if c0 != nil {
				s, abs = float64(c0[i*n+j]), math.Abs(float64(c0[i*n+j]))
			}
			for p := range k {
				v := float64(a[i*k+p]) * float64(b[p*n+j])
				s += v
				abs += math.Abs(v)
			}
			want[i*n+j], scale[i*n+j] = s, abs
		}
	}
	return want, scale
}

// gemmCase runs one product through p.run with kern on workers goroutines and returns C
// compacted to m×n. a and b are the logical (untransposed) matrices.
type gemmCase struct {
	m, k, n    int
	ta, tb     Trans
	padA, padB int
	padC       int
	a, b, c0   []float32 // c0 nil: overwrite
	kern       kernels
	workers    int
}

func (g gemmCase) run(t testing.TB) []float32 {
	t.Helper()
	as, lda := stored(g.a, g.m, g.k, g.ta, g.padA)
	bs, ldb := stored(g.b, g.k, g.n, g.tb, g.padB)
	ldc := g.n + g.padC
	cs := make([]float32, g.m*ldc)
	for i := range cs {
		cs[i] = float32(math.NaN())
	}
	for i := range g.m {
		for j := range g.n {
			if g.c0 != nil {
				cs[i*ldc+j] = g.c0[i*g.n+j]
			}
		}
	}
	p := problem{ta: g.ta, tb: g.tb, m: g.m, n: g.n, k: g.k, a: as, lda: lda, b: bs, ldb: ldb, c: cs, ldc: ldc, acc: g.c0 != nil}
	if err := p.check(); err != nil {
		t.Fatalf("check: %v", err)
	}
	p.run(g.kern, g.workers)
	out := make([]float32, g.m*g.n)
	for i := range g.m {
		copy(out[i*g.n:(i+1)*g.n], cs[i*ldc:i*ldc+g.n])
		for j := g.n; j < ldc; j++ {
			if !math.IsNaN(float64(cs[i*ldc+j])) {
				t.Fatalf("C padding at row %d col %d was written", i, j)
			}
		}
	}
	return out
}

type namedKernels struct {
	name string
	k    kernels
}

// kernelSets lists the portable kernel and, when the CPU has them, the assembly kernels.
func kernelSets() []namedKernels {
	ks := []namedKernels{{"go", goKernels()}}
	if kernelName() != "go" {
		ks = append(ks, namedKernels{kernelName(), defaultKernels()})
	}
	return ks
}

// TestHandValues checks products small enough to do by hand.
func TestHandValues(t *testing.T) {
	// A = [1 2; 3 4], B = [5 6; 7 8]:
	// A·B = [1·5+2·7 1·6+2·8; 3·5+4·7 3·6+4·8] = [19 22; 43 50].
	// Aᵀ·B = [1·5+3·7 1·6+3·8; 2·5+4·7 2·6+4·8] = [26 30; 38 44].
	// A·Bᵀ = [1·5+2·6 1·7+2·8; 3·5+4·6 3·7+4·8] = [17 23; 39 53].
	// Aᵀ·Bᵀ = (B·A)ᵀ, B·A = [5+18 10+24; 7+24 14+32] = [23 34; 31 46] → [23 31; 34 46].
	a := []float32{1, 2, 3, 4}
	b := []float32{5, 6, 7, 8}
	tests := []struct {
		ta, tb Trans
		want   []float32
	}{
		{NoTrans, NoTrans, []float32{19, 22, 43, 50}},
		{Transposed, NoTrans, []float32{26, 30, 38, 44}},
		{NoTrans, Transposed, []float32{17, 23, 39, 53}},
		{Transposed, Transposed, []float32{23, 31, 34, 46}},
	}
	for _, kn := range kernelSets() {
		for _, tc := range tests {
			c := make([]float32, 4)
			p := problem{ta: tc.ta, tb: tc.tb, m: 2, n: 2, k: 2, a: a, lda: 2, b: b, ldb: 2, c: c, ldc: 2}
			p.run(kn.k, 1)
			if !slices.Equal(c, tc.want) {
				t.Errorf("%s: Gemm(%v, %v) = %v, want %v", kn.name, tc.ta, tc.tb, c, tc.want)
			}
		}
	}
	// Accumulate: C = [1 1; 1 1] + A·B = [20 23; 44 51].
	c := []float32{1, 1, 1, 1}
	Gemm(NoTrans, NoTrans, 2, 2, 2, a, 2, b, 2, c, 2, true)
	if want := []float32{20, 23, 44, 51}; !slices.Equal(c, want) {
		t.Errorf("Gemm accumulate = %v, want %v", c, want)
	}
	// A row vector times a column: [1 2 3]·[4 5 6]ᵀ = 4+10+18 = 32.
	c = []float32{-1}
	Matmul(c, []float32{1, 2, 3}, []float32{4, 5, 6}, 1, 3, 1)
	if c[0] != 32 {
		t.Errorf("Matmul 1×3·3×1 = %v, want 32", c[0])
	}
}

// TestZeroSizes: an empty inner dimension makes the product zero (or leaves C alone when
// accumulating), and empty M or N touches nothing.
func TestZeroSizes(t *testing.T) {
	c := []float32{7, 7, 7, 7, 7, 7}
	Gemm(NoTrans, NoTrans, 2, 3, 0, nil, 1, nil, 3, c, 3, false)
	if want := make([]float32, 6); !slices.Equal(c, want) {
		t.Errorf("K=0 overwrite: C = %v, want %v", c, want)
	}
	c = []float32{7, 7, 7, 7, 7, 7}
	Gemm(NoTrans, NoTrans, 2, 3, 0, nil, 1, nil, 3, c, 3, true)
	if want := []float32{7, 7, 7, 7, 7, 7}; !slices.Equal(c, want) {
		t.Errorf("K=0 accumulate: C = %v, want %v", c, want)
	}
	// Matmul passes K as A's stride, so an empty K means a zero stride.
	c = []float32{7, 7, 7, 7, 7, 7}
	Matmul(c, nil, nil, 2, 0, 3)
	if want := make([]float32, 6); !slices.Equal(c, want) {
		t.Errorf("Matmul K=0: C = %v, want %v", c, want)
	}
	Gemm(NoTrans, NoTrans, 0, 3, 4, nil, 4, make([]float32, 12), 3, nil, 3, false)
	Gemm(NoTrans, NoTrans, 2, 0, 4, make([]float32, 8), 4, nil, 1, nil, 1, false)
}

// TestExactIntegers runs every layout, edge size and kernel on small-integer matrices,
// where the result is exact whatever the summation order, so any indexing or packing
// slip shows up as a wrong integer.
func TestExactIntegers(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	sizes := []int{1, 7, 17, 33, 65, 129}
	for _, kn := range kernelSets() {
		for _, m := range sizes {
			for _, n := range sizes {
				k := []int{1, 7, 33, 257, 515}[(m+n)%5]
				a, b, c0 := intMat(rng, m*k), intMat(rng, k*n), intMat(rng, m*n)
				want, _ := ref(a, b, c0, m, k, n)
				for _, tr := range [][2]Trans{{NoTrans, NoTrans}, {Transposed, NoTrans}, {NoTrans, Transposed}, {Transposed, Transposed}} {
					g := gemmCase{m: m, k: k, n: n, ta: tr[0], tb: tr[1], padA: 3, padB: 1, padC: 2, a: a, b: b, c0: c0, kern: kn.k, workers: 3}
					got := g.run(t)
					for i := range got {
						if float64(got[i]) != want[i] {
							t.Fatalf("%s M=%d K=%d N=%d ta=%v tb=%v: C[%d,%d] = %v, want %v", kn.name, m, k, n, tr[0], tr[1], i/n, i%n, got[i], want[i])
						}
					}
				}
			}
		}
	}
}

// TestAgainstFloat64 compares random normal products with a float64 reference. Each
// output is a sum of K rounded float32 terms; its error is bounded by about
// K·2^-24·Σ|a||b|, and for random signs grows like √K·2^-24·Σ|a||b|, so 1e-5 of
// Σ|a||b| (+|c0|) holds with a wide margin for K ≤ 1025.
func TestAgainstFloat64(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	shapes := [][3]int{{1, 1, 1}, {7, 9, 17}, {17, 33, 7}, {33, 257, 65}, {65, 513, 129}, {129, 1025, 33}, {1, 515, 300}, {150, 301, 530}}
	for _, kn := range kernelSets() {
		for _, s := range shapes {
			m, k, n := s[0], s[1], s[2]
			a, b := randMat(rng, m*k), randMat(rng, k*n)
			for _, c0 := range [][]float32{nil, randMat(rng, m*n)} {
				want, scale := ref(a, b, c0, m, k, n)
				got := gemmCase{m: m, k: k, n: n, a: a, b: b, c0: c0, kern: kn.k, workers: 2}.run(t)
				for i := range got {
					if d := math.Abs(float64(got[i]) - want[i]); d > 1e-5*scale[i] {
						t.Fatalf("%s M=%d K=%d N=%d acc=%v: C[%d,%d] = %v, want %v (error %.3g > 1e-5·%.3g)", kn.name, m, k, n, c0 != nil, i/n, i%n, got[i], want[i], d, scale[i])
					}
				}
			}
		}
	}
}

// TestAssemblyMatchesGo: the assembly and portable kernels differ only by fused versus
// separate rounding, so they agree to within the float32 error bound of the product.
func TestAssemblyMatchesGo(t *testing.T) {
	if kernelName() == "go" {
		t.Skip("no assembly kernel on this CPU or build")
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for _, s := range [][3]int{{6, 16, 16}, {13, 300, 40}, {64, 512, 1024}, {1, 2816, 96}} {
		m, k, n := s[0], s[1], s[2]
		a, b := randMat(rng, m*k), randMat(rng, k*n)
		_, scale := ref(a, b, nil, m, k, n)
		asm := gemmCase{m: m, k: k, n: n, a: a, b: b, kern: defaultKernels(), workers: 2}.run(t)
		gk := gemmCase{m: m, k: k, n: n, a: a, b: b, kern: goKernels(), workers: 2}.run(t)
		same := 0
		for i := range asm {
			if d := math.Abs(float64(asm[i] - gk[i])); d > 2e-6*scale[i] {
				t.Fatalf("M=%d K=%d N=%d: C[%d,%d] asm %v, go %v (|Δ| %.3g > 2e-6·%.3g)", m, k, n, i/n, i%n, asm[i], gk[i], d, scale[i])
			}
			if asm[i] == gk[i] {
				same++
			}
		}
		t.Logf("M=%d K=%d N=%d: %d of %d elements bitwise equal", m, k, n, same, len(asm))
	}
}

// TestDeterministic: the output bits do not depend on how many goroutines run nor on
// GOMAXPROCS.
func TestDeterministic(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, s := range [][3]int{{200, 300, 530}, {1, 700, 2000}, {12, 515, 1000}, {300, 64, 100}, {130, 700, 600}} {
		m, k, n := s[0], s[1], s[2]
		a, b := randMat(rng, m*k), randMat(rng, k*n)
		base := gemmCase{m: m, k: k, n: n, a: a, b: b, kern: defaultKernels(), workers: 1}.run(t)
		for _, w := range []int{2, 4, 7} {
			got := gemmCase{m: m, k: k, n: n, a: a, b: b, kern: defaultKernels(), workers: w}.run(t)
			if !slices.Equal(got, base) {
				t.Fatalf("M=%d K=%d N=%d: %d workers differ from 1", m, k, n, w)
			}
		}
		prev := runtime.GOMAXPROCS(0)
		for _, procs := range []int{1, 2, 4} {
			runtime.GOMAXPROCS(procs)
			c := make([]float32, m*n)
			Matmul(c, a, b, m, k, n)
			if !slices.Equal(c, base) {
				runtime.GOMAXPROCS(prev)
				t.Fatalf("M=%d K=%d N=%d: GOMAXPROCS=%d differs from 1 worker", m, k, n, procs)
			}
		}
		runtime.GOMAXPROCS(prev)
	}
}

// TestTilingInvariant: an element's bits do not depend on where it falls in the tiling nor
// on the path that computes it. Rows r0.. and columns 3.. of A·B are recomputed as a
// product of their own, shifted against the micro-tile grid, with few rows (the row
// kernel) and with many (the tile kernel).
func TestTilingInvariant(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	const m, k, n = 150, 301, 530
	a, b := randMat(rng, m*k), randMat(rng, k*n)
	for _, kn := range kernelSets() {
		whole := make([]float32, m*n)
		(&problem{m: m, n: n, k: k, a: a, lda: k, b: b, ldb: n, c: whole, ldc: n}).run(kn.k, 2)
		for _, r := range [][2]int{{5, 1}, {7, 3}, {1, smallM}, {5, smallM + 1}, {2, 100}} {
			r0, rows, sn := r[0], r[1], n-3
			sub := make([]float32, rows*sn)
			(&problem{m: rows, n: sn, k: k, a: a[r0*k:], lda: k, b: b[3:], ldb: n, c: sub, ldc: sn}).run(kn.k, 2)
			for i := range rows {
				if !slices.Equal(sub[i*sn:(i+1)*sn], whole[(r0+i)*n+3:(r0+i+1)*n]) {
					t.Fatalf("%s: rows %d..%d recomputed alone differ in row %d", kn.name, r0, r0+rows, r0+i)
				}
			}
		}
	}
}

// TestBadInput: misuse panics with a message naming the operand and both numbers.
func TestBadInput(t *testing.T) {
	z := func(n int) []float32 { return make([]float32, n) }
	tests := []struct {
		name string
		call func()
		want []string
	}{
		{"negative M", func() { Gemm(NoTrans, NoTrans, -1, 2, 2, z(4), 2, z(4), 2, z(4), 2, false) }, []string{"negative dimension", "M=-1"}},
		{"negative K", func() { Gemm(NoTrans, NoTrans, 2, 2, -3, z(4), 2, z(4), 2, z(4), 2, false) }, []string{"negative dimension", "K=-3"}},
		{"short A", func() { Gemm(NoTrans, NoTrans, 2, 2, 3, z(5), 3, z(6), 2, z(4), 2, false) }, []string{"A has 5 values, need 6", "2×3"}},
		{"short transposed A", func() { Gemm(Transposed, NoTrans, 2, 2, 3, z(5), 2, z(6), 2, z(4), 2, false) }, []string{"A has 5 values, need 6", "3×2"}},
		{"A stride", func() { Gemm(NoTrans, NoTrans, 2, 2, 3, z(6), 2, z(6), 2, z(4), 2, false) }, []string{"A stride 2 < 3"}},
		{"short B", func() { Gemm(NoTrans, NoTrans, 2, 2, 3, z(6), 3, z(5), 2, z(4), 2, false) }, []string{"B has 5 values, need 6"}},
		{"B stride transposed", func() { Gemm(NoTrans, Transposed, 2, 2, 3, z(6), 3, z(6), 2, z(4), 2, false) }, []string{"B stride 2 < 3"}},
		{"short C", func() { Gemm(NoTrans, NoTrans, 2, 2, 3, z(6), 3, z(6), 2, z(4), 3, false) }, []string{"C has 4 values, need 5"}},
		{"C stride", func() { Gemm(NoTrans, NoTrans, 2, 2, 3, z(6), 3, z(6), 2, z(4), 1, false) }, []string{"C stride 1 < 2"}},
		{"Matmul short", func() { Matmul(z(3), z(4), z(4), 2, 2, 2) }, []string{"C has 3 values, need 4"}},
	}
	for _, tc := range tests {
		msg := func() (msg string) {
			defer func() { msg = fmt.Sprint(recover()) }()
			tc.call()
			return "no panic"
		}()
		for _, w := range tc.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: panic %q, want it to contain %q", tc.name, msg, w)
			}
		}
	}
}
