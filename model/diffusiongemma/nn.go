package diffusiongemma

import "github.com/dgtune/dgtune/mx"

// Linear is a bias-free projection y = x·Wᵀ with W [out, in]. The base checkpoint's
// linears are Dense or Quantized; LoRA wraps them (package lora).
type Linear interface {
	Forward(x *mx.Array) *mx.Array
	// Dims returns the input and output widths.
	Dims() (in, out int)
}

// Pass names the two passes that run the same layers: the causal encoder over the prompt
// and the bidirectional decoder over the canvas.
type Pass int

const (
	DecoderPass Pass = iota
	EncoderPass
)

func (p Pass) String() string {
	if p == EncoderPass {
		return "encoder"
	}
	return "decoder"
}

// PassLinear is a linear that computes differently in the two passes: a LoRA adapter whose
// encoder pass has its own low-rank weights (the way PEFT adapts transformers' encoder and
// decoder modules separately), or none. The layers call ForwardPass where a linear has it.
type PassLinear interface {
	Linear
	ForwardPass(x *mx.Array, p Pass) *mx.Array
}

// project is l applied to x in pass p.
func project(l Linear, p Pass, x *mx.Array) *mx.Array {
	if pl, ok := l.(PassLinear); ok {
		return pl.ForwardPass(x, p)
	}
	return l.Forward(x)
}

// Dense is an unquantized linear.
type Dense struct {
	W *mx.Array // [out, in]
}

func (d *Dense) Forward(x *mx.Array) *mx.Array { return mx.Matmul(x, mx.Transpose(d.W)) }
func (d *Dense) Dims() (int, int)              { return d.W.Dim(1), d.W.Dim(0) }

// LoRAFusedLinear is a base linear that computes base(x) + scale·(x·A)·B as one op with the
// composition's values, so that an adapter need not know the base's concrete type.
type LoRAFusedLinear interface {
	Linear
	ForwardLoRA(x, a, b *mx.Array, scale float64) *mx.Array
}

func (d *Dense) ForwardLoRA(x, a, b *mx.Array, scale float64) *mx.Array {
	return mx.LoRADense(x, d.W, a, b, scale)
}

// Quantized is an MLX affine-quantized linear (QuantizedLinear).
type Quantized struct {
	W, Scales, Biases *mx.Array // W uint32 [out, in·bits/32]; scales/biases [out, in/group]
	Bits, GroupSize   int
}

func (q *Quantized) Forward(x *mx.Array) *mx.Array {
	return mx.QuantizedMatmul(x, q.W, q.Scales, q.Biases, true, q.GroupSize, q.Bits)
}
func (q *Quantized) Dims() (int, int) { return q.W.Dim(-1) * 32 / q.Bits, q.W.Dim(-2) }

func (q *Quantized) ForwardLoRA(x, a, b *mx.Array, scale float64) *mx.Array {
	return mx.LoRAQuantized(x, q.W, q.Scales, q.Biases, q.GroupSize, q.Bits, a, b, scale)
}

// Dequantized returns the dense weight [out, in].
func (q *Quantized) Dequantized() *mx.Array {
	return mx.Dequantize(q.W, q.Scales, q.Biases, q.GroupSize, q.Bits)
}

// Embedding is the token table E [vocab, hidden], also the tied output head.
type Embedding struct {
	Dense *mx.Array  // [vocab, hidden] when unquantized
	Quant *Quantized // when quantized
}

// Lookup returns the rows of ids (any shape) → [..., hidden].
func (e *Embedding) Lookup(ids *mx.Array) *mx.Array {
	if e.Quant == nil {
		return mx.Take(e.Dense, ids, 0)
	}
	q := e.Quant
	w := mx.Take(q.W, ids, 0)
	s := mx.Take(q.Scales, ids, 0)
	b := mx.Take(q.Biases, ids, 0)
	return mx.Dequantize(w, s, b, q.GroupSize, q.Bits)
}

// AsLinear is the tied head h·Eᵀ → [..., vocab].
func (e *Embedding) AsLinear(h *mx.Array) *mx.Array {
	if e.Quant == nil {
		return mx.Matmul(h, mx.Transpose(e.Dense))
	}
	return e.Quant.Forward(h)
}

// MixRows is p·E for a distribution p over the vocabulary → [..., hidden] (the soft
// embedding of self-conditioning).
func (e *Embedding) MixRows(p *mx.Array) *mx.Array {
	if e.Quant == nil {
		return mx.Matmul(p, e.Dense)
	}
	q := e.Quant
	return mx.QuantizedMatmul(p, q.W, q.Scales, q.Biases, false, q.GroupSize, q.Bits)
}

// ExpertWeight is a stack of per-expert linears W [E, out, in] (SwitchLinear).
type ExpertWeight struct {
	Dense *mx.Array  // [E, out, in] when unquantized
	Quant *Quantized // W uint32 [E, out, in·bits/32] when quantized
}

// Experts is the number of experts, E.
func (w *ExpertWeight) Experts() int {
	if w.Quant != nil {
		return w.Quant.W.Dim(0)
	}
	return w.Dense.Dim(0)
}

// Gather computes, for each row r of x [T, in], x[r]·W[idx[r]]ᵀ → [T, out], as one
// product per expert (gather_mm / gather_qmm) — never a per-row copy of a weight.
// sorted promises idx is non-decreasing (rows grouped by expert; see sortedExperts).
func (w *ExpertWeight) Gather(x, idx *mx.Array, sorted bool) *mx.Array {
	if w.Quant != nil {
		q := w.Quant
		return mx.GatherQMM(x, q.W, q.Scales, q.Biases, idx, true, q.GroupSize, q.Bits, sorted)
	}
	return mx.GatherMM(x, mx.SwapAxes(w.Dense, 1, 2), idx, sorted)
}
