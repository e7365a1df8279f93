package diffusiongemma

import (
	"math"

	"github.com/dgtune/dgtune/mx"
)

// Model is DiffusionGemma's text model: one set of layers run as a causal encoder over
// the prompt (filling a KV cache) and as a bidirectional decoder over the canvas.
type Model struct {
	Config   *Config
	Engine   mx.Engine
	Embed    *Embedding
	Norm     *mx.Array // final RMSNorm weight
	SelfCond *SelfConditioning
	Layers   []*Layer
	// EncoderScalars are the encoder pass's per-layer scalars; the decoder pass uses
	// each Layer's own Scalar.
	EncoderScalars []*mx.Array
	// Vision is the image encoder; nil for a text-only checkpoint (see EncodeWithImages).
	Vision *VisionTower
	// GradCheckpoint runs every layer of Encode and Decode through mx.GradCheckpoint, so
	// a gradient pass keeps each layer's inputs instead of its activations and
	// recomputes the layer during the backward pass. Only the arrays of ParamLinear
	// linears (LoRA) receive gradients through a checkpointed layer.
	GradCheckpoint bool

	// joinAttention overrides the engine's choice of one attention call over the fused
	// forward's encoder and decoder rows (mx.JoinsAttention): 0 leaves it to the engine,
	// 1 joins, −1 splits (tests compare the two on every engine).
	joinAttention int8
}

// SelfConditioning mixes the previous step's soft embedding into the canvas input.
type SelfConditioning struct {
	PreNorm        *mx.Array
	Gate, Up, Down Linear
}

// Layer is one decoder layer; fields follow the checkpoint's module names.
type Layer struct {
	Index                   int
	Full                    bool
	Heads, KVHeads, HeadDim int

	Q, K, V, O   Linear // V is nil on full-attention layers (values come from k_proj)
	QNorm, KNorm *mx.Array

	Gate, Up, Down Linear // dense GeGLU MLP

	RouterProj      Linear
	RouterScale     *mx.Array
	PerExpertScale  *mx.Array
	GateUp, Experts *ExpertWeight // experts.gate_up_proj [E, 2I, H], experts.down_proj [E, H, I]

	InputNorm, PostAttnNorm             *mx.Array
	PreFFNorm, PostFFNorm1              *mx.Array
	PreFFNorm2, PostFFNorm2, PostFFNorm *mx.Array
	Scalar                              *mx.Array

	ropeFreqs *mx.Array // per-pair periods for mx.RoPE; +Inf = no rotation
}

func (m *Model) eps() float64 { return m.Config.TextConfig.RMSNormEps }

// embedTokens returns E[ids]·√H.
func (m *Model) embedTokens(ids *mx.Array) *mx.Array {
	return mx.MulScalar(m.Embed.Lookup(ids), m.Config.TextConfig.EmbedScale())
}

// Encode runs the encoder over ids [B, S], appending its keys and values to c at
// positions c.Offset.. (prompt prefill, chunked prefill and block continuation alike).
// A prompt with image blocks goes through EncodeWithImages: on a model with a vision
// tower, Encode panics on a first prefill that holds image tokens.
func (m *Model) Encode(ids *mx.Array, c *Cache) {
	if ids.Dim(1) == 0 {
		return
	}
	if err := m.checkNoImages(ids, c); err != nil {
		panic(err) // a caller dropped the images of an image prompt
	}
	m.encode(m.embedTokens(ids), c, nil)
}

