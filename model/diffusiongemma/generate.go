package diffusiongemma

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/dgtune/dgtune/imageproc"
	"github.com/dgtune/dgtune/mx"
)

// Sampler names (GenerateOptions.Sampler).
const (
	// SamplerConfidence accepts positions whose chosen token has probability ≥ Threshold and
	// keeps them for the rest of the block (mlx-vlm's public default).
	SamplerConfidence = "confidence"
	// SamplerEntropy accepts the lowest-entropy positions within an entropy budget,
	// recomputed from scratch each step (the checkpoint's sampler_config).
	SamplerEntropy = "entropy"
)

// Finish reasons (GenerateResult.FinishReason).
const (
	FinishStop   = "stop"   // an EOS token was produced (and not emitted)
	FinishLength = "length" // MaxTokens were produced
)

// Engine defaults not carried by the generation config (§1.5, §4.1).
const (
	DefaultConfidenceThreshold = 0.9
	DefaultMinCanvas           = 64
)

// GenerateOptions drives Generate (§4.1). DefaultGenerateOptions fills it from a config.
type GenerateOptions struct {
	MaxTokens int // tokens to produce at most; an EOS counts as produced
	Steps     int // maximum denoising steps (decoder passes) per block
	Sampler   string
	Threshold float64 // τ of the confidence sampler, in [0, 1]
	// EntropyBound is β of the entropy sampler.
	EntropyBound float64
	// Temperature > 0 samples the denoiser canvas from softmax(P/Temperature); 0 takes the
	// argmax.
	Temperature float64
	// TMin and TMax bound the linear logit-temperature schedule; both must be positive.
	TMin, TMax float64
	MinCanvas  int
	MaxCanvas  int  // 0 means the model's canvas_length
	FullCanvas bool // every block uses the model's canvas_length
	// StopRule enables the stable-and-confident early stop of §4.6; nil turns it off.
	StopRule *StopRule
	// NoSelfConditioning runs every decoder pass without the previous pass's soft
	// embedding, as a first pass (for ablations; the references always condition).
	NoSelfConditioning bool
	// EOS ends generation at the first occurrence; the token is not emitted.
	EOS  []int
	Seed uint64
	// OnStep, if set, is called after every decoder pass. It costs one device→host copy of a
	// few canvas-sized arrays per pass.
	OnStep func(StepInfo)
	// OnBlock, if set, is called once per block with the tokens it emitted, as soon as the
	// block is final: the seam for streaming text while later blocks are denoised.
	OnBlock func(BlockInfo)
	// Interrupt, if set, is polled before every block and every decoder pass; the first
	// non-nil error it returns stops generation there (pass it a context's Err).
	Interrupt func() error
}

// BlockInfo reports one finished block to GenerateOptions.OnBlock.
type BlockInfo struct {
	Block  int     // 0-based block index
	Tokens []int32 // the tokens the block emitted (EOS and what follows it dropped); a fresh copy
	Steps  int     // decoder passes the block took
	Last   bool    // generation ends with this block (an EOS, or MaxTokens reached)
}

// StepInfo reports one decoder pass to GenerateOptions.OnStep. Slices are fresh copies.
type StepInfo struct {
	Block       int     // 0-based block index
	Pass        int     // 1-based decoder pass within the block
	Step        int     // schedule step, counting down from Steps to 1
	Temperature float64 // schedule temperature T of this pass
	Offset      int     // tokens encoded before this block: the canvas's first position
	Input       []int32 // canvas fed to this pass
	Argmax      []int32 // argmax of the processed logits
	// Canvas and Revealed are the sampler's output: the next pass's input and the accepted
	// positions. Both are nil on the step-1 pass, which runs no sampler.
	Canvas   []int32
	Revealed []bool
	Final    bool // Argmax is this block's result
}

// GenerateResult is what Generate produced.
type GenerateResult struct {
	Tokens       []int32
	FinishReason string // FinishStop or FinishLength
	Steps        int    // decoder passes over all blocks
	Blocks       int
	CanvasTokens int   // Σ block length L
	WorkTokens   int   // Σ L·steps, the canvas positions the decoder processed
	BlockSteps   []int // decoder passes per block
}

