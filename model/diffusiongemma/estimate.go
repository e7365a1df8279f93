package diffusiongemma

import (
	"errors"
	"fmt"
	"strings"

	"github.com/dgtune/dgtune/mx"
)

// Memory estimation for one LoRA training step (§5), from shapes alone.
//
// The step is the training call of §3.7 on one example: an encoder pass over the N prompt
// tokens, a decoder pass over the L canvas tokens, the tied head and the cross-entropy, then
// the backward pass and an AdamW update of the adapters. Its peak is at the start of the
// backward pass, when everything the forward left for the backward is alive at once:
//
//	weights + LoRA A/B + their gradients + AdamW m, v + activations (+ the Go GC's headroom)
//
// Activations are float32 (the go engine computes in float32 whatever the weights' dtype),
// counted tensor by tensor from the forward of model.go as the go engine runs it
// (actCounter.layerPass mirrors Layer.forward, attention, route and experts;
// activationBytes adds the head). The go engine's autodiff records every op whose input descends from a
// LoRA parameter and keeps each recorded tensor and its inputs until the backward pass ends,
// so under RetainGraph every such intermediate counts — including the eight temporaries of
// the composite GELU, the scaled and masked copies of the attention scores, and the four
// tensors of each LoRA linear. Tensors the loss does not reach are garbage as soon as they
// are made and do not count: the router's negated scores, and in the encoder's last layer
// everything but the K/V projections (only the cache is read later). RetainNeeded counts
// only what the VJPs read: the inputs of LoRA matmuls, of norms and of GeGLU, rotated q/k, v,
// attention probabilities [heads, S, keys], the expert outputs and gate/up rows, and the
// softcapped logits — what an engine that frees eagerly would hold. Both add the largest
// backward transient, at the head: ~3 f32 copies of the [L, V] logits (softmax of the
// log-sum-exp VJP, its product with the cotangent, the tanh VJP).
//
// Go's collector lets the heap grow to (1 + GOGC/100)× the live heap before collecting, and
// a training step allocates several times its live set, so the process's resident memory
// reaches that bound; GCPercent adds it as GCHeadroom (0 when the memory is not in Go's heap
// or a memory limit is set).

// Retention says which forward tensors the backward pass keeps alive.
type Retention int

const (
	// RetainGraph keeps every recorded intermediate until the backward pass ends: the go
	// engine.
	RetainGraph Retention = iota
	// RetainNeeded keeps only the tensors a VJP reads.
	RetainNeeded
)

func (r Retention) String() string {
	switch r {
	case RetainGraph:
		return "graph"
	case RetainNeeded:
		return "needed"
	}
	return fmt.Sprintf("Retention(%d)", int(r))
}

// EstimateOptions describe the training step to estimate.
type EstimateOptions struct {
	// Quantization is the base's quantization map; nil means cfg.Quantization, and nil there
	// too means an unquantized base (see QuantizationPolicy for --bits style policies).
	Quantization *Quantization
	// Rank, Keys and NumLayers are the LoRA settings (Keys empty: DefaultLoRAKeys;
	// NumLayers 0 or −1: all layers).
	Rank      int
	Keys      []string
	NumLayers int
	// PromptLen (N ≥ 0) and CanvasLen (L ≥ 1) are the example's token counts.
	PromptLen, CanvasLen int
	// DType is what the engine holds unquantized tensors and quantization scales in
	// (LoadOptions.DType); zero means float32, as Load does.
	DType     mx.DType
	Retention Retention
	// GCPercent is Go's GOGC: GCHeadroom = GCPercent/100 of the live peak. 0 adds none.
	GCPercent int
}

// MemoryEstimate is the predicted peak of one training step, in bytes.
type MemoryEstimate struct {
	Weights        int64 // the base model as the engine holds it
	LoRAParams     int64 // adapter A [in, r] and B [r, out], float32
	Gradients      int64 // one float32 gradient per LoRA parameter
	OptimizerState int64 // AdamW m and v, float32
	Activations    int64 // forward tensors alive when the backward starts, plus its largest transient
	GCHeadroom     int64 // garbage Go's collector lets accumulate (GCPercent/100 of the live peak)
	Total          int64

	// Breakdown splits Weights and Activations into parts, in a fixed order.
	Breakdown []MemoryItem
	// Options and the counts behind them, for the report.
	Options         EstimateOptions
	TrainableParams int64
	AdaptedLinears  int
}

