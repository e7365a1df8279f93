package mx

import (
	"fmt"
	"slices"
)

// RMSNorm normalises the last axis: x / sqrt(mean(x²) + eps) · weight, accumulating in
// float32. weight may be nil (RMSNormNoScale).
func RMSNorm(x, weight *Array, eps float64) *Array {
	var wh Handle
	if weight != nil {
		sameEngine("rms_norm", x, weight)
		if weight.Ndim() != 1 || weight.Dim(0) != x.Dim(-1) {
			panic(fmt.Sprintf("mx: rms_norm: weight %v for x %v", weight.Shape(), x.Shape()))
		}
		wh = weight.h
	}
	return Wrap(x.e, x.e.RMSNorm(x.h, wh, eps))
}

// RoPE rotates the first dims features of the last axis of x, shaped [..., S, D], for
// positions offset..offset+S-1. Rotate-half layout unless traditional.
// With freqs (shape [dims/2]) pair i rotates by angle pos·scale/freqs[i]; otherwise by
// pos·scale·base^(-2i/dims).
func RoPE(x *Array, dims int, traditional bool, base float64, scale float64, offset int, freqs *Array) *Array {
	d := x.Dim(-1)
	if dims <= 0 || dims > d || dims%2 != 0 {
		panic(fmt.Sprintf("mx: rope: dims %d for head size %d", dims, d))
	}
	p := RoPEParams{Dims: dims, Traditional: traditional, Base: base, Scale: scale, Offset: offset}
	if freqs != nil {
		sameEngine("rope", x, freqs)
		if freqs.Ndim() != 1 || freqs.Dim(0) != dims/2 {
			panic(fmt.Sprintf("mx: rope: freqs %v for dims %d", freqs.Shape(), dims))
		}
		p.Freqs = freqs.h
		p.Base = 0
	} else if base <= 0 {
		panic("mx: rope: base must be positive without freqs")
	}
	return Wrap(x.e, x.e.RoPE(x.h, p))
}

// NormRoPEr is the optional capability of an engine that computes NormRoPE as one op;
// it returns nil where it does not take the arguments, and NormRoPE composes.
type NormRoPEr interface {
	NormRoPE(x, weight Handle, eps float64, p RoPEParams) Handle
}

// NormRoPE is the attention prologue of the queries or the keys: x [B, L, H, D] normed
// over D with weight [D] (RMSNorm), moved to [B, H, L, D] and rotated over all D features
// for positions offset..offset+L−1 with freqs (RoPE, rotate-half) —
// RoPE(Transpose(RMSNorm(x, weight, eps), 0, 2, 1, 3), D, false, 0, scale, offset, freqs)
// — as one op where the engine has it (NormRoPEr), with that composition's values up to
// rounding; elsewhere the composition itself.
func NormRoPE(x, weight *Array, eps, scale float64, offset int, freqs *Array) *Array {
	if weight == nil || freqs == nil {
		panic("mx: norm_rope: weight and freqs are required")
	}
	sameEngine("norm_rope", x, weight)
	sameEngine("norm_rope", x, freqs)
	if x.Ndim() != 4 || weight.Ndim() != 1 || weight.Dim(0) != x.Dim(3) || freqs.Ndim() != 1 || freqs.Dim(0) != x.Dim(3)/2 || x.Dim(3)%2 != 0 {
		panic(fmt.Sprintf("mx: norm_rope: x %v (want [B, L, H, D], D even), weight %v (want [D]) and freqs %v (want [D/2])",
			x.Shape(), weight.Shape(), freqs.Shape()))
	}
	if n, ok := x.e.(NormRoPEr); ok {
		p := RoPEParams{Dims: x.Dim(3), Scale: scale, Offset: offset, Freqs: freqs.h}
		if h := n.NormRoPE(x.h, weight.h, eps, p); h != nil {
			return Wrap(x.e, h)
		}
	}
	return RoPE(Transpose(RMSNorm(x, weight, eps), 0, 2, 1, 3), x.Dim(3), false, 0, scale, offset, freqs)
}

