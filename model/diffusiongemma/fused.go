package diffusiongemma

import "github.com/dgtune/dgtune/mx"

// The training forward in one pass. The reference objective encodes the prompt into a
// fresh cache and decodes the canvas against it: every layer runs twice, once over the N
// prompt rows and once over the L canvas rows, with the same weights. Where the two passes
// compute the same function of a row in every linear (LoRA with shared factors and no
// dropout draw, or no LoRA at all), the layer can instead run once over the N + L rows
// together: each projection, the dense MLP, the router and the experts become one product
// of N + L rows instead of two (a quantized weight is decoded once per step of the layer
// instead of twice), and only attention, the one place the passes differ, is split by
// rows. Every row computes what its own pass computes: on the go engine a dense product's
// rows do not depend on the other rows, so on an unquantized base the hidden states are
// the two passes' bit for bit (MLX's kernels may round a row differently with the number
// of rows; a quantized expert that gets one or two rows in one layout and more
// in the other takes the few-row kernels, which round differently); the gradients of
// shared weights sum over the N + L rows in one product instead of two, which may round
// differently too.

// RowwiseShared is implemented by a PassLinear that may compute both passes' rows in one
// call: SharedRowwise reports whether its encoder pass computes the same function as its
// decoder pass, row by row (no random mask drawn per call).
type RowwiseShared interface {
	SharedRowwise() bool
}

// PassesFuse reports whether every linear of every layer computes the same in both
// passes, so that EncodeDecodeHidden runs them together.
func (m *Model) PassesFuse() bool {
	for _, l := range m.Layers {
		for _, s := range l.linearSlots() {
			if _, ok := (*s).(PassLinear); !ok {
				continue
			}
			if rs, ok := (*s).(RowwiseShared); !ok || !rs.SharedRowwise() {
				return false
			}
		}
	}
	return true
}

// EncodeDecodeHidden is Encode(prompt) into a fresh cache followed by
// DecodeHidden(canvas, cache, nil): the decoder's final-normed hidden states [B, L, H]
// for a text prompt [B, N] and canvas [B, L]. Where the passes fuse (PassesFuse) it runs
// every layer once over the prompt and canvas rows together; otherwise it runs the two
// passes. Either way the result is the same (see above for the bits). A prompt with image tokens
// panics as Encode does (use EncodeWithImages and DecodeHidden).
func (m *Model) EncodeDecodeHidden(prompt, canvas *mx.Array) *mx.Array {
	n := prompt.Dim(1)
	if n == 0 || !m.PassesFuse() {
		c := m.NewCache()
		m.Encode(prompt, c)
		return m.DecodeHidden(canvas, c, nil)
	}
	if err := m.checkNoImages(prompt, &Cache{}); err != nil { // a first prefill: offset 0
		panic(err) // a caller dropped the images of an image prompt
	}
	enc := m.embedTokens(prompt)
	dec := mx.RMSNorm(m.embedTokens(canvas), nil, m.eps())
	h := mx.Concatenate([]*mx.Array{enc, dec}, 1)
	masks := m.joinedMasks(h.DType(), n, h.Dim(1))
	for i, l := range m.Layers {
		last := i == len(m.Layers)-1
		scalar := m.EncoderScalars[i]
		h = m.runLayer(l, []*mx.Array{h}, func(l *Layer, in []*mx.Array) []*mx.Array {
			return []*mx.Array{l.fusedForward(m, in[0], n, scalar, last, masks[l.Full])}
		})[0]
	}
	return mx.RMSNorm(h, m.Norm, m.eps())
}

// fusedForward is forward over x [B, N+L, H] — N encoder rows, then L decoder rows — with
// the encoder's scalar on the first N rows and the layer's own on the rest. In the last
// layer the encoder's rows are needed only for their keys and values, so after the K/V
// projections the layer continues on the decoder's rows alone and returns [B, L, H].
func (l *Layer) fusedForward(m *Model, x *mx.Array, n int, encScalar *mx.Array, last bool, joined func() *mx.Array) *mx.Array {
	s := x.Dim(1)
	attn := l.fusedAttention(m, mx.RMSNorm(x, l.InputNorm, m.eps()), n, last, m.eps(), joined)
	if last {
		x = mx.SliceAxis(x, 1, n, s)
	}
	out := l.afterAttention(m, DecoderPass, x, attn)
	if last {
		return mx.Multiply(out, l.Scalar)
	}
	// Row i is scaled by its own pass's scalar: one [1, N+L, 1] column of them.
	col := func(sc *mx.Array, rows int) *mx.Array {
		return mx.BroadcastTo(mx.Reshape(sc, 1, 1, 1), 1, rows, 1)
	}
	return mx.Multiply(out, mx.Concatenate([]*mx.Array{col(encScalar, n), col(l.Scalar, s-n)}, 1))
}