// MemoryItem is one line of the breakdown: Group is "weights" or "activations".
type MemoryItem struct {
	Group, Name string
	Bytes       int64
}

// Errors of Estimate's arguments.
var (
	ErrEstimateConfig  = errors.New("diffusiongemma: estimate: no config")
	ErrEstimateLengths = errors.New("diffusiongemma: estimate: bad token counts")
	ErrEstimateRank    = errors.New("diffusiongemma: estimate: bad LoRA rank")
)

// Estimate predicts the peak memory of one LoRA training step of cfg.
func (o EstimateOptions) Estimate(cfg *Config) (MemoryEstimate, error) {
	if cfg == nil {
		return MemoryEstimate{}, ErrEstimateConfig
	}
	if o.PromptLen < 0 || o.CanvasLen < 1 {
		return MemoryEstimate{}, fmt.Errorf("%w: prompt %d (want ≥ 0), canvas %d (want ≥ 1)", ErrEstimateLengths, o.PromptLen, o.CanvasLen)
	}
	if o.Rank < 1 {
		return MemoryEstimate{}, fmt.Errorf("%w: %d (want ≥ 1)", ErrEstimateRank, o.Rank)
	}
	if o.GCPercent < 0 {
		return MemoryEstimate{}, fmt.Errorf("diffusiongemma: estimate: GC percent %d (want ≥ 0)", o.GCPercent)
	}
	if o.Retention != RetainGraph && o.Retention != RetainNeeded {
		return MemoryEstimate{}, fmt.Errorf("diffusiongemma: estimate: unknown retention %d", int(o.Retention))
	}
	if o.DType == 0 {
		o.DType = mx.Float32
	}
	if !o.DType.IsFloat() {
		return MemoryEstimate{}, fmt.Errorf("diffusiongemma: estimate: compute dtype %s is not a float type", o.DType)
	}
	numLayers := o.NumLayers
	if numLayers == 0 {
		numLayers = -1
	}
	targets, err := LoRATargets(cfg, o.Keys, numLayers)
	if err != nil {
		return MemoryEstimate{}, fmt.Errorf("diffusiongemma: estimate: %w", err)
	}
	if len(targets) == 0 {
		return MemoryEstimate{}, fmt.Errorf("diffusiongemma: estimate: LoRA keys %v select no linear", o.Keys)
	}
	q := o.Quantization
	if q == nil {
		q = cfg.Quantization
	}
	est := MemoryEstimate{Options: o, AdaptedLinears: len(targets)}
	weights, err := weightBytes(cfg, q, int64(o.DType.Size()))
	if err != nil {
		return MemoryEstimate{}, fmt.Errorf("diffusiongemma: estimate: %w", err)
	}
	for _, it := range weights {
		est.Weights += it.Bytes
	}
	est.TrainableParams = LoRAParamCount(targets, o.Rank)
	est.LoRAParams = 4 * est.TrainableParams
	est.Gradients = 4 * est.TrainableParams
	est.OptimizerState = 2 * 4 * est.TrainableParams
	acts := activationBytes(cfg, q, targets, o)
	for _, it := range acts {
		est.Activations += it.Bytes
	}
	live := est.Weights + est.LoRAParams + est.Gradients + est.OptimizerState + est.Activations
	est.GCHeadroom = live * int64(o.GCPercent) / 100
	est.Total = live + est.GCHeadroom
	est.Breakdown = append(weights, acts...)
	return est, nil
}