// ScaledDotProductAttention computes softmax(q·kᵀ·scale + mask)·v with q [B, Hq, Lq, D],
// k and v [B, Hkv, Lk, D] (Hq a multiple of Hkv: query head h uses kv head h/(Hq/Hkv)).
// mask, optional, is boolean (true = may attend) and broadcasts to [B, Hq, Lq, Lk].
func ScaledDotProductAttention(q, k, v *Array, scale float64, mask *Array) *Array {
	e := sameEngine("sdpa", q, k, v)
	qs, ks, vs := q.Shape(), k.Shape(), v.Shape()
	if len(qs) != 4 || len(ks) != 4 || len(vs) != 4 || ks[1] != vs[1] || ks[2] != vs[2] ||
		qs[0] != ks[0] || qs[3] != ks[3] || ks[1] == 0 || qs[1]%ks[1] != 0 {
		panic(fmt.Sprintf("mx: sdpa: q %v k %v v %v", qs, ks, vs))
	}
	var mh Handle
	if mask != nil {
		sameEngine("sdpa", q, mask)
		if mask.DType() != Bool {
			panic("mx: sdpa: mask must be bool")
		}
		if _, err := BroadcastShapes(mask.Shape(), []int{qs[0], qs[1], qs[2], ks[2]}); err != nil {
			panic(fmt.Sprintf("mx: sdpa: mask %v for scores [%d %d %d %d]", mask.Shape(), qs[0], qs[1], qs[2], ks[2]))
		}
		mh = mask.h
	}
	return Wrap(e, e.ScaledDotProductAttention(q.h, k.h, v.h, scale, mh))
}

// AttentionJoiner is the optional capability of an engine for which one masked attention
// over several blocks of query rows costs less than one call per block: MLX-CUDA, where a
// head size without a fused kernel makes each call a composition of a dozen launches
// forward and more backward. JoinsAttention reports it for queries of dtype dt and head
// size headDim (keys' and values' too).
type AttentionJoiner interface {
	JoinsAttention(dt DType, headDim int) bool
}

// JoinsAttention reports whether e prefers one masked ScaledDotProductAttention over
// several blocks of query rows to one call per block (AttentionJoiner); false on an
// engine without the capability. The values are the same either way, to the engine's
// rounding: a masked key adds exact zeros.
func JoinsAttention(e Engine, dt DType, headDim int) bool {
	j, ok := e.(AttentionJoiner)
	return ok && j.JoinsAttention(dt, headDim)
}

// GELUTanh is the tanh approximation 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), a
// single engine op (OpGELUTanh) with its own VJP. Integer inputs give float32.
func GELUTanh(x *Array) *Array { return unary(OpGELUTanh, x) }

// GeGLU is GELUTanh(gate)·up for float arrays of one shape, as one engine op: the go
// engine makes one pass and keeps no GELU temporary for the backward (its VJP
// recomputes the activation from gate); the mlx engine composes MLX's ops, or on CUDA
// for bfloat16 runs its own kernels with the composition's forward values.
func GeGLU(gate, up *Array) *Array {
	e := sameEngine("geglu", gate, up)
	if !slices.Equal(gate.Shape(), up.Shape()) || !gate.DType().IsFloat() || !up.DType().IsFloat() {
		panic(fmt.Sprintf("mx: geglu: gate %v %s and up %v %s must be float arrays of one shape", gate.Shape(), gate.DType(), up.Shape(), up.DType()))
	}
	return Wrap(e, e.GeGLU(gate.h, up.h))
}

// GeGLUSplitter is the optional capability of an engine that computes GeGLUSplit as one
// op, with a VJP that writes both halves' cotangents into one array; it returns nil where
// it does not take x, and GeGLUSplit composes.
type GeGLUSplitter interface {
	GeGLUSplit(x Handle) Handle
}

