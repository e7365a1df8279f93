package quant

import (
	"fmt"
	"math"
	"sync/atomic"
)

// Quantize is mx.quantize(w, group_size, bits, mode="affine") for a
// row-major float32 matrix w[rows, cols], quantized along cols. It returns
// packed [rows, PackedCols(cols, Bits)] and scales, biases [rows,
// cols/GroupSize]. Codes are bit-identical to MLX's CPU kernel on float32
// input; for a bf16 checkpoint round scales and biases to bf16 afterwards,
// as MLX does (its codes are computed with the unrounded float scale too).
func Quantize(w []float32, rows, cols int, p Params) (packed []uint32, scales, biases []float32, err error) {
	if err := p.Validate(); err != nil {
		return nil, nil, nil, fmt.Errorf("quantize [%d, %d]: %w", rows, cols, err)
	}
	if err := p.checkCols(cols); err != nil {
		return nil, nil, nil, fmt.Errorf("quantize [%d, %d]: %w", rows, cols, err)
	}
	if rows <= 0 || rows > math.MaxInt/cols || len(w) != rows*cols {
		return nil, nil, nil, fmt.Errorf("quantize [%d, %d]: %w: have %d values",
			rows, cols, ErrShape, len(w))
	}
	gs := p.GroupSize
	wpg := gs * p.Bits / 32
	nGroups := len(w) / gs
	packed = make([]uint32, nGroups*wpg)
	scales = make([]float32, nGroups)
	biases = make([]float32, nGroups)
	// The finiteness check runs inside the parallel loop, group by group: as a separate
	// serial pass it was a third of a conversion's time on 16 cores. The error names the
	// first non-finite value of the whole matrix, whichever worker met it.
	var firstBad atomic.Int64
	firstBad.Store(math.MaxInt64)
	forEach(nGroups, nGroups*gs*8, func() func(lo, hi int) {
		var codes [128]uint8
		return func(lo, hi int) {
			for g := lo; g < hi; g++ {
				group := w[g*gs : (g+1)*gs]
				if i := firstNonFinite(group); i >= 0 {
					storeMin(&firstBad, int64(g*gs+i))
					continue
				}
				scales[g], biases[g] = quantizeGroup(codes[:gs], group, p.Bits)
				packCodes(packed[g*wpg:(g+1)*wpg], codes[:gs], p.Bits)
			}
		}
	})
	if i := int(firstBad.Load()); i != math.MaxInt64 {
		return nil, nil, nil, fmt.Errorf("quantize [%d, %d]: %w %v at [%d, %d]",
			rows, cols, ErrNonFinite, w[i], i/cols, i%cols)
	}
	return packed, scales, biases, nil
}

// firstNonFinite returns the index of the first NaN or ±Inf in w, or −1.
func firstNonFinite(w []float32) int {
	for i, v := range w {
		// An exponent of all ones is Inf or NaN.
		if math.Float32bits(v)&0x7f800000 == 0x7f800000 {
			return i
		}
	}
	return -1
}

// storeMin lowers a to v if v is smaller.
func storeMin(a *atomic.Int64, v int64) {
	for {
		cur := a.Load()
		if v >= cur || a.CompareAndSwap(cur, v) {
			return
		}
	}
}

// quantizeGroup follows MLX's affine_quantize step for step, in float32
// like MLX does. The extreme of larger magnitude ("edge") becomes the bias
// and is hit exactly by code 0; the scale is nudged to edge/q0 so that 0.0
// also lands exactly on a code (−q0). When |max| ≥ |min| the scale is
// negative, so codes count down from max. A group whose edge rounds to code
// 0 (all values ≈ 0) keeps bias 0 and the plain range/(2^bits−1) scale.
//
// This is the CPU kernel (and the ops.cpp fallback). MLX's Metal kernel
// differs in two ways a re-quantized checkpoint could show: it rounds halves
// away from zero, and its running max starts at 0, so a group of only
// negative values is fitted to [min, 0] rather than [min, max].
func quantizeGroup(codes []uint8, w []float32, bits int) (scale, bias float32) {
	nBins := float32(int(1)<<bits - 1)
	const eps = float32(1e-7)
	wMin, wMax := float32(math.Inf(1)), float32(math.Inf(-1))
	for _, v := range w {
		wMin = min(wMin, v)
		wMax = max(wMax, v)
	}
	minIsEdge := abs32(wMin) > abs32(wMax)
	scale = max((wMax-wMin)/nBins, eps)
	edge := wMax
	if minIsEdge {
		edge = wMin
	} else {
		scale = -scale
	}
	if q0 := rint(edge / scale); q0 != 0 {
		scale = edge / q0
		bias = edge
	}
	for j, v := range w {
		codes[j] = uint8(min(max(rint((v-bias)/scale), 0), nBins))
	}
	return scale, bias
}

func abs32(v float32) float32 { return math.Float32frombits(math.Float32bits(v) &^ (1 << 31)) }

// rint rounds half to even, as std::rint does in the default rounding mode.
func rint(v float32) float32 { return float32(math.RoundToEven(float64(v))) }

// Dequantize is mx.dequantize for a [rows, cols] weight: it returns the
// dense row-major matrix. It panics if the slices do not match the sizes.
func Dequantize(packed []uint32, scales, biases []float32, rows, cols int, p Params) []float32 {
	checkQ("Dequantize", packed, scales, biases, 1, rows, cols, p)
	out := make([]float32, rows*cols)
	wpr, ng := PackedCols(cols, p.Bits), cols/p.GroupSize
	forEach(rows, rows*cols*4, func() func(lo, hi int) {
		return func(lo, hi int) {
			for r := lo; r < hi; r++ {
				dequantizeRow(out[r*cols:(r+1)*cols], packed[r*wpr:(r+1)*wpr],
					scales[r*ng:(r+1)*ng], biases[r*ng:(r+1)*ng], p)
			}
		}
	})
	return out
}

// checkQ panics unless packed/scales/biases hold a stack of `stack`
// [rows, cols] quantized matrices in format p.
func checkQ(op string, packed []uint32, scales, biases []float32, stack, rows, cols int, p Params) {
	if err := p.Validate(); err != nil {
		panic(fmt.Sprintf("quant.%s: %v", op, err))
	}
	if err := p.checkCols(cols); err != nil {
		panic(fmt.Sprintf("quant.%s: weight [%d, %d, %d]: %v", op, stack, rows, cols, err))
	}
	nw := stack * rows * PackedCols(cols, p.Bits)
	ng := stack * rows * (cols / p.GroupSize)
	if stack <= 0 || rows <= 0 || len(packed) != nw || len(scales) != ng || len(biases) != ng {
		panic(fmt.Sprintf("quant.%s: weight [%d, %d, %d] (%v) wants %d words and %d scales/biases, have %d, %d, %d",
			op, stack, rows, cols, p, nw, ng, len(packed), len(scales), len(biases)))
	}
}