// QuantizationPolicy is the quantization map `probe mkmodel --bits` writes for cfg: "0"
// (nil: unquantized), "4", "8" or "mixed" (8-bit attention, dense MLP and router, 4-bit
// the rest), group 64 (32 when an input width is not a multiple of 64).
func QuantizationPolicy(cfg *Config, policy string) (*Quantization, error) {
	if cfg == nil {
		return nil, ErrEstimateConfig
	}
	bitsFor, group, err := quantPlan(cfg, policy)
	if err != nil {
		return nil, err
	}
	if group == 0 {
		return nil, nil
	}
	def := 4
	if policy == Bits8 {
		def = 8
	}
	q := &Quantization{GroupSize: group, Bits: def, Mode: QuantModeAffine}
	for _, ts := range ExpectedTensors(cfg) {
		if b := bitsFor(ts.Module); ts.Quantizable && b != def {
			if q.Modules == nil {
				q.Modules = map[string]ModuleQuantization{}
			}
			q.Modules[ts.Module] = ModuleQuantization{Quantized: true, Bits: b, GroupSize: group}
		}
	}
	return q, nil
}

// weightBytes sizes every tensor of ExpectedTensors as the engine holds it: quantized
// modules as uint32 codes plus scales and biases in the compute dtype, everything else in
// the compute dtype. The vision tower is not loaded for text training and is not counted.
func weightBytes(cfg *Config, q *Quantization, dtSize int64) ([]MemoryItem, error) {
	groups := []string{"embedding (and tied head)", "attention projections", "dense MLP", "router", "experts", "self-conditioning", "norms and scalars"}
	by := make(map[string]int64, len(groups))
	for _, ts := range ExpectedTensors(cfg) {
		n := int64(1)
		for _, d := range ts.Shape {
			n *= int64(d)
		}
		b := n * dtSize
		if ts.Quantizable && q != nil {
			if bits, group, ok := q.For(ts.Module); ok {
				w, s, err := QuantizedShapes(ts.Shape, bits, group)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", ts.Module, err)
				}
				b = 4*prod(w) + 2*dtSize*prod(s)
			}
		}
		by[weightGroup(ts)] += b
	}
	out := make([]MemoryItem, 0, len(groups))
	for _, g := range groups {
		if by[g] > 0 {
			out = append(out, MemoryItem{Group: "weights", Name: g, Bytes: by[g]})
		}
	}
	return out, nil
}

func weightGroup(ts TensorSpec) string {
	m := ts.Module
	switch {
	case !ts.Quantizable:
		return "norms and scalars"
	case strings.HasSuffix(m, "embed_tokens"):
		return "embedding (and tied head)"
	case strings.Contains(m, ".self_conditioning."):
		return "self-conditioning"
	case strings.Contains(m, ".self_attn."):
		return "attention projections"
	case strings.Contains(m, ".mlp."):
		return "dense MLP"
	case strings.Contains(m, ".router."):
		return "router"
	}
	return "experts"
}

func prod(s []int) int64 {
	n := int64(1)
	for _, d := range s {
		n *= int64(d)
	}
	return n
}

// Activation groups, in report order.
const (
	actEmbed    = "embeddings and residual stream"
	actAttnProj = "attention projections (q, k, v, o with LoRA)"
	actScores   = "attention scores and probabilities"
	actKV       = "attention keys and values (transposed, concatenated)"
	actDense    = "dense MLP (with GELU temporaries)"
	actRouter   = "router"
	actExperts  = "experts (gathered rows, gate/up, outputs)"
	actHead     = "head: logits and softcap"
	actBackward = "backward transient (logit cotangents)"
)

// actCounter adds up activation bytes by group, keeping a tensor when the retention keeps
// everything or when a VJP reads it (needed).
type actCounter struct {
	all bool
	by  map[string]int64
}

func (c *actCounter) f32(group string, needed bool, elems int) {
	c.bytes(group, needed, 4*int64(elems))
}

func (c *actCounter) bytes(group string, needed bool, b int64) {
	if needed || c.all {
		c.by[group] += b
	}
}

// passGeom is what one layer pass needs to know about the model and the adapters.
type passGeom struct {
	t            *TextConfig
	rank         int
	lora         map[string]bool // keys adapted in this layer
	dense        map[string]bool // base linears stored unquantized (their forward keeps a transposed copy of W)
	denseExperts bool
}

