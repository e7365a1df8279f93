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
// counted tensor by tensor from the forward of model.go and experts.go as the go engine runs
// it (actCounter.layerPass mirrors Layer.forward, attention, route and sortedExperts;
// activationBytes adds the head). The go engine's autodiff records every op whose input
// descends from a LoRA parameter and keeps each recorded tensor and its inputs until the
// backward pass ends, so under RetainGraph every such intermediate counts: a LoRA linear's
// x·A and output, the normed and transposed q/k/v, the attention output
// (the fused attention keeps one log-sum-exp per query row, and its probabilities when they
// fit keptScores), GeGLU's one
// output, the experts' gathered rows, gate/up, outputs in sorted and in token order, and
// their int32 permutations. A transposed weight is a view, never a copy. Tensors the loss
// does not reach are garbage as soon as they are made and do not count: the router's
// negated scores, and in the encoder's last layer everything but the K/V projections (only
// the cache is read later). RetainNeeded counts only what the VJPs read — what an engine
// that frees eagerly would hold. Both add the largest backward transient, at the head: ~3
// f32 copies of the [L, V] logits (softmax of the log-sum-exp VJP, its product with the
// cotangent, the tanh VJP).
//
// With GradCheckpoint (grad_checkpoint: true) every layer pass runs through
// mx.GradCheckpoint: the forward keeps only each pass's outputs (the hidden state, the
// encoder's K/V cache) and the decoder's inputs, plus the head's graph; the backward
// re-runs one pass at a time, so the peak holds those plus the largest single pass's graph
// and its backward transient (about two more copies of its biggest tensor).
//
// Weights: the go engine uses a checkpoint's mapped float32, uint32 and half tensors in
// place (mx.Checkpoint.LoadMapped), so packed codes and tensors stored in the compute dtype
// are the file's pages — resident once read, but outside Go's heap — while tensors stored
// in another dtype (bfloat16 scales and norms of an MLX checkpoint) are mapped and also
// copied into the heap in the compute dtype. MappedWeights selects that accounting; without
// it every weight is a heap copy in the compute dtype.
//
// Go's collector lets the heap grow to (1 + GOGC/100)× the live heap before collecting, and
// a training step allocates several times its live set, so the process's resident memory
// reaches that bound; GCPercent adds it as GCHeadroom over the heap (mapped weights are not
// in it; 0 when the memory is not in Go's heap or a memory limit is set).

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
	// GCPercent is Go's GOGC: GCHeadroom = GCPercent/100 of the live heap. 0 adds none.
	GCPercent int
	// GradCheckpoint estimates a step with grad_checkpoint: true (per-layer recomputation).
	GradCheckpoint bool
	// SeparatePasses estimates the encoder and decoder passes run one after the other, as
	// with LoRA dropout or an encoder with its own factors; otherwise (the reference
	// objective's step where the passes share every linear, Model.EncodeDecodeHidden)
	// each layer runs once over the prompt and canvas rows together. It matters with
	// GradCheckpoint, whose re-run pass is then the N + L rows of a layer.
	SeparatePasses bool
	// MappedWeights counts weights as the go engine loads them: in place from the mapped
	// checkpoint where the stored dtype needs no conversion (see the package comment).
	MappedWeights bool
	// StoredDType is the dtype of the checkpoint's unquantized tensors and scales; zero
	// means the config's "dtype" (bfloat16 when it has none), float32 for an unquantized
	// base written by probe mkmodel.
	StoredDType mx.DType
}

