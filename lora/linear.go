package lora

import (
	"fmt"

	"github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/mx"
)

// Linear is a base linear plus a low-rank residual: y = base(x) + cast(scale·((x·A)·B)).
// It implements diffusiongemma.Linear, so it can stand in any linear slot of the model, and
// diffusiongemma.PassLinear: the encoder pass may use its own factors, or none (Encoder).
type Linear struct {
	Base diffusiongemma.Linear
	A    *mx.Array // [in, r]; nil: no residual in the decoder pass
	B    *mx.Array // [r, out]
	// Encoder says what the encoder pass adds; with EncoderOwn it uses EncA, EncB.
	Encoder    EncoderUse
	EncA, EncB *mx.Array
	Scale      float64
	Dropout    float64 // probability of zeroing an input feature; only while training

	// Training and Key switch dropout on: both must be set (and Dropout > 0). Each Forward
	// call while training draws its mask from the next key of a chain started at Key, so
	// the encoder and decoder passes of one step get different masks and a step replays
	// exactly from the same Key.
	Training bool
	Key      *mx.Array
	calls    int
	// origin is the linear a WithParams copy stands in for; the copy's Forward calls
	// move origin's chain of masks past the ones they drew.
	origin *Linear
}

// EncoderUse is what a LoRA layer adds in the encoder pass.
type EncoderUse int

const (
	// EncoderShared: the decoder's A and B act in the encoder pass too (optiq's semantics:
	// the encoder reuses the decoder's layers, adapter included).
	EncoderShared EncoderUse = iota
	// EncoderOwn: the encoder pass adds scale·x·EncA·EncB (a PEFT adapter trained on
	// transformers, whose encoder layers are modules of their own).
	EncoderOwn
	// EncoderNone: the encoder pass runs the base linear alone.
	EncoderNone
)

// factors returns the low-rank factors pass p uses (nil, nil: none).
func (l *Linear) factors(p diffusiongemma.Pass) (a, b *mx.Array) {
	if p == diffusiongemma.EncoderPass {
		switch l.Encoder {
		case EncoderOwn:
			return l.EncA, l.EncB
		case EncoderNone:
			return nil, nil
		}
	}
	return l.A, l.B
}

// Forward is the decoder pass: base(x) + cast_to_dtype_of_x(scale·((dropout(x)·A)·B)).
func (l *Linear) Forward(x *mx.Array) *mx.Array { return l.ForwardPass(x, diffusiongemma.DecoderPass) }

// ForwardPass is Forward with the factors of pass p.
func (l *Linear) ForwardPass(x *mx.Array, p diffusiongemma.Pass) *mx.Array {
	a, b := l.factors(p)
	if a == nil {
		return l.base(x, p)
	}
	xd := l.dropout(x)
	if xd == x && x.DType() == mx.Float32 {
		// No dropout: a dense or quantized base and its adapter as one op, with the
		// composition's values (Dense and Quantized bases: mx.LoRADense, mx.LoRAQuantized).
		if base, ok := l.Base.(diffusiongemma.LoRAFusedLinear); ok {
			return base.ForwardLoRA(x, a, b, l.Scale)
		}
	}
	base := l.base(x, p)
	if x.DType() == mx.Float32 {
		// One op for base(x) + scale·(x·A)·B, rounding as the three would.
		return mx.AddMM(base, mx.Matmul(xd, a), b, l.Scale, 1)
	}
	// Narrower activations: the term in the factors' float32, cast, then added (one op
	// on an engine with fused LoRA kernels).
	return mx.LoRAAdd(base, xd, a, b, l.Scale)
}

// base is the base linear's output for x in pass p.
func (l *Linear) base(x *mx.Array, p diffusiongemma.Pass) *mx.Array {
	if pl, ok := l.Base.(diffusiongemma.PassLinear); ok {
		return pl.ForwardPass(x, p)
	}
	return l.Base.Forward(x)
}

// Dims returns the base linear's input and output widths.
func (l *Linear) Dims() (in, out int) { return l.Base.Dims() }

// Rank returns r.
func (l *Linear) Rank() int {
	if l.A != nil {
		return l.A.Dim(1)
	}
	return l.EncA.Dim(1)
}

