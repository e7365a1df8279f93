package quant

import (
	"fmt"
	"runtime"

	"github.com/dgtune/dgtune/mx/internal/sgemm"
)

// qmat views one quantized [rows, cols] matrix (one expert of a stack).
type qmat struct {
	packed         []uint32
	scales, biases []float32
	rows, cols     int
	p              Params
	wpr, ng        int // words and groups per row
}

func newQmat(packed []uint32, scales, biases []float32, rows, cols int, p Params) qmat {
	return qmat{packed, scales, biases, rows, cols, p, PackedCols(cols, p.Bits), cols / p.GroupSize}
}

// expert is matrix e of a stack of [rows, cols] matrices.
func (w qmat) expert(e int) qmat {
	nw, ng := w.rows*w.wpr, w.rows*w.ng
	w.packed = w.packed[e*nw : (e+1)*nw]
	w.scales = w.scales[e*ng : (e+1)*ng]
	w.biases = w.biases[e*ng : (e+1)*ng]
	return w
}

func (w qmat) row(r int) (words []uint32, scales, biases []float32) {
	return w.packed[r*w.wpr : (r+1)*w.wpr], w.scales[r*w.ng : (r+1)*w.ng], w.biases[r*w.ng : (r+1)*w.ng]
}

// scratch is one goroutine's working memory, grown on demand.
type scratch struct {
	f32  []float32
	code [128]float32
}

func (s *scratch) floats(n int) []float32 {
	if cap(s.f32) < n {
		s.f32 = make([]float32, n)
	}
	return s.f32[:n]
}

func checkDense(op, name string, have, rows, cols int) {
	if rows < 0 || have != rows*cols {
		panic(fmt.Sprintf("quant.%s: %s has %d values, want [%d, %d]", op, name, have, rows, cols))
	}
}

// MatmulT is quantized_matmul(x, W, transpose=true): y[M, N] = x[M, K]·Wᵀ
// with W[N, K] quantized along K — the QuantizedLinear forward. y is
// overwritten. It panics if the sizes disagree.
func MatmulT(y, x []float32, M int, packed []uint32, scales, biases []float32, N, K int, p Params) {
	checkQ("MatmulT", packed, scales, biases, 1, N, K, p)
	checkDense("MatmulT", "x", len(x), M, K)
	checkDense("MatmulT", "y", len(y), M, N)
	if M == 0 {
		return
	}
	w := newQmat(packed, scales, biases, N, K, p)
	if M >= gemmMinRows {
		gemmT(y, x, M, w)
		return
	}
	matmulTRows(y, x, M, w)
}

// MatmulTThen is MatmulT that, when the product goes through sgemm (at least
// gemmMinRows rows of x), runs then on every block of y as sgemm finishes it and reports
// true; with fewer rows y is computed without it and it reports false.
func MatmulTThen(y, x []float32, M int, packed []uint32, scales, biases []float32, N, K int, p Params, then sgemm.Epilogue) bool {
	if M < gemmMinRows {
		MatmulT(y, x, M, packed, scales, biases, N, K, p)
		return false
	}
	checkQ("MatmulTThen", packed, scales, biases, 1, N, K, p)
	checkDense("MatmulTThen", "x", len(x), M, K)
	checkDense("MatmulTThen", "y", len(y), M, N)
	w := newQmat(packed, scales, biases, N, K, p)
	sgemm.GemmPackedThen(sgemm.NoTrans, M, w.rows, w.cols, x, w.cols, w.packT, y, w.rows, then)
	return true
}

// MatmulThen is Matmul with MatmulTThen's epilogue.
func MatmulThen(y, x []float32, M int, packed []uint32, scales, biases []float32, K, N int, p Params, then sgemm.Epilogue) bool {
	if M < gemmMinRows {
		Matmul(y, x, M, packed, scales, biases, K, N, p)
		return false
	}
	checkQ("MatmulThen", packed, scales, biases, 1, K, N, p)
	checkDense("MatmulThen", "x", len(x), M, K)
	checkDense("MatmulThen", "y", len(y), M, N)
	w := newQmat(packed, scales, biases, K, N, p)
	sgemm.GemmPackedThen(sgemm.NoTrans, M, w.cols, w.rows, x, w.rows, w.packN, y, w.cols, then)
	return true
}

// matmulTRows is MatmulT through the kernels for few rows of x.
func matmulTRows(y, x []float32, M int, w qmat) {
	N, K := w.rows, w.cols
	tiles := (N + tileN - 1) / tileN
	forEach(tiles, M*N*K, func() func(lo, hi int) {
		var sc scratch
		return func(lo, hi int) {
			mmT(y, x, M, w, lo*tileN, min(hi*tileN, N), &sc)
		}
	})
}

// Matmul is quantized_matmul(x, W, transpose=false): y[M, N] = x[M, K]·W
// with W[K, N] quantized along N — used for p·E and for the input gradient
// of a quantized linear. y is overwritten. It panics if the sizes disagree.
func Matmul(y, x []float32, M int, packed []uint32, scales, biases []float32, K, N int, p Params) {
	checkQ("Matmul", packed, scales, biases, 1, K, N, p)
	checkDense("Matmul", "x", len(x), M, K)
	checkDense("Matmul", "y", len(y), M, N)
	if M == 0 {
		return
	}
	w := newQmat(packed, scales, biases, K, N, p)
	if M >= gemmMinRows {
		gemmN(y, x, M, w)
		return
	}
	matmulRows(y, x, M, w)
}

// matmulRows is Matmul through the kernels for few rows of x.
func matmulRows(y, x []float32, M int, w qmat) {
	K, N, p := w.rows, w.cols, w.p
	// Split columns (on group boundaries) and, when there are too few
	// column groups to feed every goroutine, rows of x too.
	cParts, mParts := 1, 1
	if procs := runtime.GOMAXPROCS(0); procs > 1 && M*N*K >= minParallelWork {
		want := 2 * procs
		cParts = min(want, N/p.GroupSize)
		mParts = min(M, (want+cParts-1)/cParts)
	}
	cStep := ((N+cParts-1)/cParts + p.GroupSize - 1) / p.GroupSize * p.GroupSize
	mStep := (M + mParts - 1) / mParts
	nc := (N + cStep - 1) / cStep
	items := nc * ((M + mStep - 1) / mStep)
	forEach(items, M*N*K, func() func(lo, hi int) {
		var sc scratch
		return func(lo, hi int) {
			for i := lo; i < hi; i++ {
				c0, m0 := i%nc*cStep, i/nc*mStep
				m1 := min(m0+mStep, M)
				mm(y[m0*N:], x[m0*K:], m1-m0, w, c0, min(c0+cStep, N), &sc)
			}
		}
	})
}