// linear counts y = base(x) [+ cast(scale·((x·A)·B))] for s rows of in → out. x·A is read by
// the B matmul's VJP (and x by A's, counted by the caller); the other three LoRA tensors
// are only kept by the graph. outNeeded says whether a VJP downstream reads y.
func (c *actCounter) linear(group string, g passGeom, key string, s, in, out int, outNeeded bool) {
	if g.dense[key] {
		c.f32(group, false, in*out) // Dense.Forward's Transpose(W), an input of the matmul
	}
	if !g.lora[key] {
		c.f32(group, outNeeded, s*out)
		return
	}
	c.f32(group, true, s*g.rank)   // x·A
	c.f32(group, false, 3*s*out)   // (x·A)·B, ·scale, base(x)
	c.f32(group, outNeeded, s*out) // the sum
}

// gelu counts mx.GELUTanh on n elements: one fused op on the go engine, which keeps only
// its output; its VJP reads the input (counted by the caller).
func (c *actCounter) gelu(group string, n int, outNeeded bool) {
	c.f32(group, outNeeded, n)
}

// layerPass counts layer i over s tokens: the encoder's pass over the prompt (s = n), or
// the decoder's over the canvas after an n-token prompt. kvOnly is the encoder's last
// layer, where only the K/V projections reach the loss.
func (c *actCounter) layerPass(g passGeom, i, s, n int, encoder, kvOnly bool) {
	t := g.t
	h, nh, d, nkv := t.HiddenSize, t.NumAttentionHeads, t.LayerHeadDim(i), t.LayerKVHeads(i)
	qw, kvw := nh*d, nkv*d
	inter, k, im, ne := t.IntermediateSize, t.TopKExperts, t.MoeIntermediateSize, t.NumExperts
	sliding := !t.IsFull(i) && t.SlidingWindow > 0
	// The decoder reads every encoded position (full layers) or the last window−1 (§3.6.2).
	cached := 0
	if !encoder {
		cached = n
		if sliding {
			cached = min(n, t.SlidingWindow-1)
		}
	}
	nk := cached + s
	// RoPE(k) and v are the attention matmuls' own inputs unless the decoder concatenates
	// them after the cached positions.
	ownKV := !kvOnly && cached == 0

	// Attention (§3.2): input norm, q/k/v projections, q/k norm + transpose + RoPE, v norm +
	// transpose.
	c.f32(actEmbed, g.lora["self_attn.q_proj"] || g.lora["self_attn.k_proj"] || g.lora["self_attn.v_proj"], s*h)
	if !kvOnly {
		c.linear(actAttnProj, g, "self_attn.q_proj", s, h, qw, true)
		c.f32(actAttnProj, false, 2*s*qw) // q_norm, transpose
		c.f32(actAttnProj, true, s*qw)    // RoPE(q): the score matmul's input
	}
	c.linear(actAttnProj, g, "self_attn.k_proj", s, h, kvw, true)
	c.f32(actAttnProj, false, 2*s*kvw) // k_norm, transpose
	c.f32(actAttnProj, ownKV, s*kvw)   // RoPE(k)
	if t.HasVProj(i) {
		c.linear(actAttnProj, g, "self_attn.v_proj", s, h, kvw, true)
	}
	c.f32(actAttnProj, false, s*kvw) // v norm (no scale)
	c.f32(actAttnProj, ownKV, s*kvw) // transposed v
	if encoder && sliding && s > t.SlidingWindow {
		c.f32(actKV, false, 2*t.SlidingWindow*kvw) // the cache trimmed to the window
	}
	if kvOnly {
		return
	}

	// Scaled dot-product attention (goeng: kᵀ copy, scores, ·scale, mask, softmax, ·v).
	if !encoder {
		if sliding && n >= t.SlidingWindow {
			c.f32(actKV, false, 2*cached*kvw) // the last window−1 encoder positions, sliced
		}
		if cached > 0 {
			c.f32(actKV, true, 2*nk*kvw) // [encoder K; canvas K], same for V
		}
	}
	c.f32(actKV, false, nk*kvw)        // kᵀ
	c.f32(actScores, false, 2*nh*s*nk) // q·kᵀ, ·scale
	if encoder && s > 1 {
		c.bytes(actScores, false, int64(s*nk+nh*s*nk)) // bool mask and its broadcast
		c.f32(actScores, false, nh*s*nk)               // masked scores
	}
	c.f32(actScores, true, nh*s*nk) // probabilities
	c.f32(actAttnProj, false, s*qw) // probabilities·v
	c.f32(actAttnProj, g.lora["self_attn.o_proj"], s*qw)
	c.linear(actAttnProj, g, "self_attn.o_proj", s, qw, h, true)

	// Residual and dense GeGLU branch (§3.3).
	c.f32(actEmbed, false, s*h) // post-attention norm
	c.f32(actEmbed, true, s*h)  // h_mid
	c.f32(actDense, g.lora["mlp.gate_proj"] || g.lora["mlp.up_proj"], s*h)
	c.linear(actDense, g, "mlp.gate_proj", s, h, inter, true)
	c.linear(actDense, g, "mlp.up_proj", s, h, inter, true)
	c.gelu(actDense, s*inter, true)
	c.f32(actDense, g.lora["mlp.down_proj"], s*inter) // GELU(gate)·up
	c.linear(actDense, g, "mlp.down_proj", s, inter, h, true)
	c.f32(actDense, false, s*h) // post_feedforward_layernorm_1

	// Router (§3.4): no-scale norm, ·scale, ·root, scores; top-k indices, softmax, ·per-expert.
	c.f32(actRouter, false, 2*s*h)
	c.f32(actRouter, g.lora["router.proj"], s*h)
	c.linear(actRouter, g, "router.proj", s, h, ne, false)
	c.bytes(actRouter, false, 4*int64(s*k)) // int32 indices
	c.f32(actRouter, false, s*k)            // selected scores
	c.f32(actRouter, true, s*k)             // softmax
	c.f32(actRouter, false, s*k)            // per-expert scales
	c.f32(actRouter, true, s*k)             // weights

	// Experts: norm, rows repeated top_k times, fused gate/up, GeGLU, down, weighted sum.
	c.f32(actExperts, false, s*h)
	c.f32(actExperts, false, s*k*h)
	if g.denseExperts {
		// Take(W, idx) gathers each row's gate_up matrix, untraced (W is a constant) and
		// garbage once transposed; the transposed copy is the matmul's input and stays.
		c.f32(actExperts, true, s*k*2*im*h)
	}
	c.f32(actExperts, false, s*k*2*im)
	c.f32(actExperts, true, 2*s*k*im) // gate and up slices
	c.gelu(actExperts, s*k*im, true)
	c.f32(actExperts, false, s*k*im)
	if g.denseExperts {
		c.f32(actExperts, true, s*k*h*im) // the gathered down matrices, transposed (as above)
	}
	c.f32(actExperts, true, s*k*h)  // expert outputs
	c.f32(actExperts, false, s*k*h) // ·weights
	c.f32(actExperts, true, s*h)    // Σ_k
	c.f32(actExperts, false, s*h)   // post_feedforward_layernorm_2

	// Merge: h1 + h2, norm, + h_mid, ·layer_scalar.
	c.f32(actEmbed, true, s*h)
	c.f32(actEmbed, false, 2*s*h)
	c.f32(actEmbed, true, s*h)
}