// GeGLUSplit is GeGLU of the two halves of x's last axis — gelu_tanh(x[..., :I])·
// x[..., I:] for a float x [..., 2I], a fused gate/up projection's output — as one op on
// an engine that has it (GeGLUSplitter), where the backward then needs neither the two
// slices nor a zero-padded cotangent for each and their sum; elsewhere the composition
// of Split (one op where the engine has it) and GeGLU. Both give the same values.
func GeGLUSplit(x *Array) *Array {
	w := x.Dim(-1)
	if w%2 != 0 || !x.DType().IsFloat() {
		panic(fmt.Sprintf("mx: geglu_split: x %v %s must be a float array with an even last axis", x.Shape(), x.DType()))
	}
	if s, ok := x.e.(GeGLUSplitter); ok {
		if h := s.GeGLUSplit(x.h); h != nil {
			return Wrap(x.e, h)
		}
	}
	halves := Split(x, []int{w / 2}, -1)
	return GeGLU(halves[0], halves[1])
}

// TakeWeightedSummer is the optional capability of an engine that computes
// TakeWeightedSum as one op.
type TakeWeightedSummer interface {
	TakeWeightedSum(y, idx, w Handle) Handle
}

// TakeWeightedSum is Σ_k w[..., k]·y[idx[..., k], :]: rows of y [R, H] picked by the
// integer idx [..., K] and summed with the float weights w (idx's shape) → [..., H]. It is
// the mixture of experts' combine — each token's K expert outputs, weighted by the router —
// as one op on an engine that has it (TakeWeightedSummer), where the forward reads each
// picked row once and the backward writes each row's cotangent once instead of
// materialising [..., K, H] three times; elsewhere the composition Take, Multiply, Sum
// over K, with the same values.
func TakeWeightedSum(y, idx, w *Array) *Array {
	e := sameEngine("take_weighted_sum", y, idx)
	sameEngine("take_weighted_sum", y, w)
	if y.Ndim() != 2 || !idx.DType().IsInteger() || !w.DType().IsFloat() || !y.DType().IsFloat() || !slices.Equal(idx.Shape(), w.Shape()) || idx.Ndim() < 1 {
		panic(fmt.Sprintf("mx: take_weighted_sum: y %v %s (want [R, H] float), idx %v %s (integer) and w %v %s (float, idx's shape)",
			y.Shape(), y.DType(), idx.Shape(), idx.DType(), w.Shape(), w.DType()))
	}
	if s, ok := e.(TakeWeightedSummer); ok {
		return Wrap(e, s.TakeWeightedSum(y.h, idx.h, w.h))
	}
	ks := idx.Shape()
	picked := Take(y, Reshape(idx, idx.Size()), 0)                    // [Π ks, H]
	picked = Reshape(picked, append(slices.Clone(ks), y.Dim(1))...)   // [..., K, H]
	return Sum(Multiply(picked, ExpandDims(w, -1)), false, len(ks)-1) // [..., H]
}

// ExpertOrderer is the optional capability of an engine that computes ExpertOrder as
// one op; it returns nils where it does not take the ids, and ExpertOrder composes.
type ExpertOrderer interface {
	ExpertOrder(idx Handle, experts int) (order, inverse Handle)
}

// ExpertOrder sorts the expert ids idx [n] (int32, each in [0, experts)) by expert, as a
// mixture of experts groups its (token, slot) pairs before the experts' products: order
// [n] is the stable argsort of idx (positions by non-decreasing id, ties in position
// order) and inverse [n] the argsort of order (order[inverse[i]] = i), both int32. An
// engine that has the op (ExpertOrderer) may compute both in one pass; elsewhere, and for
// ids outside [0, experts) on any engine without it, the two argsorts. (An engine with the
// op gives any order for ids outside the range, but never an index outside [0, n).)
func ExpertOrder(idx *Array, experts int) (order, inverse *Array) {
	if idx.Ndim() != 1 || idx.DType() != Int32 || experts < 1 {
		panic(fmt.Sprintf("mx: expert_order: idx %v %s (want [n] int32) among %d experts", idx.Shape(), idx.DType(), experts))
	}
	if s, ok := idx.e.(ExpertOrderer); ok {
		if o, inv := s.ExpertOrder(idx.h, experts); o != nil {
			return Wrap(idx.e, o), Wrap(idx.e, inv)
		}
	}
	order = Argsort(idx, 0)
	return order, Argsort(order, 0)
}