// fusedAttention is attention over normed x [B, N+L, H] with each pass's own keys: the
// encoder's rows attend causally (within the window on sliding layers) to the prompt, the
// decoder's rows to the prompt positions the decoder keeps (the last window−1 on sliding
// layers) and the whole canvas. In the last layer only the decoder's queries are formed.
// RoPE runs over the N + L positions at once: the canvas continues at position N, as the
// decoder pass's offset puts it.
func (l *Layer) fusedAttention(m *Model, x *mx.Array, n int, last bool, eps float64, joined func() *mx.Array) *mx.Array {
	b, s := x.Dim(0), x.Dim(1)
	xq, q0 := x, 0
	if last {
		xq, q0 = mx.SliceAxis(x, 1, n, s), n
	}
	sq := xq.Dim(1)
	q, k, v := l.qkv(DecoderPass, xq, x, q0, 0, eps)

	// The decoder's keys: the prompt positions it keeps, then the canvas — one
	// contiguous run of the N + L positions.
	first := m.Config.TextConfig.decoderKeyStart(l.Full, n)
	if !last && joined != nil {
		// One call over both passes' queries and all N + L keys, the mask giving each row
		// its own pass's keys (joinedMask).
		out := mx.ScaledDotProductAttention(q, k, v, 1.0, joined())
		out = mx.Reshape(mx.Transpose(out, 0, 2, 1, 3), b, sq, l.Heads*l.HeadDim)
		return project(l.O, DecoderPass, out)
	}
	qEnc, qDec := (*mx.Array)(nil), q
	if !last {
		// One split rather than two slices: where the engine has it (MLX), the queries'
		// cotangent is one concatenate instead of two zero-filled arrays and their sum.
		parts := mx.Split(q, []int{n}, 2)
		qEnc, qDec = parts[0], parts[1]
	}
	out := mx.ScaledDotProductAttention(qDec, mx.SliceAxis(k, 2, first, s), mx.SliceAxis(v, 2, first, s), 1.0, nil)
	if !last {
		mask := encoderMaskBlocks(m.Engine, 0, n, 0, n, l.Full, m.Config.TextConfig.SlidingWindow, nil)
		enc := mx.ScaledDotProductAttention(qEnc, mx.SliceAxis(k, 2, 0, n), mx.SliceAxis(v, 2, 0, n), 1.0, mask)
		out = mx.Concatenate([]*mx.Array{enc, out}, 2)
	}
	out = mx.Reshape(mx.Transpose(out, 0, 2, 1, 3), b, sq, l.Heads*l.HeadDim)
	return project(l.O, DecoderPass, out)
}

// joinedMasks gives, for each kind of layer (full: true), the mask of its joined
// attention (joinedMask), or nil where fusedAttention makes two calls: on an engine that
// prefers one masked call over the S = N + L rows of dtype dt at the layers' head size
// (mx.JoinsAttention), unless a test set joinAttention. Without checkpointing the mask
// is made once a forward, here, so that every layer of a kind shares one array (a
// compiling engine then converts it once); a checkpointed layer makes its own inside its
// function, which its recomputation runs again after the forward's arrays are gone.
func (m *Model) joinedMasks(dt mx.DType, n, s int) map[bool]func() *mx.Array {
	masks := map[bool]func() *mx.Array{}
	t := &m.Config.TextConfig
	for _, l := range m.Layers {
		if _, done := masks[l.Full]; done {
			continue
		}
		masks[l.Full] = nil
		if !(m.joinAttention > 0 || m.joinAttention == 0 && mx.JoinsAttention(m.Engine, dt, l.HeadDim)) {
			continue
		}
		full := l.Full
		build := func() *mx.Array {
			return joinedMask(m.Engine, n, s, t.decoderKeyStart(full, n), full, t.SlidingWindow)
		}
		if !m.GradCheckpoint {
			mask := build()
			build = func() *mx.Array { return mask }
		}
		masks[l.Full] = build
	}
	return masks
}

// joinedMask [1, 1, S, S] is both passes' attention over the S = N + L rows of the fused
// forward in one mask: encoder row i < N sees key kp iff kp ≤ i and, on sliding layers,
// kp > i − window (encoderMaskBlocks' rule at offset 0); decoder row i ≥ N sees the keys
// from first — the prompt positions it keeps — through the whole canvas.
func joinedMask(e mx.Engine, n, s, first int, full bool, window int) *mx.Array {
	return mx.FromBoolFunc(e, func(allow []bool) {
		for i := range s {
			row := allow[i*s : (i+1)*s]
			for kp := range row {
				if i < n {
					row[kp] = kp <= i && (full || kp > i-window)
				} else {
					row[kp] = kp >= first
				}
			}
		}
	}, 1, 1, s, s)
}