// MemoryEstimate is the predicted peak of one training step, in bytes.
type MemoryEstimate struct {
	Weights        int64 // the base model as the engine holds it (MappedWeights + heap copies)
	MappedWeights  int64 // the part of Weights that is the checkpoint's mapped pages, outside Go's heap
	LoRAParams     int64 // adapter A [in, r] and B [r, out], float32
	Gradients      int64 // one float32 gradient per LoRA parameter
	OptimizerState int64 // AdamW m and v, float32
	Activations    int64 // forward tensors alive when the backward starts, plus its largest transient
	GCHeadroom     int64 // garbage Go's collector lets accumulate (GCPercent/100 of the live heap)
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
	stored := o.StoredDType
	if stored == 0 {
		stored = storedDType(cfg, q)
	}
	weights, mapped, err := weightBytes(cfg, q, o.DType, stored, o.MappedWeights)
	if err != nil {
		return MemoryEstimate{}, fmt.Errorf("diffusiongemma: estimate: %w", err)
	}
	for _, it := range weights {
		est.Weights += it.Bytes
	}
	est.MappedWeights = mapped
	est.TrainableParams = LoRAParamCount(targets, o.Rank)
	est.LoRAParams = 4 * est.TrainableParams
	est.Gradients = 4 * est.TrainableParams
	est.OptimizerState = 2 * 4 * est.TrainableParams
	acts := activationBytes(cfg, targets, o)
	for _, it := range acts {
		est.Activations += it.Bytes
	}
	live := est.Weights + est.LoRAParams + est.Gradients + est.OptimizerState + est.Activations
	est.GCHeadroom = (live - est.MappedWeights) * int64(o.GCPercent) / 100
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

// storedDType is what a checkpoint of cfg stores unquantized tensors and scales in: the
// config's dtype, else bfloat16 for a quantized base (MLX) and float32 for an unquantized
// one (probe mkmodel --bits 0).
func storedDType(cfg *Config, q *Quantization) mx.DType {
	switch cfg.TextConfig.Dtype {
	case "float32":
		return mx.Float32
	case "float16":
		return mx.Float16
	case "bfloat16":
		return mx.BFloat16
	}
	if q == nil {
		return mx.Float32
	}
	return mx.BFloat16
}

// weightBytes sizes every tensor of ExpectedTensors as the engine holds it: quantized
// modules as uint32 codes plus scales and biases, everything else as one tensor. Without
// mapping everything but the codes is a heap copy in the compute dtype. With mapping the
// codes, and tensors stored in the compute dtype, are the file's pages only (mapped);
// tensors stored in another dtype are mapped and copied (both count). It returns the
// groups and the mapped total. The vision tower is not loaded for text training and is not
// counted.
func weightBytes(cfg *Config, q *Quantization, compute, stored mx.DType, mapping bool) ([]MemoryItem, int64, error) {
	groups := []string{groupEmbedding, groupAttention, groupMLP, groupRouter, groupExperts, groupSelfCond, groupNorms}
	by := make(map[string]int64, len(groups))
	var mapped int64
	// plain sizes n elements stored in `stored` and used in `compute`.
	plain := func(n int64) int64 {
		if !mapping {
			return n * int64(compute.Size())
		}
		m := n * int64(stored.Size())
		mapped += m
		if stored == compute {
			return m
		}
		return m + n*int64(compute.Size())
	}
	t := &cfg.TextConfig
	for r := range textTensors(t, t.NumHiddenLayers) {
		shape := r.def.shape(t, r.layer)
		n := prod(shape)
		var b int64
		bits, group, quantized := 0, 0, false
		if q != nil && r.def.kind.Quantizable() {
			bits, group, quantized = q.For(r.module)
		}
		if quantized {
			w, s, err := QuantizedShapes(shape, bits, group)
			if err != nil {
				return nil, 0, fmt.Errorf("%s: %w", r.module, err)
			}
			b = 4*prod(w) + plain(2*prod(s))
			if mapping {
				mapped += 4 * prod(w)
			}
		} else {
			b = plain(n)
		}
		by[r.def.group] += b
	}
	out := make([]MemoryItem, 0, len(groups))
	for _, g := range groups {
		if by[g] > 0 {
			out = append(out, MemoryItem{Group: "weights", Name: g, Bytes: by[g]})
		}
	}
	return out, mapped, nil
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
	actScores   = "attention (log-sum-exps, probabilities up to 8 MiB a call, encoder masks)"
	actKV       = "attention keys and values (transposed, concatenated)"
	actDense    = "dense MLP (with GELU temporaries)"
	actRouter   = "router"
	actExperts  = "experts (sorted rows, gate/up, outputs, permutations)"
	actRerun    = "one layer pass re-run in the backward (grad_checkpoint)"
	actHead     = "head: logits and softcap"
	actBackward = "backward transient (logit cotangents, or one attention call's scores)"
)

// actCounter adds up activation bytes by group, keeping a tensor when the retention keeps
// everything or when a VJP reads it (needed).
type actCounter struct {
	all bool
	by  map[string]int64
	// transient is the largest scratch one attention call's backward allocates (see
	// attentionTransient); it is not kept, so it is not in by.
	transient int64
}

func newActCounter(all bool) *actCounter { return &actCounter{all: all, by: map[string]int64{}} }

func (c *actCounter) f32(group string, needed bool, elems int) {
	c.bytes(group, needed, 4*int64(elems))
}

func (c *actCounter) i32(group string, needed bool, elems int) {
	c.bytes(group, needed, 4*int64(elems))
}

func (c *actCounter) bytes(group string, needed bool, b int64) {
	if needed || c.all {
		c.by[group] += b
	}
}

func (c *actCounter) total() int64 {
	var t int64
	for _, b := range c.by {
		t += b
	}
	return t
}

// keptScores is the go engine's limit (floats) on the attention probabilities one call
// keeps for its backward (goeng's maxKeptScores).
const keptScores = 1 << 21

// attnScratch is the go engine's bound (floats) on the scores one attention call holds at
// once (goeng's maxScratch).
const attnScratch = 1 << 23

// attentionTransient is the scratch the go engine's attention backward allocates for one
// call of nh query heads over nkv kv heads, s queries and nk keys, in bytes: dP beside the
// kept probabilities when those fit keptScores; else the scores and dP of as many kv-head
// blocks (G = nh/nkv query heads × s rows × nk keys each) as fit attnScratch floats — at
// least one block, however large, which is what a long prompt costs: a 25,000-token prompt
// on the tiny preset's sliding layer is 2 × 2·25,000² floats, 10 GB.
func attentionTransient(nh, nkv, s, nk int) int64 {
	p := int64(nh) * int64(s) * int64(nk)
	if p <= keptScores {
		return 4 * p
	}
	block := 2 * p / int64(max(nkv, 1))
	g := max(1, min(int64(nkv), attnScratch/block))
	return 4 * g * block
}

// passGeom is what one layer pass needs to know about the model and the adapters.
type passGeom struct {
	t    *TextConfig
	rank int
	lora map[string]bool // keys adapted in this layer
}

// linear counts y = base(x) [+ scale·((x·A)·B)] for s rows of in → out: a plain linear is
// one output; a LoRA linear (one op, mx.LoRADense/LoRAQuantized, without dropout) is x·A,
// which its VJP reads, and its output. outNeeded says whether a VJP downstream reads y.
// (With LoRA dropout the composition also keeps base(x) and the dropped-out x: not
// counted.)
func (c *actCounter) linear(group string, g passGeom, key string, s, in, out int, outNeeded bool) {
	if g.lora[key] {
		c.f32(group, true, s*g.rank) // x·A
	}
	c.f32(group, outNeeded, s*out)
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
	// The decoder reads the encoded positions from first on (§3.6.2), sliced out of the
	// cache when first > 0.
	first := t.decoderKeyStart(t.IsFull(i), n)
	cached := 0
	if !encoder {
		cached = n - first
	}
	nk := cached + s
	// RoPE(k) and v are the attention's own inputs unless the decoder concatenates them
	// after the cached positions.
	ownKV := !kvOnly && cached == 0

	// Attention (§3.2): input norm, q/k/v projections, q/k norm + transpose + RoPE, v norm +
	// transpose.
	c.f32(actEmbed, g.lora["self_attn.q_proj"] || g.lora["self_attn.k_proj"] || g.lora["self_attn.v_proj"], s*h)
	if !kvOnly {
		c.linear(actAttnProj, g, "self_attn.q_proj", s, h, qw, true)
		c.f32(actAttnProj, false, 2*s*qw) // q_norm, transpose
		c.f32(actAttnProj, true, s*qw)    // RoPE(q): the attention's input
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

	// Fused attention: its output, one float64 log-sum-exp per query row for the backward,
	// and the probabilities [heads, s, keys] when they fit keptScores (the backward
	// recomputes them block by block otherwise).
	if !encoder {
		if first > 0 {
			c.f32(actKV, false, 2*cached*kvw) // the last window−1 encoder positions, sliced
		}
		if cached > 0 {
			c.f32(actKV, true, 2*nk*kvw) // [encoder K; canvas K], same for V
		}
	}
	c.bytes(actScores, true, 8*int64(nh*s))
	if p := nh * s * nk; p <= keptScores {
		c.f32(actScores, true, p)
	}
	if encoder && s > 1 {
		// The encoder's causal (and sliding-window) mask, one bool per query and key,
		// which the attention's VJP reads; the decoder attends without one.
		c.bytes(actScores, true, int64(s)*int64(nk))
	}
	c.transient = max(c.transient, attentionTransient(nh, t.LayerKVHeads(i), s, nk))
	c.f32(actAttnProj, false, s*qw)                      // attention output [heads, s, d]
	c.f32(actAttnProj, g.lora["self_attn.o_proj"], s*qw) // transposed back
	c.linear(actAttnProj, g, "self_attn.o_proj", s, qw, h, true)

	// Residual and dense GeGLU branch (§3.3).
	c.f32(actEmbed, false, s*h) // post-attention norm
	c.f32(actEmbed, true, s*h)  // h_mid
	c.f32(actDense, g.lora["mlp.gate_proj"] || g.lora["mlp.up_proj"], s*h)
	c.linear(actDense, g, "mlp.gate_proj", s, h, inter, true)
	c.linear(actDense, g, "mlp.up_proj", s, h, inter, true)
	c.f32(actDense, g.lora["mlp.down_proj"], s*inter) // GeGLU (one fused op)
	c.linear(actDense, g, "mlp.down_proj", s, inter, h, true)
	c.f32(actDense, false, s*h) // post_feedforward_layernorm_1

	// Router (§3.4): no-scale norm, ·scale, ·root, scores; top-k indices, softmax, ·per-expert.
	c.f32(actRouter, false, 2*s*h)
	c.f32(actRouter, g.lora["router.proj"], s*h)
	c.linear(actRouter, g, "router.proj", s, h, ne, false)
	c.i32(actRouter, true, s*k)  // indices
	c.f32(actRouter, false, s*k) // selected scores
	c.f32(actRouter, true, s*k)  // softmax
	c.f32(actRouter, true, s*k)  // per-expert scales
	c.f32(actRouter, true, s*k)  // weights

	// Experts (experts.go): norm; the (token, slot) pairs sorted by expert (sorted
	// indices, token of each pair, inverse permutation: int32); rows gathered in that order;
	// fused gate/up; GeGLU of its halves; down; back in token order, weighted and summed
	// over the slots in one op.
	c.f32(actExperts, false, s*h)
	c.i32(actExperts, true, 3*s*k)
	c.f32(actExperts, false, s*k*h)   // gathered rows
	c.f32(actExperts, true, s*k*2*im) // gate_up (GeGLUSplit's input)
	c.f32(actExperts, false, s*k*im)  // GeGLU
	c.f32(actExperts, true, s*k*h)    // down, sorted (TakeWeightedSum's rows)
	c.f32(actExperts, true, s*h)      // Σ_k w·rows, in token order
	c.f32(actExperts, false, s*h)     // post_feedforward_layernorm_2

	// Merge: h1 + h2, norm, + h_mid, ·layer_scalar.
	c.f32(actEmbed, true, s*h)
	c.f32(actEmbed, false, 2*s*h)
	c.f32(actEmbed, true, s*h)
}

// passBoundary counts what a checkpointed layer pass keeps: its outputs — the hidden
// state (not for the encoder's last layer) and, on the encoder, the K/V cache after the
// pass (trimmed to the window on sliding layers) — and, on the decoder, the slices of the
// cache it reads.
func (c *actCounter) passBoundary(g passGeom, i, s, n int, encoder, last bool) {
	t := g.t
	h, kvw := t.HiddenSize, t.LayerKVHeads(i)*t.LayerHeadDim(i)
	sliding := !t.IsFull(i) && t.SlidingWindow > 0
	if encoder {
		if !last {
			c.f32(actEmbed, true, s*h)
		}
		keep := s
		if sliding {
			keep = min(s, t.SlidingWindow)
		}
		c.f32(actKV, true, 2*keep*kvw)
		return
	}
	c.f32(actEmbed, true, s*h)
	if first := t.decoderKeyStart(t.IsFull(i), n); first > 0 {
		c.f32(actKV, true, 2*(n-first)*kvw) // the last window−1 encoder positions, sliced
	}
}

// activationBytes counts the forward tensors alive when the backward pass starts, plus the
// head's backward transient, by group; with o.GradCheckpoint, the peak of the backward
// pass: the passes' boundaries, the head's graph and the largest single pass re-run.
func activationBytes(cfg *Config, targets []LoRATarget, o EstimateOptions) []MemoryItem {
	t := &cfg.TextConfig
	all := o.Retention == RetainGraph
	c := newActCounter(all)
	lora := make([]map[string]bool, t.NumHiddenLayers)
	first := t.NumHiddenLayers
	for _, tg := range targets {
		if lora[tg.Layer] == nil {
			lora[tg.Layer] = map[string]bool{}
		}
		lora[tg.Layer][tg.Key] = true
		first = min(first, tg.Layer)
	}
	n, l := o.PromptLen, o.CanvasLen
	h, v := t.HiddenSize, t.VocabSize
	var rerun *actCounter // the largest pass's graph, re-run in the backward (GradCheckpoint)
	pass := func(g passGeom, i, s int, encoder, kvOnly bool) {
		if !o.GradCheckpoint {
			c.layerPass(g, i, s, n, encoder, kvOnly)
			return
		}
		c.passBoundary(g, i, s, n, encoder, kvOnly)
		one := newActCounter(all)
		one.layerPass(g, i, s, n, encoder, kvOnly)
		if rerun == nil || one.total() > rerun.total() {
			rerun = one
		}
	}
	fused := o.GradCheckpoint && n > 0 && !o.SeparatePasses
	// Layers before the first adapted one see no traced input: nothing of theirs is kept.
	for i := first; i < t.NumHiddenLayers; i++ {
		g := passGeom{t: t, rank: o.Rank, lora: lora[i]}
		if last := i == t.NumHiddenLayers-1; fused {
			// One checkpointed pass over the N + L rows: it keeps its output (the canvas
			// rows alone after the last layer) and re-runs both passes' graphs at once.
			c.f32(actEmbed, true, l*h)
			if !last {
				c.f32(actEmbed, true, n*h)
			}
			one := newActCounter(all)
			one.layerPass(g, i, n, n, true, last)
			one.layerPass(g, i, l, n, false, false)
			if rerun == nil || one.total() > rerun.total() {
				rerun = one
			}
			continue
		}
		if n > 0 {
			pass(g, i, n, true, i == t.NumHiddenLayers-1)
		}
		pass(g, i, l, false, false)
	}
	// Inputs of the first traced layer: the scaled prompt embedding (the encoder's residual)
	// and the normed canvas embedding.
	c.f32(actEmbed, false, (n+l)*h)

	// Head: final norm, h·Eᵀ (a transposed view of a dense table: no copy), /cap, tanh,
	// ·cap; the loss's per-position terms are [L].
	c.f32(actHead, false, l*h)
	c.f32(actHead, false, 2*l*v) // z, z/cap
	c.f32(actHead, true, 2*l*v)  // tanh, logits
	c.f32(actHead, false, 6*l)
	headTransient := int64(4 * 3 * l * v)
	if rerun == nil {
		c.bytes(actBackward, true, max(headTransient, c.transient))
	} else {
		// By the time the passes are re-run the head's cotangents are gone (its graph stays):
		// the peak is the larger of the head's transient and one re-run pass with its own
		// (about two copies of its biggest tensor, the experts' rows).
		rows := max(l, n)
		if fused {
			rows = n + l
		}
		passTransient := max(2*4*int64(rows*t.TopKExperts*h), rerun.transient)
		if rerun.total()+passTransient > headTransient {
			c.bytes(actRerun, true, rerun.total())
			c.bytes(actBackward, true, passTransient)
		} else {
			c.bytes(actBackward, true, headTransient)
		}
	}

	groups := []string{actEmbed, actAttnProj, actKV, actScores, actDense, actRouter, actExperts, actHead, actRerun, actBackward}
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
	ckpt := ""
	if o.GradCheckpoint {
		ckpt = ", grad_checkpoint"
	}
	fmt.Fprintf(&b, "memory estimate: prompt %d + canvas %d tokens, LoRA rank %d on %d linears (%d params), %s compute, retention %s%s, GOGC %d\n",
		o.PromptLen, o.CanvasLen, o.Rank, m.AdaptedLinears, m.TrainableParams, o.DType, o.Retention, ckpt, o.GCPercent)
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
	if m.MappedWeights > 0 {
		line("    ", "of which mapped from the checkpoint (not Go heap)", m.MappedWeights)
	}
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