// Quantize packs the last axis of w (MLX affine quantization).
func Quantize(w *Array, groupSize, bits int) (wq, scales, biases *Array) {
	checkQuant("quantize", w.Dim(-1), groupSize, bits)
	a, b, c := w.e.Quantize(w.h, QuantParams{GroupSize: groupSize, Bits: bits})
	return Wrap(w.e, a), Wrap(w.e, b), Wrap(w.e, c)
}

// Dequantize unpacks an MLX affine-quantized weight.
func Dequantize(wq, scales, biases *Array, groupSize, bits int) *Array {
	e := sameEngine("dequantize", wq, scales, biases)
	checkQuantArrays("dequantize", wq, scales, biases, groupSize, bits)
	return Wrap(e, e.Dequantize(wq.h, scales.h, biases.h, QuantParams{GroupSize: groupSize, Bits: bits}))
}

// QuantizedMatmul is x·Wᵀ (transpose) or x·W with W quantized along its last axis.
// W is 2-D: [N, K] packed when transpose, [K, N] packed otherwise.
func QuantizedMatmul(x, wq, scales, biases *Array, transpose bool, groupSize, bits int) *Array {
	e := sameEngine("quantized_matmul", x, wq, scales, biases)
	checkQuantArrays("quantized_matmul", wq, scales, biases, groupSize, bits)
	rows, cols := wq.Dim(-2), wq.Dim(-1)*32/bits
	k := cols
	if !transpose {
		k = rows
	}
	if x.Dim(-1) != k || wq.Ndim() != 2 {
		panic(fmt.Sprintf("mx: quantized_matmul: x %v with weight [%d %d] transpose=%v", x.Shape(), rows, cols, transpose))
	}
	return Wrap(e, e.QuantizedMatmul(x.h, wq.h, scales.h, biases.h, transpose, QuantParams{GroupSize: groupSize, Bits: bits}))
}

// GatherQMM multiplies each row of x by the expert weight picked by rhsIndices:
// x [..., K] with rhsIndices of shape [...] (x's leading shape), W [E, N, K] packed
// (transpose) or [E, K, N]; the result is [..., N]. sortedIndices promises that the
// indices, flattened, never decrease — the rows come grouped by expert, as MLX's
// sorted_indices=True — so an engine can compute one contiguous product per expert
// without sorting; the go engine panics when the promise is broken.
func GatherQMM(x, wq, scales, biases, rhsIndices *Array, transpose bool, groupSize, bits int, sortedIndices bool) *Array {
	e := sameEngine("gather_qmm", x, wq, scales, biases, rhsIndices)
	checkQuantArrays("gather_qmm", wq, scales, biases, groupSize, bits)
	if wq.Ndim() != 3 {
		panic(fmt.Sprintf("mx: gather_qmm: weight %v must be [E, rows, packed]", wq.Shape()))
	}
	rows, cols := wq.Dim(1), wq.Dim(2)*32/bits
	k := cols
	if !transpose {
		k = rows
	}
	xs := x.Shape()
	if xs[len(xs)-1] != k || !rhsIndices.DType().IsInteger() || prod(xs[:len(xs)-1]) != rhsIndices.Size() {
		panic(fmt.Sprintf("mx: gather_qmm: x %v indices %v weight %v transpose=%v", xs, rhsIndices.Shape(), wq.Shape(), transpose))
	}
	return Wrap(e, e.GatherQMM(x.h, wq.h, scales.h, biases.h, rhsIndices.h, transpose, QuantParams{GroupSize: groupSize, Bits: bits}, sortedIndices))
}