// activationBytes counts the forward tensors alive when the backward pass starts, plus the
// head's backward transient, by group.
func activationBytes(cfg *Config, q *Quantization, targets []LoRATarget, o EstimateOptions) []MemoryItem {
	t := &cfg.TextConfig
	c := &actCounter{all: o.Retention == RetainGraph, by: map[string]int64{}}
	lora := make([]map[string]bool, t.NumHiddenLayers)
	first := t.NumHiddenLayers
	for _, tg := range targets {
		if lora[tg.Layer] == nil {
			lora[tg.Layer] = map[string]bool{}
		}
		lora[tg.Layer][tg.Key] = true
		first = min(first, tg.Layer)
	}
	quantized := func(module string) bool {
		if q == nil {
			return false
		}
		_, _, ok := q.For(module)
		return ok
	}
	n, l := o.PromptLen, o.CanvasLen
	h, v := t.HiddenSize, t.VocabSize
	// Layers before the first adapted one see no traced input: nothing of theirs is kept.
	for i := first; i < t.NumHiddenLayers; i++ {
		g := passGeom{t: t, rank: o.Rank, lora: lora[i], dense: map[string]bool{}}
		for _, key := range LoRAKeys() {
			g.dense[key] = !quantized(LayerPrefix(i) + "." + key)
		}
		g.denseExperts = !quantized(LayerPrefix(i) + ".experts.gate_up_proj")
		if n > 0 {
			c.layerPass(g, i, n, n, true, i == t.NumHiddenLayers-1)
		}
		c.layerPass(g, i, l, n, false, false)
	}
	// Inputs of the first traced layer: the scaled prompt embedding (the encoder's residual)
	// and the normed canvas embedding.
	c.f32(actEmbed, false, (n+l)*h)

	// Head: final norm, h·Eᵀ (plus Eᵀ when the table is dense), /cap, tanh, ·cap; the loss's
	// per-position terms are [L].
	c.f32(actHead, false, l*h)
	if !quantized(DecoderPrefix + ".embed_tokens") {
		c.f32(actHead, false, v*h)
	}
	c.f32(actHead, false, 2*l*v) // z, z/cap
	c.f32(actHead, true, 2*l*v)  // tanh, logits
	c.f32(actHead, false, 6*l)
	c.f32(actBackward, true, 3*l*v)

	groups := []string{actEmbed, actAttnProj, actKV, actScores, actDense, actRouter, actExperts, actHead, actBackward}
	out := make([]MemoryItem, 0, len(groups))
	for _, name := range groups {
		if c.by[name] > 0 {
			out = append(out, MemoryItem{Group: "activations", Name: name, Bytes: c.by[name]})
		}
	}
	return out
}

