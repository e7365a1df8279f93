package sgemm

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
)

// packRowsOf returns a PackFunc for op(B) = Wᵀ where W [n, k] is row-major: op(B)[p, j] is
// W[j, p], the layout of a linear layer's weight in y = x·Wᵀ.
func packRowsOf(w []float32, k int) PackFunc {
	return func(dst []float32, pc, kb, j0, nt int) {
		for jr := 0; jr < nt; jr += PanelWidth {
			panel := dst[jr*kb : (jr+PanelWidth)*kb]
			clear(panel)
			for j := range min(PanelWidth, nt-jr) {
				for p, v := range w[(j0+jr+j)*k+pc:][:kb] {
					panel[p*PanelWidth+j] = v
				}
			}
		}
	}
}

// q4 is a toy 4-bit weight W [n, k]: codes in [0, 15], and per group of 64 along k a scale
// and a bias, W[j, p] = scale·code + bias in float32.
type q4 struct {
	n, k          int
	codes         []uint8
	scale, biases []float32
}

func newQ4(rng *rand.Rand, n, k int) q4 {
	w := q4{n: n, k: k, codes: make([]uint8, n*k), scale: make([]float32, n*k/64), biases: make([]float32, n*k/64)}
	for i := range w.codes {
		w.codes[i] = uint8(rng.IntN(16))
	}
	for i := range w.scale {
		w.scale[i] = float32(rng.NormFloat64() / 8)
		w.biases[i] = float32(rng.NormFloat64() / 8)
	}
	return w
}

func (w q4) at(j, p int) float32 {
	g := j*w.k/64 + p/64
	return w.scale[g]*float32(w.codes[j*w.k+p]) + w.biases[g]
}

func (w q4) dense() []float32 {
	out := make([]float32, w.n*w.k)
	for j := range w.n {
		for p := range w.k {
			out[j*w.k+p] = w.at(j, p)
		}
	}
	return out
}

// pack decodes straight into the panels, one group's scale and bias at a time.
func (w q4) pack(dst []float32, pc, kb, j0, nt int) {
	for jr := 0; jr < nt; jr += PanelWidth {
		panel := dst[jr*kb : (jr+PanelWidth)*kb]
		nn := min(PanelWidth, nt-jr)
		if nn < PanelWidth {
			clear(panel)
		}
		for j := range nn {
			row := j0 + jr + j
			codes := w.codes[row*w.k+pc:][:kb]
			for p0 := 0; p0 < kb; p0 += 64 {
				g := row*w.k/64 + (pc+p0)/64
				s, b := w.scale[g], w.biases[g]
				for p := p0; p < min(p0+64, kb); p++ {
					panel[p*PanelWidth+j] = s*float32(codes[p]) + b
				}
			}
		}
	}
}

// TestGemmPacked: a PackFunc gives exactly Gemm's bits on the same values — for a dense
// transposed B, and for a toy 4-bit weight decoded inside the packer versus Gemm on its
// decoded copy — and its k-blocks start on multiples of KBlock.
func TestGemmPacked(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, s := range [][3]int{{1, 64, 16}, {5, 192, 33}, {40, 320, 100}, {200, 640, 530}, {30, 320, 64}} {
		m, k, n := s[0], s[1], s[2]
		a := randMat(rng, m*k)
		w := newQ4(rng, n, k)
		dense := w.dense()
		want := make([]float32, m*n)
		Gemm(NoTrans, Transposed, m, n, k, a, k, dense, k, want, n, false)
		var mu sync.Mutex
		var calls [][2]int
		for name, pack := range map[string]PackFunc{"dense": packRowsOf(dense, k), "q4": w.pack} {
			got := make([]float32, m*n)
			GemmPacked(NoTrans, m, n, k, a, k, func(dst []float32, pc, kb, j0, nt int) {
				mu.Lock()
				calls = append(calls, [2]int{pc, kb})
				mu.Unlock()
				pack(dst, pc, kb, j0, nt)
			}, got, n, false)
			if !slices.Equal(got, want) {
				t.Errorf("M=%d K=%d N=%d %s: GemmPacked differs from Gemm", m, k, n, name)
			}
		}
		for _, c := range calls {
			if c[0]%KBlock != 0 || (c[1]%KBlock != 0 && c[0]+c[1] != k) {
				t.Fatalf("M=%d K=%d N=%d: k-block at %d of %d is not aligned to %d", m, k, n, c[0], c[1], KBlock)
			}
		}
	}
	msg := func() (msg string) {
		defer func() { msg = fmt.Sprint(recover()) }()
		GemmPacked(NoTrans, 2, 2, 2, make([]float32, 4), 2, nil, make([]float32, 4), 2, false)
		return "no panic"
	}()
	if !strings.Contains(msg, "without a pack function") {
		t.Errorf("GemmPacked(nil) panic %q, want one about the pack function", msg)
	}
}

// BenchmarkGemmPacked4Bit is x·Wᵀ with a 4-bit W [1024, 512] decoded inside the packer —
// the training-size quantized projection — against the same product on a dense W.
func BenchmarkGemmPacked4Bit(b *testing.B) {
	const m, k, n = 256, 512, 1024
	rng := rand.New(rand.NewPCG(1, 1))
	a := randMat(rng, m*k)
	w := newQ4(rng, n, k)
	c := make([]float32, m*n)
	b.Run("q4", func(b *testing.B) {
		for b.Loop() {
			GemmPacked(NoTrans, m, n, k, a, k, w.pack, c, n, false)
		}
		reportGFLOPs(b, 2*float64(m*n*k))
	})
	dense := w.dense()
	b.Run("dense", func(b *testing.B) {
		for b.Loop() {
			Gemm(NoTrans, Transposed, m, n, k, a, k, dense, k, c, n, false)
		}
		reportGFLOPs(b, 2*float64(m*n*k))
	})
}