// encode runs the encoder layers over the embedded rows h [B, S, H] and returns the last
// layer's output (before the final norm). blocks, when not nil, gives each of the S
// positions its image block (−1 for text) for the bidirectional image overlay (see
// EncodeWithImages).
func (m *Model) encode(h *mx.Array, c *Cache, blocks []int) *mx.Array {
	s := h.Dim(1)
	offset := c.Offset
	window := m.Config.TextConfig.SlidingWindow
	for i, l := range m.Layers {
		lc := c.Layers[i]
		start0, start := lc.Start, lc.Start
		// The layer reads the cache's earlier keys and values and returns the new ones,
		// so that a checkpointed layer sees them as explicit inputs and outputs.
		inputs := []*mx.Array{h}
		if lc.K != nil {
			inputs = append(inputs, lc.K, lc.V)
		}
		outs := m.runLayer(l, inputs, func(l *Layer, in []*mx.Array) []*mx.Array {
			tmp := &LayerCache{Start: start0} // lc has moved on when a backward pass re-runs this
			if len(in) == 3 {
				tmp.K, tmp.V = in[1], in[2]
			}
			out := l.forward(m, EncoderPass, in[0], m.EncoderScalars[i], func(q, k, v *mx.Array) *mx.Array {
				tmp.append(k, v)
				mask := encoderMaskBlocks(m.Engine, offset, s, tmp.Start, tmp.K.Dim(2), l.Full, window, blocks)
				out := mx.ScaledDotProductAttention(q, tmp.K, tmp.V, 1.0, mask)
				if !l.Full {
					// Trim only after attending: this chunk's first queries still need the
					// keys just before it.
					tmp.trim(window)
				}
				return out
			}, offset)
			start = tmp.Start
			return []*mx.Array{out, tmp.K, tmp.V}
		})
		h, lc.K, lc.V, lc.Start = outs[0], outs[1], outs[2], start
	}
	c.Offset += s
	return h
}

// encoderMaskBlocks allows key position kp for query position p iff kp ≤ p and, on sliding
// layers, kp > p − window; it returns nil when everything is allowed. The image overlay of
// §3.5.3 is OR-ed on top (nil blocks: none): query i and key kp of this pass (blocks indexed by position − offset) also see each other when
// both lie in the same image block, whatever the causal order and the window.
func encoderMaskBlocks(e mx.Engine, offset, s, start, nk int, full bool, window int, blocks []int) *mx.Array {
	allowed := func(i, j int) bool {
		p, kp := offset+i, start+j
		ok := kp <= p && (full || kp > p-window)
		if !ok && blocks != nil && blocks[i] >= 0 {
			kj := kp - offset
			ok = kj >= 0 && kj < s && blocks[kj] == blocks[i]
		}
		return ok
	}
	fill := func(allow []bool) (all bool) {
		all = true
		for i := range s {
			for j := range nk {
				ok := allowed(i, j)
				allow[i*nk+j] = ok
				all = all && ok
			}
		}
		return all
	}
	if blocks != nil {
		allow := make([]bool, s*nk)
		if fill(allow) {
			return nil
		}
		return mx.FromBool(e, allow, 1, 1, s, nk)
	}
	// Without the overlay the rule is monotone: causality refuses the last key first (in
	// the first row), the window the first key first (in the last row), so every pair is
	// allowed iff those two are — known without the s·nk loop, which an engine that reads
	// no values (the memory estimate's) then never runs.
	if s == 0 || nk == 0 || allowed(0, nk-1) && allowed(s-1, 0) {
		return nil
	}
	return mx.FromBoolFunc(e, func(allow []bool) { fill(allow) }, 1, 1, s, nk)
}

// Decode runs the decoder over canvas ids [B, L] against the encoder cache (read only)
// and returns softcapped float32 logits [B, L, V]. sc, if not nil, is the
// self-conditioning signal as a soft embedding [B, L, H].
func (m *Model) Decode(canvas *mx.Array, c *Cache, sc *mx.Array) *mx.Array {
	return m.head(m.DecodeHidden(canvas, c, sc))
}