// GatherMM multiplies each row of x by the expert matrix picked by rhsIndices:
// x [..., K] with rhsIndices of shape [...] (x's leading shape), w [E, K, N]; the
// result is [..., N], row r being x[r]·w[rhsIndices[r]]. It is MLX's gather_mm(x[...,
// None, :], w, rhs_indices=rhsIndices, sorted_indices=sortedIndices) without the unit
// axis; sortedIndices means what it means for GatherQMM. The VJP reaches x and w; pass
// a swapped stack (SwapAxes(W, 1, 2) of a W [E, N, K]) for x·W[e]ᵀ, which neither
// engine copies.
func GatherMM(x, w, rhsIndices *Array, sortedIndices bool) *Array {
	e := sameEngine("gather_mm", x, w, rhsIndices)
	xs, ws := x.Shape(), w.Shape()
	if len(xs) < 1 || len(ws) != 3 || xs[len(xs)-1] != ws[1] || !rhsIndices.DType().IsInteger() || prod(xs[:len(xs)-1]) != rhsIndices.Size() {
		panic(fmt.Sprintf("mx: gather_mm: x %v indices %v %s weight %v", xs, rhsIndices.Shape(), rhsIndices.DType(), ws))
	}
	if !x.DType().IsFloat() || !w.DType().IsFloat() {
		panic(fmt.Sprintf("mx: gather_mm: x %s and weight %s must be float", x.DType(), w.DType()))
	}
	return Wrap(e, e.GatherMM(x.h, w.h, rhsIndices.h, sortedIndices))
}

func checkQuant(op string, cols, groupSize, bits int) {
	switch bits {
	case 2, 3, 4, 5, 6, 8:
	default:
		panic(fmt.Sprintf("mx: %s: bits %d not in {2,3,4,5,6,8}", op, bits))
	}
	switch groupSize {
	case 32, 64, 128:
	default:
		panic(fmt.Sprintf("mx: %s: group size %d not in {32,64,128}", op, groupSize))
	}
	if cols%groupSize != 0 {
		panic(fmt.Sprintf("mx: %s: last axis %d not a multiple of group size %d", op, cols, groupSize))
	}
}

func checkQuantArrays(op string, wq, scales, biases *Array, groupSize, bits int) {
	if wq.DType() != Uint32 {
		panic(fmt.Sprintf("mx: %s: packed weight has dtype %s, want uint32", op, wq.DType()))
	}
	ws := wq.Shape()
	if len(ws) < 2 || (ws[len(ws)-1]*32)%bits != 0 {
		panic(fmt.Sprintf("mx: %s: packed weight %v for %d bits", op, ws, bits))
	}
	cols := ws[len(ws)-1] * 32 / bits
	checkQuant(op, cols, groupSize, bits)
	want := append(append([]int(nil), ws[:len(ws)-1]...), cols/groupSize)
	for _, a := range []*Array{scales, biases} {
		s := a.Shape()
		if len(s) != len(want) {
			panic(fmt.Sprintf("mx: %s: scales/biases %v for packed weight %v (want %v)", op, s, ws, want))
		}
		for i := range s {
			if s[i] != want[i] {
				panic(fmt.Sprintf("mx: %s: scales/biases %v for packed weight %v (want %v)", op, s, ws, want))
			}
		}
	}
}

// LoRALinearer is the optional capability of an engine that computes a LoRA-adapted
// linear layer as one op (LoRADense, LoRAQuantized). scales and biases are nil for a
// dense w [N, K]; otherwise w is packed [N, K·bits/32] and p its quantization.
type LoRALinearer interface {
	LoRALinear(x, w, scales, biases, a, b Handle, p QuantParams, alpha float64) Handle
}

// LoRADense is x·wᵀ + alpha·(x·a)·b — diffusiongemma's Dense linear (w [N, K]) with a
// LoRA adapter a [K, r], b [r, N] and no dropout — for float32 x [..., K]: one op on an
// engine that has it (LoRALinearer), where each block of the base product takes its
// low-rank term while in cache, in the forward and for dx in the backward; elsewhere
// (and for other dtypes) the composition AddMM(Matmul(x, wᵀ), Matmul(x, a), b, alpha, 1).
// The forward values are the composition's to the bit; dx = g·w + dxa·aᵀ is summed in
// one place instead of by the backward walk.
func LoRADense(x, w, a, b *Array, alpha float64) *Array {
	e := sameEngine("lora_dense", x, w, a, b)
	checkLoRA("lora_dense", x, w.Shape(), a, b)
	if f, ok := e.(LoRALinearer); ok && allFloat32(x, w, a, b) {
		return Wrap(e, f.LoRALinear(x.h, w.h, nil, nil, a.h, b.h, QuantParams{}, alpha))
	}
	return AddMM(Matmul(x, Transpose(w)), Matmul(x, a), b, alpha, 1)
}