// DefaultGenerateOptions returns the §4.1 defaults, taking max_new_tokens, the step budget,
// the temperature schedule, the entropy bound and the stop rule from cfg's generation config
// (the §1.5 defaults when it has none) and EOS from every id cfg lists. A caller with a
// tokenizer adds its stop ids to EOS.
func DefaultGenerateOptions(cfg *Config) GenerateOptions {
	g := DefaultGenerationConfig()
	var eos []int
	canvas := 0
	if cfg != nil {
		if cfg.GenerationConfig != nil {
			g = *cfg.GenerationConfig
		}
		eos = cfg.EOSSet()
		canvas = cfg.CanvasLength
	}
	tMin, tMax := g.TemperatureRange()
	opt := GenerateOptions{
		MaxTokens:    g.MaxNewTokens,
		Steps:        g.MaxDenoisingSteps,
		Sampler:      SamplerConfidence,
		Threshold:    DefaultConfidenceThreshold,
		EntropyBound: g.EntropyBound(),
		TMin:         tMin,
		TMax:         tMax,
		MinCanvas:    DefaultMinCanvas,
		MaxCanvas:    canvas,
		EOS:          eos,
	}
	if r, on := g.Stop(); on {
		opt.StopRule = &r
	}
	return opt
}

// ErrBadGenerateOptions is wrapped by every option and prompt validation error of Generate.
var ErrBadGenerateOptions = errors.New("diffusiongemma: generate")

func (o *GenerateOptions) validate(vocab, modelCanvas int) error {
	var p problems
	if o.MaxTokens <= 0 {
		p.addf("max tokens must be positive, got %d", o.MaxTokens)
	}
	if o.Steps <= 0 {
		p.addf("denoising steps must be positive, got %d", o.Steps)
	}
	if o.Sampler != SamplerConfidence && o.Sampler != SamplerEntropy {
		p.addf("sampler %q is unknown (want %q or %q)", o.Sampler, SamplerConfidence, SamplerEntropy)
	}
	if !(o.Threshold >= 0 && o.Threshold <= 1) {
		p.addf("confidence threshold must be in [0, 1], got %g", o.Threshold)
	}
	if !(o.EntropyBound >= 0) || math.IsInf(o.EntropyBound, 1) {
		p.addf("entropy bound must be finite and >= 0, got %g", o.EntropyBound)
	}
	if !(o.Temperature >= 0) || math.IsInf(o.Temperature, 1) {
		p.addf("temperature must be finite and >= 0 (0 = greedy), got %g", o.Temperature)
	}
	// Logits are divided by the schedule temperature, which lies between the two ends.
	if !(o.TMin > 0) || !(o.TMax > 0) || math.IsInf(o.TMin, 1) || math.IsInf(o.TMax, 1) {
		p.addf("schedule temperatures must be finite and positive, got t_min %g, t_max %g", o.TMin, o.TMax)
	}
	if o.MinCanvas <= 0 {
		p.addf("min canvas must be positive, got %d", o.MinCanvas)
	}
	if o.MaxCanvas < 0 {
		p.addf("max canvas must be >= 0 (0 = the model's %d), got %d", modelCanvas, o.MaxCanvas)
	}
	if modelCanvas <= 0 {
		p.addf("model canvas_length must be positive, got %d", modelCanvas)
	}
	if r := o.StopRule; r != nil {
		if r.StabilityThreshold < 0 {
			p.addf("stop rule stability threshold must be >= 0, got %d", r.StabilityThreshold)
		}
		if !(r.ConfidenceThreshold >= 0) {
			p.addf("stop rule confidence threshold must be >= 0, got %g", r.ConfidenceThreshold)
		}
	}
	for _, id := range o.EOS {
		if id < 0 || id >= vocab {
			p.addf("eos id %d is outside the vocabulary [0, %d)", id, vocab)
		}
	}
	if len(p) > 0 {
		return fmt.Errorf("%w: %s", ErrBadGenerateOptions, strings.Join(p, "; "))
	}
	return nil
}

// Generate runs block-diffusion generation (§4.2) for one prompt (batch 1): encode the prompt,
// then per block draw a uniform random canvas, denoise it (§4.3), emit its final argmax up to
// the first EOS, and re-encode the whole final canvas before the next block.
func (m *Model) Generate(prompt []int32, opt GenerateOptions) (*GenerateResult, error) {
	return m.GenerateWithImages(prompt, nil, opt)
}