// DecodeHidden is Decode up to the final norm: the decoder's final-normed hidden states
// [B, L, H], which Logits turns into Decode's logits. A loss that scores only some
// canvas positions takes those rows first and runs the tied head — at the real
// geometry a [H, 262144] product per row — on them alone.
func (m *Model) DecodeHidden(canvas *mx.Array, c *Cache, sc *mx.Array) *mx.Array {
	t := &m.Config.TextConfig
	h := m.embedTokens(canvas)
	if sc != nil {
		sc = mx.AsType(sc, h.DType())
		n := mx.RMSNorm(sc, m.SelfCond.PreNorm, m.eps())
		mlp := m.SelfCond.Down.Forward(mx.Multiply(mx.GELUTanh(m.SelfCond.Gate.Forward(n)), m.SelfCond.Up.Forward(n)))
		h = mx.Add(h, mlp)
	}
	h = mx.RMSNorm(h, nil, m.eps())
	offset := c.Offset
	for i, l := range m.Layers {
		inputs := []*mx.Array{h}
		if lc := c.Layers[i]; lc.K != nil {
			ek, ev := lc.K, lc.V
			if first := t.decoderKeyStart(l.Full, c.Offset); first > lc.Start {
				ek = mx.SliceAxis(ek, 2, first-lc.Start, ek.Dim(2))
				ev = mx.SliceAxis(ev, 2, first-lc.Start, ev.Dim(2))
			}
			inputs = append(inputs, ek, ev)
		}
		h = m.runLayer(l, inputs, func(l *Layer, in []*mx.Array) []*mx.Array {
			return []*mx.Array{l.forward(m, DecoderPass, in[0], l.Scalar, func(q, k, v *mx.Array) *mx.Array {
				if len(in) == 3 {
					k = mx.Concatenate([]*mx.Array{in[1], k}, 2)
					v = mx.Concatenate([]*mx.Array{in[2], v}, 2)
				}
				return mx.ScaledDotProductAttention(q, k, v, 1.0, nil)
			}, offset)}
		})[0]
	}
	return mx.RMSNorm(h, m.Norm, m.eps())
}

// head applies the tied embedding and the float32 softcap cap·tanh(z/cap).
func (m *Model) head(h *mx.Array) *mx.Array {
	z := mx.AsType(m.Embed.AsLinear(h), mx.Float32)
	if cp := m.Config.TextConfig.FinalLogitSoftcapping; cp > 0 {
		z = mx.MulScalar(mx.Tanh(mx.DivScalar(z, cp)), cp)
	}
	return z
}

// Forward is the training call: fresh caches, encoder over prompt [B, N], decoder
// over canvas [B, L] without self-conditioning → logits [B, L, V].
func (m *Model) Forward(prompt, canvas *mx.Array) *mx.Array {
	c := m.NewCache()
	m.Encode(prompt, c)
	return m.Decode(canvas, c, nil)
}

// SoftEmbedding turns processed logits [.., V] into the self-conditioning signal
// softmax(P)·E·√H.
func (m *Model) SoftEmbedding(processed *mx.Array) *mx.Array {
	p := mx.Softmax(mx.AsType(processed, mx.Float32), -1)
	return mx.MulScalar(m.Embed.MixRows(p), m.Config.TextConfig.EmbedScale())
}

// attendFunc computes attention output [B, H, S, D] from rotated q, k and normed v.
type attendFunc func(q, k, v *mx.Array) *mx.Array

// forward is one decoder layer (§3.3) run in pass p: attention, then the parallel dense MLP
// and MoE branches, seven RMSNorms, and the whole residual scaled by scalar.
func (l *Layer) forward(m *Model, p Pass, x, scalar *mx.Array, attend attendFunc, offset int) *mx.Array {
	eps := m.eps()
	attn := l.attention(p, mx.RMSNorm(x, l.InputNorm, eps), attend, offset, eps)
	return mx.Multiply(l.afterAttention(m, p, x, attn), scalar)
}

// afterAttention is the rest of a layer before its scalar: the residual with the normed
// attention output, then the parallel dense MLP and MoE branches, normed and added back.
func (l *Layer) afterAttention(m *Model, p Pass, x, attn *mx.Array) *mx.Array {
	eps := m.eps()
	hMid := mx.Add(x, mx.RMSNorm(attn, l.PostAttnNorm, eps))

	u := mx.RMSNorm(hMid, l.PreFFNorm, eps)
	h1 := mx.RMSNorm(project(l.Down, p, mx.GeGLU(project(l.Gate, p, u), project(l.Up, p, u))), l.PostFFNorm1, eps)

	idx, w := l.route(m, p, hMid)
	h2 := mx.RMSNorm(l.experts(mx.RMSNorm(hMid, l.PreFFNorm2, eps), idx, w), l.PostFFNorm2, eps)

	return mx.Add(hMid, mx.RMSNorm(mx.Add(h1, h2), l.PostFFNorm, eps))
}