// String is a human-readable breakdown, one component per line with its parts indented.
func (m MemoryEstimate) String() string {
	var b strings.Builder
	o := m.Options
	fmt.Fprintf(&b, "memory estimate: prompt %d + canvas %d tokens, LoRA rank %d on %d linears (%d params), %s compute, retention %s, GOGC %d\n",
		o.PromptLen, o.CanvasLen, o.Rank, m.AdaptedLinears, m.TrainableParams, o.DType, o.Retention, o.GCPercent)
	line := func(indent, name string, n int64) {
		fmt.Fprintf(&b, "%s%-*s %12s\n", indent, 56-len(indent), name, FormatBytes(n))
	}
	parts := func(group string) {
		for _, it := range m.Breakdown {
			if it.Group == group {
				line("    ", it.Name, it.Bytes)
			}
		}
	}
	line("  ", "weights", m.Weights)
	parts("weights")
	line("  ", "LoRA parameters (f32)", m.LoRAParams)
	line("  ", "LoRA gradients (f32)", m.Gradients)
	line("  ", "optimizer state (AdamW m, v)", m.OptimizerState)
	line("  ", "activations", m.Activations)
	parts("activations")
	if m.GCHeadroom > 0 {
		line("  ", fmt.Sprintf("Go GC headroom (GOGC %d)", o.GCPercent), m.GCHeadroom)
	}
	line("  ", "total", m.Total)
	return b.String()
}

// FormatBytes renders n in binary units with three significant figures (e.g. "13.2 GiB").
func FormatBytes(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	f := float64(n)
	u := 0
	for f >= 1024 && u < len(units)-1 {
		f /= 1024
		u++
	}
	// Thresholds sit where rounding would carry into the next digit (9.996 → "10.0").
	switch {
	case u == 0:
		return fmt.Sprintf("%d B", n)
	case f >= 99.95:
		return fmt.Sprintf("%.0f %s", f, units[u])
	case f >= 9.995:
		return fmt.Sprintf("%.1f %s", f, units[u])
	}
	return fmt.Sprintf("%.2f %s", f, units[u])
}