// generate is Generate with the prompt's images (checked by GenerateWithImages).
func (m *Model) generate(prompt []int32, images []*imageproc.Image, opt GenerateOptions) (*GenerateResult, error) {
	vocab := m.Config.TextConfig.VocabSize
	if err := opt.validate(vocab, m.Config.CanvasLength); err != nil {
		return nil, err
	}
	if len(prompt) == 0 {
		return nil, fmt.Errorf("%w: prompt is empty", ErrBadGenerateOptions)
	}
	for i, id := range prompt {
		if id < 0 || int(id) >= vocab {
			return nil, fmt.Errorf("%w: prompt token %d is %d, outside the vocabulary [0, %d)", ErrBadGenerateOptions, i, id, vocab)
		}
	}
	g := &generator{m: m, e: m.Engine, opt: opt, vocab: vocab, eos: map[int32]bool{}, images: images}
	for _, id := range opt.EOS {
		g.eos[int32(id)] = true
	}
	g.keys = newKeySequence(g.e, opt.Seed)
	defer func() { g.keys.state.Free() }()
	return g.run(prompt)
}

// ErrInterrupted wraps the error of GenerateOptions.Interrupt when it stopped generation.
var ErrInterrupted = errors.New("diffusiongemma: generation interrupted")

// interrupted polls GenerateOptions.Interrupt.
func (g *generator) interrupted() error {
	if g.opt.Interrupt == nil {
		return nil
	}
	if err := g.opt.Interrupt(); err != nil {
		return fmt.Errorf("%w: %w", ErrInterrupted, err)
	}
	return nil
}

// generator is the state of one Generate call.
type generator struct {
	m     *Model
	e     mx.Engine
	opt   GenerateOptions
	vocab int
	eos   map[int32]bool
	keys  *keySequence
	// images are the prompt's images, encoded with the first prefill only.
	images []*imageproc.Image
}

// run generates block after block. When Interrupt stops it, it returns what the finished
// blocks produced together with the error.
func (g *generator) run(prompt []int32) (*GenerateResult, error) {
	o := &g.opt
	cache := g.m.NewCache()
	defer freeCache(cache)
	res := &GenerateResult{FinishReason: FinishLength}
	if err := g.interrupted(); err != nil {
		return res, err
	}
	g.encode(cache, prompt, g.images)
	generated := 0
	var prev []int32
	for block := 0; generated < o.MaxTokens; block++ {
		if err := g.interrupted(); err != nil {
			return res, err
		}
		if prev != nil {
			g.encode(cache, prev, nil)
		}
		l := CanvasLength(o.MaxTokens-generated, o.MinCanvas, o.MaxCanvas, g.m.Config.CanvasLength, o.FullCanvas)
		canvas, steps, err := g.denoise(cache, block, l)
		if err != nil {
			return res, err
		}
		res.Blocks++
		res.Steps += steps
		res.BlockSteps = append(res.BlockSteps, steps)
		res.CanvasTokens += l
		res.WorkTokens += l * steps
		out, used, stop := emit(canvas, g.eos, o.MaxTokens-generated)
		res.Tokens = append(res.Tokens, out...)
		generated += used
		if stop {
			res.FinishReason = FinishStop
		}
		if o.OnBlock != nil {
			o.OnBlock(BlockInfo{Block: block, Tokens: slices.Clone(out), Steps: steps, Last: stop || generated >= o.MaxTokens})
		}
		if stop {
			break
		}
		prev = canvas
	}
	return res, nil
}

// emit walks a block's final canvas (§4.2e): every token counts against budget; the first EOS
// stops generation without being emitted; reaching the budget stops after that token. It
// returns the emitted tokens, how many canvas tokens were consumed and whether an EOS was hit.
func emit(canvas []int32, eos map[int32]bool, budget int) (out []int32, used int, stop bool) {
	for _, t := range canvas {
		if used >= budget {
			break
		}
		used++
		if eos[t] {
			return out, used, true
		}
		out = append(out, t)
	}
	return out, used, false
}