// attention is §3.2: q/k RMSNorm with weight, v RMSNorm without, RoPE on q and k,
// scale 1, values from the raw k projection on full layers.
func (l *Layer) attention(p Pass, x *mx.Array, attend attendFunc, offset int, eps float64) *mx.Array {
	b, s := x.Dim(0), x.Dim(1)
	q, k, v := l.qkv(p, x, x, offset, offset, eps)
	out := attend(q, k, v)
	out = mx.Reshape(mx.Transpose(out, 0, 2, 1, 3), b, s, l.Heads*l.HeadDim)
	return project(l.O, p, out)
}

// qkv is the attention prologue of §3.2 that both forward paths share (attention, and
// fusedAttention over the two passes' rows at once): queries [B, Heads, Sq, D] from the
// rows xq at positions qOffset.., keys and values [B, KVHeads, Skv, D] from the rows xkv at
// positions kOffset... q and k get RMSNorm with weight and RoPE (mx.NormRoPE: one op
// where the engine has it), v RMSNorm without; full layers (no v_proj) take the values
// from the raw k projection.
func (l *Layer) qkv(p Pass, xq, xkv *mx.Array, qOffset, kOffset int, eps float64) (q, k, v *mx.Array) {
	b, sq, skv := xq.Dim(0), xq.Dim(1), xkv.Dim(1)
	q = mx.NormRoPE(mx.Reshape(project(l.Q, p, xq), b, sq, l.Heads, l.HeadDim), l.QNorm, eps, 1, qOffset, l.ropeFreqs)

	kRaw := mx.Reshape(project(l.K, p, xkv), b, skv, l.KVHeads, l.HeadDim)
	vRaw := kRaw
	if l.V != nil {
		vRaw = mx.Reshape(project(l.V, p, xkv), b, skv, l.KVHeads, l.HeadDim)
	}
	k = mx.NormRoPE(kRaw, l.KNorm, eps, 1, kOffset, l.ropeFreqs)
	v = mx.Transpose(mx.RMSNorm(vRaw, nil, eps), 0, 2, 1, 3)
	return q, k, v
}

// route is §3.4: scores from the no-scale-normed, scaled residual; the top-k indices
// are constants for autodiff; weights are the softmax over the selected scores times
// the per-expert scale.
func (l *Layer) route(m *Model, p Pass, h *mx.Array) (idx, w *mx.Array) {
	t := &m.Config.TextConfig
	u := mx.RMSNorm(h, nil, m.eps())
	u = mx.Multiply(u, l.RouterScale)
	u = mx.MulScalar(u, t.RouterRootScale())
	scores := project(l.RouterProj, p, u) // [B, S, E]
	k := t.TopKExperts
	ne := scores.Dim(-1)
	idx = mx.StopGradient(mx.SliceAxis(mx.Argpartition(mx.Negative(scores), k-1, -1), -1, 0, min(k, ne)))
	w = mx.Softmax(mx.TakeAlongAxis(scores, idx, -1), -1)
	w = mx.Multiply(w, mx.Take(l.PerExpertScale, idx, 0))
	return idx, w
}

// experts is Σ_k w_k · GeGLU-expert_{idx_k}(z) with the fused gate/up projection
// (rows [0, I) gate, [I, 2I) up), computed on rows sorted by expert (experts.go).
func (l *Layer) experts(z, idx, w *mx.Array) *mx.Array {
	return sortedExperts(l.GateUp, l.Experts, z, idx, w)
}

// ropePeriods turns inverse frequencies into mx.RoPE's per-pair periods (1/inv, +Inf
// where a pair does not rotate).
func ropePeriods(e mx.Engine, inv []float64) *mx.Array {
	p := make([]float32, len(inv))
	for i, v := range inv {
		if v == 0 {
			p[i] = float32(math.Inf(1))
		} else {
			p[i] = float32(1 / v)
		}
	}
	return mx.FromFloat32(e, p, len(p))
}
