package quant

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// randQ quantizes a random stack of E [rows, cols] matrices and returns it
// with its dequantized form, the dense reference the kernels must match, and
// |bias| spread to the same dense layout (see checkMatmul).
func randQ(t testing.TB, rng *rand.Rand, E, rows, cols int, p Params) (packed []uint32, scales, biases, dense, absBias []float32) {
	w := make([]float32, E*rows*cols)
	for i := range w {
		w[i] = float32(rng.NormFloat64())
	}
	packed, scales, biases, err := Quantize(w, E*rows, cols, p)
	if err != nil {
		t.Fatalf("Quantize(%v): %v", p, err)
	}
	absBias = make([]float32, len(w))
	for i := range absBias {
		absBias[i] = abs32(biases[i/p.GroupSize])
	}
	return packed, scales, biases, Dequantize(packed, scales, biases, E*rows, cols, p), absBias
}

func randX(rng *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	return x
}

// checkMatmul compares y[M, N] with x[M, K]·B in float64, where B[k, n] is
// at b[k*kStride + n*nStride] and absBias[same index] is the |bias| of its
// group. The kernels compute Σ x·(s·q + b) as s·Σ x·q + b·Σ x, whose
// float32 rounding scales with the terms x·s·q and x·b, each bounded by
// |x|·(|B| + |bias|). Accumulating K of them is off by about √K·2⁻²⁴ of
// Σ|x|(|B|+|bias|), so 1e-5 of that sum is a tight bound that a wrong code,
// scale, bias or index breaks by orders of magnitude.
func checkMatmul(t *testing.T, name string, y, x, b, absBias []float32, M, N, K, kStride, nStride int) {
	t.Helper()
	for m := range M {
		for n := range N {
			var ref, mag float64
			for k := range K {
				i := k*kStride + n*nStride
				ref += float64(x[m*K+k]) * float64(b[i])
				mag += math.Abs(float64(x[m*K+k])) * (math.Abs(float64(b[i])) + float64(absBias[i]))
			}
			if d := math.Abs(float64(y[m*N+n]) - ref); d > 1e-5*mag+1e-30 {
				t.Fatalf("%s: y[%d, %d] = %v, want %v (|Σ| %g)", name, m, n, y[m*N+n], ref, mag)
			}
		}
	}
}

func TestMatmulT(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	shapes := []struct{ M, N, K int }{
		{1, 7, 128},   // fused single-row path, N not a multiple of the tile
		{2, 8, 256},   // 2×4 block only
		{3, 9, 128},   // 2×4 + 1×4 blocks + a partial tile
		{5, 4, 384},   //
		{9, 70, 512},  // over the parallel threshold
		{1, 600, 512}, // parallel single-row path
	}
	for _, bits := range allBits {
		for _, gs := range allGroups {
			p := Params{Bits: bits, GroupSize: gs}
			for _, s := range shapes {
				if s.K%gs != 0 {
					continue
				}
				packed, scales, biases, w, ab := randQ(t, rng, 1, s.N, s.K, p)
				x := randX(rng, s.M*s.K)
				y := make([]float32, s.M*s.N)
				for i := range y {
					y[i] = float32(math.NaN()) // y must be overwritten
				}
				MatmulT(y, x, s.M, packed, scales, biases, s.N, s.K, p)
				// Wᵀ[k, n] = W[n, k] = w[n*K + k]
				checkMatmul(t, p.String()+" MatmulT", y, x, w, ab, s.M, s.N, s.K, 1, s.K)
			}
		}
	}
}