// encode appends ids to the cache with the encoder (§3.5), releasing the step's temporaries
// and the cache arrays the concatenation replaced.
func (g *generator) encode(c *Cache, ids []int32, images []*imageproc.Image) {
	var old []*mx.Array
	for _, lc := range c.Layers {
		old = append(old, lc.K, lc.V)
	}
	mx.Tidy(g.e, func() []*mx.Array {
		if err := g.m.EncodeWithImages(mx.FromInt32(g.e, ids, 1, len(ids)), images, c); err != nil {
			panic(err) // GenerateWithImages checked the images against the prompt
		}
		var keep []*mx.Array
		for _, lc := range c.Layers {
			keep = append(keep, lc.K, lc.V)
		}
		return keep
	})
	var now []*mx.Array
	for _, lc := range c.Layers {
		now = append(now, lc.K, lc.V)
	}
	release(old, now...)
}

func freeCache(c *Cache) {
	for _, lc := range c.Layers {
		release([]*mx.Array{lc.K, lc.V})
		lc.K, lc.V = nil, nil
	}
}

// release frees the arrays of old that are not among keep (nil entries are skipped; an array
// listed twice is freed once).
func release(old []*mx.Array, keep ...*mx.Array) {
	var done []*mx.Array
	for _, a := range old {
		if a == nil || slices.Contains(keep, a) || slices.Contains(done, a) {
			continue
		}
		a.Free()
		done = append(done, a)
	}
}

// blockState is what the denoising loop carries from one pass to the next.
type blockState struct {
	current *mx.Array // canvas fed to the next pass, int32 [1, L]
	draft   *mx.Array // confidence sampler: the accepted token per revealed position
	reveal  *mx.Array // bool [1, L]
	sc      *mx.Array // self-conditioning soft embedding, nil before the first pass
}

func (s *blockState) arrays() []*mx.Array { return []*mx.Array{s.current, s.draft, s.reveal, s.sc} }

// passOut is one decoder pass and its sampler step.
type passOut struct {
	processed *mx.Array // P = logits / T, float32 [1, L, V]
	argmax    *mx.Array // int32 [1, L]
	next      blockState
}

// denoise runs §4.3 for one block of length l and returns the argmax canvas of its last
// decoder pass and the number of passes, or Interrupt's error.
func (g *generator) denoise(cache *Cache, block, l int) ([]int32, int, error) {
	o := &g.opt
	st := blockState{current: g.noise(l)}
	st.reveal = mx.Zeros(g.e, []int{1, l}, mx.Bool)
	st.draft = st.current
	stab := newStability(o.StopRule)
	var result []int32
	pass := 0
	for step := o.Steps; step >= 1; step-- {
		if err := g.interrupted(); err != nil {
			release(st.arrays())
			return nil, pass, err
		}
		pass++
		temp := ScheduleTemperature(step, o.Steps, o.TMin, o.TMax)
		final := step == 1
		var input []int32
		if o.OnStep != nil {
			input = st.current.Int32s()
		}
		out := g.pass(cache, st, temp, final)

		// Host-side decisions: the early stops of §4.3 steps 7 and 8.
		var argmax []int32
		if final || o.OnStep != nil || stab != nil {
			argmax = out.argmax.Int32s()
		}
		if !final && o.Sampler == SamplerConfidence {
			final = allTrue(g.e, out.next.reveal)
		}
		if !final && stab != nil && stab.observe(argmax) {
			final = g.meanEntropy(out.processed) < stab.rule.ConfidenceThreshold
		}
		if final && argmax == nil {
			argmax = out.argmax.Int32s()
		}
		if o.OnStep != nil {
			info := StepInfo{Block: block, Pass: pass, Step: step, Temperature: temp, Offset: cache.Offset,
				Input: input, Argmax: slices.Clone(argmax), Final: final}
			if out.next.current != nil {
				info.Canvas = out.next.current.Int32s()
				info.Revealed = out.next.reveal.Bools()
			}
			o.OnStep(info)
		}
		if final {
			result = argmax
			release(append(st.arrays(), out.next.arrays()...), nil)
			release([]*mx.Array{out.processed, out.argmax})
			return result, pass, nil
		}
		// §4.3 step 9: the next pass is conditioned on this pass's processed distribution.
		if !o.NoSelfConditioning {
			out.next.sc = mx.Tidy(g.e, func() []*mx.Array { return []*mx.Array{g.m.SoftEmbedding(out.processed)} })[0]
		}
		release(st.arrays(), out.next.arrays()...)
		release([]*mx.Array{out.processed, out.argmax}, out.next.arrays()...)
		st = out.next
	}
	return result, pass, nil // unreachable: the step-1 pass always returns
}