// Params returns A and B (when the decoder pass has them), EncA and EncB (with
// EncoderOwn), then the arrays of a LoRA base (stacked adapters): what a checkpointed layer
// passes explicitly (diffusiongemma.ParamLinear).
func (l *Linear) Params() []*mx.Array {
	var ps []*mx.Array
	if l.A != nil {
		ps = append(ps, l.A, l.B)
	}
	if l.Encoder == EncoderOwn {
		ps = append(ps, l.EncA, l.EncB)
	}
	if b, ok := l.Base.(diffusiongemma.ParamLinear); ok {
		ps = append(ps, b.Params()...)
	}
	return ps
}

// WithParams returns a copy of l with ps (in the order of Params) in place of its
// arrays. The copy continues l's dropout chain from where l stands now, whatever l
// draws later, and moves l past the masks it draws; copies of a copy continue from the
// same place, so a layer re-run from one snapshot replays the same masks.
func (l *Linear) WithParams(ps []*mx.Array) diffusiongemma.Linear {
	n := len(l.Params())
	if len(ps) != n {
		panic(fmt.Sprintf("lora: WithParams: %d arrays for %d parameters", len(ps), n))
	}
	c := *l
	if l.A != nil {
		c.A, c.B, ps = ps[0], ps[1], ps[2:]
	}
	if l.Encoder == EncoderOwn {
		c.EncA, c.EncB, ps = ps[0], ps[1], ps[2:]
	}
	if b, ok := l.Base.(diffusiongemma.ParamLinear); ok {
		c.Base = b.WithParams(ps)
	}
	if l.origin == nil {
		c.origin = l
	}
	return &c
}

// SetTraining turns dropout on with key (a fresh chain of masks), or off when key is nil.
func (l *Linear) SetTraining(key *mx.Array) {
	l.Training = key != nil
	l.Key = key
	l.calls = 0
}

// SharedRowwise implements diffusiongemma.RowwiseShared: the encoder pass adds what the
// decoder pass adds (shared factors, or none in either), no dropout mask is drawn, and a
// LoRA base, if any, is the same — so both passes' rows may go through one call.
func (l *Linear) SharedRowwise() bool {
	ea, eb := l.factors(diffusiongemma.EncoderPass)
	if da, db := l.factors(diffusiongemma.DecoderPass); ea != da || eb != db {
		return false
	}
	if l.Training && l.Key != nil && l.Dropout > 0 {
		return false
	}
	if _, ok := l.Base.(diffusiongemma.PassLinear); ok {
		rs, ok := l.Base.(diffusiongemma.RowwiseShared)
		return ok && rs.SharedRowwise()
	}
	return true
}

// dropout is MLX's nn.Dropout: keep each element with probability 1−p and scale the kept
// ones by 1/(1−p), so the expectation is unchanged.
func (l *Linear) dropout(x *mx.Array) *mx.Array {
	p := l.Dropout
	if !l.Training || l.Key == nil || p <= 0 {
		return x
	}
	// Walk the chain k₀ = Key, kᵢ₊₁ = split(kᵢ)[0]; call i uses split(kᵢ)[1]. Only an
	// integer is mutated, so nothing created here outlives the call.
	k := l.Key
	var maskKey *mx.Array
	for range l.calls + 1 {
		ks := mx.SplitKey(k, 2)
		k, maskKey = ks[0], ks[1]
	}
	l.calls++
	if o := l.origin; o != nil && o.calls < l.calls {
		o.calls = l.calls
	}
	u := mx.Uniform(maskKey, x.Shape(), 0, 1, mx.Float32)
	keep := mx.AsType(mx.Less(u, mx.Scalar(x.Engine(), 1-p, mx.Float32)), x.DType())
	return mx.MulScalar(mx.Multiply(x, keep), 1/(1-p))
}

// delta is the dense update (scale·B)ᵀ·Aᵀ [out, in] in dtype dt. As mlx-lm's fuse, both
// factors are cast to dt before the product.
func delta(a, b *mx.Array, scale float64, dt mx.DType) *mx.Array {
	bt := mx.AsType(mx.Transpose(mx.MulScalar(b, scale)), dt)
	at := mx.AsType(mx.Transpose(a), dt)
	return mx.Matmul(bt, at)
}