func TestMatmul(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	shapes := []struct{ M, K, N int }{
		{1, 7, 128},   // K not a multiple of 4
		{2, 8, 256},   //
		{3, 13, 384},  //
		{1, 700, 512}, // parallel single row
		{6, 90, 1024}, // parallel, several column blocks
		{300, 6, 256}, // tall x: narrow column blocks
	}
	for _, bits := range allBits {
		for _, gs := range allGroups {
			p := Params{Bits: bits, GroupSize: gs}
			for _, s := range shapes {
				if s.N%gs != 0 {
					continue
				}
				packed, scales, biases, w, ab := randQ(t, rng, 1, s.K, s.N, p)
				x := randX(rng, s.M*s.K)
				for i := range x[:min(len(x), 3*s.K)] {
					if i%5 < 4 {
						x[i] = 0 // exercise the zero-skip with a partly sparse row
					}
				}
				y := make([]float32, s.M*s.N)
				for i := range y {
					y[i] = float32(math.NaN())
				}
				Matmul(y, x, s.M, packed, scales, biases, s.K, s.N, p)
				checkMatmul(t, p.String()+" Matmul", y, x, w, ab, s.M, s.N, s.K, s.N, 1)
			}
		}
	}
}

// TestGather checks each row against the dense product with its own expert,
// with unsorted, repeated and unused experts and one expert big enough to
// be split across goroutines.
func TestGather(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	const E = 4
	cases := []struct {
		idx  []int32
		N, K int
	}{
		{[]int32{2}, 12, 128},
		{[]int32{3, 0, 3, 3, 1, 0}, 20, 256},
		{[]int32{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, 128, 512},
	}
	for _, bits := range []int{3, 4, 8} {
		for _, gs := range allGroups {
			p := Params{Bits: bits, GroupSize: gs}
			for _, c := range cases {
				M, N, K := len(c.idx), c.N, c.K
				x := randX(rng, M*K)

				// transposed: stack [E, N, K]
				packed, scales, biases, w, ab := randQ(t, rng, E, N, K, p)
				y := make([]float32, M*N)
				GatherMatmulT(y, x, M, c.idx, packed, scales, biases, E, N, K, p, false)
				for m, e := range c.idx {
					lo, hi := int(e)*N*K, (int(e)+1)*N*K
					checkMatmul(t, p.String()+" GatherMatmulT", y[m*N:(m+1)*N], x[m*K:(m+1)*K], w[lo:hi], ab[lo:hi], 1, N, K, 1, K)
				}

				// non-transposed: stack [E, K, N], quantized along N (N%gs needed)
				if N%gs != 0 {
					continue
				}
				packed, scales, biases, w, ab = randQ(t, rng, E, K, N, p)
				GatherMatmul(y, x, M, c.idx, packed, scales, biases, E, K, N, p, false)
				for m, e := range c.idx {
					lo, hi := int(e)*K*N, (int(e)+1)*K*N
					checkMatmul(t, p.String()+" GatherMatmul", y[m*N:(m+1)*N], x[m*K:(m+1)*K], w[lo:hi], ab[lo:hi], 1, N, K, N, 1)
				}
			}
		}
	}
}

// TestEmptyBatch: M = 0 is a valid empty product. It writes nothing (the spare capacity
// of y keeps its sentinel), leaves the inputs as they were, and still checks the weight
// geometry (a weight of the wrong size panics even with no rows).
func TestEmptyBatch(t *testing.T) {
	p := Params{Bits: 4, GroupSize: 32}
	w := make([]uint32, 4*8) // [4, 64], or a stack [2, 2, 64]
	s := make([]float32, 4*2)
	for i := range w {
		w[i] = uint32(0x9e3779b9 * (i + 1))
	}
	for i := range s {
		s[i] = float32(i) + 0.5
	}
	w0, s0 := slices.Clone(w), slices.Clone(s)
	const sentinel = float32(-12345)
	buf := []float32{sentinel, sentinel, sentinel, sentinel}
	y := buf[:0]
	calls := map[string]func(){
		"MatmulT":       func() { MatmulT(y, nil, 0, w, s, s, 4, 64, p) },
		"Matmul":        func() { Matmul(y, nil, 0, w[:16], s[:4], s[:4], 2, 64, p) },
		"GatherMatmulT": func() { GatherMatmulT(y, nil, 0, nil, w, s, s, 2, 2, 64, p, false) },
		"GatherMatmul":  func() { GatherMatmul(y, nil, 0, nil, w, s, s, 2, 2, 64, p, false) },
	}
	for name, call := range calls {
		call()
		if slices.ContainsFunc(buf, func(v float32) bool { return v != sentinel }) {
			t.Errorf("%s with M = 0 wrote into y's spare capacity: %v", name, buf)
		}
		if !slices.Equal(w, w0) || !slices.Equal(s, s0) {
			t.Errorf("%s with M = 0 changed its inputs", name)
		}
	}
	msg := func() (m string) {
		defer func() { m = fmt.Sprint(recover()) }()
		MatmulT(nil, nil, 0, w[:31], s, s, 4, 64, p)
		return "no panic"
	}()
	if !strings.Contains(msg, "quant.MatmulT") || !strings.Contains(msg, "weight") {
		t.Errorf("M = 0 with a short weight: %q, want a panic naming quant.MatmulT and the weight", msg)
	}
}

// TestKernelMisuse: kernels panic on programmer errors with a message that
// names the op and the sizes involved.
func TestKernelMisuse(t *testing.T) {
	p := Params{Bits: 4, GroupSize: 32}
	w := make([]uint32, 4*8) // [4, 64] at 4 bits
	s := make([]float32, 4*2)
	tests := []struct {
		name, want string
		call       func()
	}{
		{"MatmulT short x", "quant.MatmulT: x has 63 values, want [1, 64]",
			func() { MatmulT(make([]float32, 4), make([]float32, 63), 1, w, s, s, 4, 64, p) }},
		{"MatmulT short y", "quant.MatmulT: y has 3 values, want [1, 4]",
			func() { MatmulT(make([]float32, 3), make([]float32, 64), 1, w, s, s, 4, 64, p) }},
		{"MatmulT weight size", "quant.MatmulT: weight [1, 5, 64]",
			func() { MatmulT(make([]float32, 5), make([]float32, 64), 1, w, s, s, 5, 64, p) }},
		{"MatmulT bad bits", "quant.MatmulT: quant: unsupported bits",
			func() {
				MatmulT(make([]float32, 4), make([]float32, 64), 1, w, s, s, 4, 64, Params{Bits: 7, GroupSize: 32})
			}},
		{"Matmul K not a group multiple", "quant.Matmul: weight [1, 4, 48]",
			func() { Matmul(make([]float32, 48), make([]float32, 4), 1, w, s, s, 4, 48, p) }},
		{"Matmul negative M", "quant.Matmul: x has 0 values, want [-1, 4]",
			func() { Matmul(nil, nil, -1, w, s, s, 4, 64, p) }},
		{"GatherMatmulT bad index", "quant.GatherMatmulT: index 2 of row 1 outside [0, 2)",
			func() {
				GatherMatmulT(make([]float32, 4), make([]float32, 128), 2, []int32{0, 2}, w, s, s, 2, 2, 64, p, false)
			}},
		{"GatherMatmul index count", "quant.GatherMatmul: 1 indices for 2 rows",
			func() {
				// stack [2, K=2, N=64] is the same 32 words as [4, 64]
				GatherMatmul(make([]float32, 128), make([]float32, 4), 2, []int32{0}, w, s, s, 2, 2, 64, p, false)
			}},
		{"Dequantize biases short", "quant.Dequantize: weight [1, 4, 64]",
			func() { Dequantize(w, s, s[:7], 4, 64, p) }},
	}
	for _, tc := range tests {
		func() {
			defer func() {
				r := recover()
				msg, _ := r.(string)
				if !strings.HasPrefix(msg, tc.want) {
					t.Errorf("%s: panic %q, want prefix %q", tc.name, msg, tc.want)
				}
			}()
			tc.call()
		}()
	}
}