// pass is one decoder forward and, unless final, one sampler step (§4.3 steps 1–6).
func (g *generator) pass(cache *Cache, st blockState, temp float64, final bool) passOut {
	o := &g.opt
	// Keys are drawn outside the Tidy scope so the sequence state survives it, in the order
	// MLX draws them: categorical before re-noising.
	var catKey, noiseKey *mx.Array
	if !final {
		if o.Temperature > 0 {
			catKey = g.keys.next()
		}
		noiseKey = g.keys.next()
	}
	var out passOut
	mx.Tidy(g.e, func() []*mx.Array {
		l := st.current.Dim(1)
		p := ProcessLogits(g.m.Decode(st.current, cache, st.sc), temp)
		out.processed = p
		out.argmax = mx.Argmax(p, -1, false)
		if final {
			return []*mx.Array{out.processed, out.argmax}
		}
		den := out.argmax
		if o.Temperature > 0 {
			q := p
			if o.Temperature != 1 {
				q = mx.DivScalar(p, o.Temperature)
			}
			den = mx.Categorical(catKey, q, -1)
		}
		fresh := mx.Randint(noiseKey, []int{1, l}, 0, int64(g.vocab), mx.Int32)
		switch o.Sampler {
		case SamplerEntropy:
			// Acceptance is recomputed from scratch: a position accepted earlier but not now
			// is re-noised.
			a := EntropyMask(TokenEntropy(p), o.EntropyBound)
			out.next = blockState{current: mx.Where(a, den, fresh), reveal: a}
		default:
			a := ConfidenceMask(TokenProbability(p, den), mx.LogicalNot(st.reveal), o.Threshold)
			accepted := mx.Where(a, den, st.draft)
			reveal := mx.LogicalOr(st.reveal, a)
			// Revealed positions are fed back as their accepted token forever; every other
			// position gets a fresh uniform id.
			out.next = blockState{
				current: mx.Where(reveal, accepted, fresh),
				draft:   mx.Where(a, accepted, st.draft),
				reveal:  reveal,
			}
		}
		return append([]*mx.Array{out.processed, out.argmax}, out.next.arrays()...)
	})
	release([]*mx.Array{catKey, noiseKey})
	return out
}

// noise draws a uniform random canvas int32 [1, l] over the vocabulary (§4.2c).
func (g *generator) noise(l int) *mx.Array {
	k := g.keys.next()
	defer k.Free()
	return mx.Randint(k, []int{1, l}, 0, int64(g.vocab), mx.Int32)
}

func (g *generator) meanEntropy(processed *mx.Array) float64 {
	var v float64
	mx.Tidy(g.e, func() []*mx.Array {
		v = mx.Mean(TokenEntropy(processed), false).Item()
		return nil
	})
	return v
}

func allTrue(e mx.Engine, a *mx.Array) bool {
	var v bool
	mx.Tidy(e, func() []*mx.Array {
		v = mx.All(a, false).Item() != 0
		return nil
	})
	return v
}

// stability tracks §4.6's "stable" half of the stop rule: the argmax canvas equals each of
// the last StabilityThreshold argmax canvases. History entries are private copies — the
// aliasing bug mlx-bun had came from storing a buffer that was later overwritten.
type stability struct {
	rule    StopRule
	history [][]int32
}

func newStability(r *StopRule) *stability {
	if r == nil {
		return nil
	}
	return &stability{rule: *r}
}

// observe reports whether canvas is stable, then records it.
func (s *stability) observe(canvas []int32) bool {
	stable := len(s.history) == s.rule.StabilityThreshold
	for _, h := range s.history {
		stable = stable && slices.Equal(h, canvas)
	}
	s.history = append(s.history, slices.Clone(canvas))
	if len(s.history) > s.rule.StabilityThreshold {
		s.history = s.history[1:]
	}
	return stable
}