// LoRAQuantized is LoRADense on diffusiongemma's Quantized linear: the base is
// QuantizedMatmul(x, wq, scales, biases, true, groupSize, bits), wq [N, K·bits/32].
func LoRAQuantized(x, wq, scales, biases *Array, groupSize, bits int, a, b *Array, alpha float64) *Array {
	e := sameEngine("lora_quantized", x, wq, scales, biases, a, b)
	checkQuantArrays("lora_quantized", wq, scales, biases, groupSize, bits)
	if wq.Ndim() != 2 {
		panic(fmt.Sprintf("mx: lora_quantized: packed weight %v must be 2-D", wq.Shape()))
	}
	checkLoRA("lora_quantized", x, []int{wq.Dim(0), wq.Dim(1) * 32 / bits}, a, b)
	if f, ok := e.(LoRALinearer); ok && allFloat32(x, scales, biases, a, b) {
		return Wrap(e, f.LoRALinear(x.h, wq.h, scales.h, biases.h, a.h, b.h, QuantParams{GroupSize: groupSize, Bits: bits}, alpha))
	}
	return AddMM(QuantizedMatmul(x, wq, scales, biases, true, groupSize, bits), Matmul(x, a), b, alpha, 1)
}

// LoRAAdder is the optional capability of an engine that adds a LoRA adapter's term to
// a base linear's output as one op (LoRAAdd). ok false leaves these arrays to the
// composition.
type LoRAAdder interface {
	LoRAAdd(base, x, a, b Handle, alpha float64) (h Handle, ok bool)
}

// LoRAAdd is base + AsType(alpha·((x·a)·b), x's dtype) for activations x [..., K] and
// base [..., N] of one dtype, and factors a [K, r], b [r, N] (float32 for training):
// a LoRA adapter's term on its base linear's output with the activations narrower than
// the factors (bfloat16 compute). An engine that has it (LoRAAdder) may compute it as
// one op — MLX-CUDA's composition took ~12 kernels forward and backward, most of them
// tiny — with the composition's values up to float32 rounding of the sums; elsewhere it
// is the composition Add(base, AsType(MulScalar(Matmul(Matmul(x, a), b), alpha),
// x.DType())).
func LoRAAdd(base, x, a, b *Array, alpha float64) *Array {
	e := sameEngine("lora_add", base, x, a, b)
	checkLoRA("lora_add", x, []int{b.Dim(-1), x.Dim(-1)}, a, b)
	if bs, xs := base.Shape(), x.Shape(); len(bs) != len(xs) || !slices.Equal(bs[:len(bs)-1], xs[:len(xs)-1]) || bs[len(bs)-1] != b.Dim(-1) || base.DType() != x.DType() {
		panic(fmt.Sprintf("mx: lora_add: base %v %s for x %v %s and b %v (want x's dtype and leading axes, b's last axis)",
			bs, base.DType(), xs, x.DType(), b.Shape()))
	}
	if f, ok := e.(LoRAAdder); ok {
		if h, ok := f.LoRAAdd(base.h, x.h, a.h, b.h, alpha); ok {
			return Wrap(e, h)
		}
	}
	return Add(base, AsType(MulScalar(Matmul(Matmul(x, a), b), alpha), x.DType()))
}

// checkLoRA checks x [..., K] against a base weight of logical shape [N, K] and the
// factors a [K, r], b [r, N].
func checkLoRA(op string, x *Array, w []int, a, b *Array) {
	as, bs := a.Shape(), b.Shape()
	if x.Ndim() < 1 || len(w) != 2 || len(as) != 2 || len(bs) != 2 || x.Dim(-1) != w[1] || as[0] != w[1] || bs[0] != as[1] || bs[1] != w[0] {
		panic(fmt.Sprintf("mx: %s: x %v, weight %v, a %v, b %v (want x [..., K], weight [N, K], a [K, r], b [r, N])", op, x.Shape(), w, as, bs))
	}
}

func allFloat32(xs ...*Array) bool {
	for _, x := range xs {
		if x.DType() != Float32 {
			return false
		}
	}
	return true
}
