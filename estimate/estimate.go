package estimate

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/dgtune/dgtune/lora"
	dg "github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/shapeeng"
	"github.com/dgtune/dgtune/objective"
	"github.com/dgtune/dgtune/optim"
)

// Options describe the training step to estimate.
type Options struct {
	// Quantization is the base's quantization map; nil means cfg.Quantization, and nil there
	// too means an unquantized base (see dg.QuantizationPolicy for --bits style policies).
	Quantization *dg.Quantization
	// LoRA is the adapter: Rank ≥ 1; Keys empty means the default keys, NumLayers 0 or −1
	// all layers, Scale 0 the default scale; Dropout and Encoder as train's
	// lora_parameters (a step with dropout or an encoder of its own takes the two passes).
	LoRA lora.Config
	// Objective is the loss: a SelfCond > 0 estimates a self-conditioned step (the larger
	// of the two kinds), an EncoderWeight > 0 adds the encoder's loss. Every canvas
	// position is scored (loss_positions all; an upper bound for corrupted).
	Objective objective.Objective
	// PromptLen (N ≥ 0) and CanvasLen (L ≥ 1) are the example's token counts.
	PromptLen, CanvasLen int
	// DType is what the engine holds unquantized tensors and quantization scales in
	// (LoadOptions.DType); zero means float32, as Load does.
	DType mx.DType
	// StoredDType is the dtype of the checkpoint's unquantized tensors and scales; zero
	// means dg.StoredDType.
	StoredDType mx.DType
	// Retention is how long the backward keeps forward arrays: RetainGraph is the go
	// engine.
	Retention shapeeng.Retention
	// GCPercent is Go's GOGC: GCHeadroom = GCPercent/100 of the peak heap. 0 adds none.
	GCPercent int
	// GradCheckpoint estimates a step with grad_checkpoint: true (per-layer recomputation).
	GradCheckpoint bool
	// Threads is the go engine's GOMAXPROCS, whose workers each keep packing buffers (0:
	// this process's).
	Threads int
	// MappedWeights loads the weights as the go engine loads a checkpoint: in place from
	// the mapped file (outside Go's heap), with heap copies of the tensors stored in
	// another dtype than DType. Without it every weight is a heap array in DType.
	MappedWeights bool
	// Engine is the engine whose peak is estimated: "go" (or "") or "mlx". The mlx engine
	// holds every weight in its own memory in DType (MappedWeights is ignored) and has no
	// garbage collector (GCPercent is ignored); the rest is the go engine's recording of
	// the step, which MLX's measured peaks follow (README: the mlx engine's memory
	// estimate, for the cases it was checked on).
	Engine string
}

// The engines Step models.
const (
	EngineGo  = "go"
	EngineMLX = "mlx"
)

// Estimate is the predicted peak of one training step, in bytes. The parts add up to the
// recorded peak: what is alive at the moment the most is.
type Estimate struct {
	Weights        int64 // the base model as the engine holds it (mapped pages and heap)
	MappedWeights  int64 // the part of Weights that is the checkpoint's mapped pages, outside Go's heap
	LoRAParams     int64 // adapter A [in, r] and B [r, out], float32
	OptimizerState int64 // AdamW m and v, float32
	Gradients      int64 // the adapter gradients made by the time of the peak
	Activations    int64 // everything else alive at the peak: the graph, cotangents, scratch
	GCHeadroom     int64 // garbage Go's collector lets accumulate (GCPercent/100 of the peak heap)
	Total          int64

	// Peak is the recorded peak, by label; InBackward says whether it falls in the
	// backward pass. AfterForward is what is alive once the loss is computed.
	Peak         shapeeng.Usage
	InBackward   bool
	AfterForward shapeeng.Usage

	Options         Options
	TrainableParams int64
	AdaptedLinears  int
}

// Errors of the arguments.
var (
	ErrConfig  = errors.New("estimate: no config")
	ErrLengths = errors.New("estimate: bad token counts")
	ErrRank    = errors.New("estimate: bad LoRA rank")
)

// Labels of the recorded arrays that are not activations.
const (
	labelWeights   = "weights: "
	labelLoRA      = "LoRA parameters"
	labelOptimizer = "optimizer state"
	labelGradients = "LoRA gradients"
)

// Step estimates the peak memory of one LoRA training step of cfg.
func Step(cfg *dg.Config, o Options) (Estimate, error) {
	if cfg == nil {
		return Estimate{}, ErrConfig
	}
	if o.PromptLen < 0 || o.CanvasLen < 1 {
		return Estimate{}, fmt.Errorf("%w: prompt %d (want ≥ 0), canvas %d (want ≥ 1)", ErrLengths, o.PromptLen, o.CanvasLen)
	}
	if o.LoRA.Rank < 1 {
		return Estimate{}, fmt.Errorf("%w: %d (want ≥ 1)", ErrRank, o.LoRA.Rank)
	}
	if o.GCPercent < 0 {
		return Estimate{}, fmt.Errorf("estimate: GC percent %d (want ≥ 0)", o.GCPercent)
	}
	if o.Retention != shapeeng.RetainGraph && o.Retention != shapeeng.RetainNeeded {
		return Estimate{}, fmt.Errorf("estimate: unknown retention %d", int(o.Retention))
	}
	switch o.Engine {
	case "", EngineGo:
		o.Engine = EngineGo
	case EngineMLX:
		o.MappedWeights, o.GCPercent = false, 0
	default:
		return Estimate{}, fmt.Errorf("estimate: engine %q (want go or mlx)", o.Engine)
	}
	if o.DType == 0 {
		o.DType = mx.Float32
	}
	if !o.DType.IsFloat() {
		return Estimate{}, fmt.Errorf("estimate: compute dtype %s is not a float type", o.DType)
	}
	if err := cfg.Validate(); err != nil {
		return Estimate{}, fmt.Errorf("estimate: %w", err)
	}
	lc := o.LoRA
	if lc.Scale == 0 {
		lc.Scale = lora.DefaultConfig().Scale
	}
	if err := lc.Validate(); err != nil {
		return Estimate{}, fmt.Errorf("estimate: %w", err)
	}
	q := o.Quantization
	if q == nil {
		q = cfg.Quantization
	}
	stored := o.StoredDType
	if stored == 0 {
		stored = dg.StoredDType(cfg, q)
	}

	e := shapeeng.New(shapeeng.Options{Retention: o.Retention, Threads: o.Threads})
	m, err := loadShapes(e, cfg, q, stored, o.DType, o.MappedWeights)
	if err != nil {
		return Estimate{}, fmt.Errorf("estimate: %w", err)
	}
	m.GradCheckpoint = o.GradCheckpoint
	a, err := lora.Attach(m, lc, 0)
	if err != nil {
		return Estimate{}, fmt.Errorf("estimate: %w", err)
	}
	if len(a.Modules()) == 0 {
		return Estimate{}, fmt.Errorf("estimate: LoRA keys %v select no linear", lc.Keys)
	}
	params := optim.Params(a.Params())
	e.Keep(labelLoRA, slices.Collect(maps.Values(params))...)
	opt, err := optim.NewAdamW(params, optim.AdamWDefaults(1e-4))
	if err != nil {
		return Estimate{}, fmt.Errorf("estimate: %w", err)
	}
	e.Keep(labelOptimizer, slices.Collect(maps.Values(opt.State()))...)

	start, forwardEnd := e.Now()+1, 0
	step(e, m, a, opt, o, &forwardEnd)

	est := Estimate{Options: o, TrainableParams: a.NumParams(), AdaptedLinears: len(a.Modules())}
	est.Peak = e.Peak(start)
	est.InBackward = est.Peak.Time > forwardEnd
	est.AfterForward = e.At(forwardEnd)
	for _, p := range est.Peak.Parts {
		switch {
		case strings.HasPrefix(p.Label, labelWeights):
			est.Weights += p.Heap + p.Mapped
			est.MappedWeights += p.Mapped
		case p.Label == labelLoRA:
			est.LoRAParams += p.Heap
		case p.Label == labelOptimizer:
			est.OptimizerState += p.Heap
		case p.Label == labelGradients:
			est.Gradients += p.Heap
		default:
			est.Activations += p.Heap + p.Mapped
		}
	}
	est.GCHeadroom = est.Peak.Heap * int64(o.GCPercent) / 100
	est.Total = est.Peak.Total() + est.GCHeadroom
	return est, nil
}

// loadShapes builds the model on e as the go engine's loader holds it: every checkpoint
// tensor mapped in place (or a heap array in the compute dtype), and Build's copies of the
// tensors stored in another dtype. The weights live to the end.
func loadShapes(e *shapeeng.Engine, cfg *dg.Config, q *dg.Quantization, stored, compute mx.DType, mapped bool) (*dg.Model, error) {
	c := *cfg
	c.Quantization = q
	tensors, err := dg.StoredTensors(&c, q, stored)
	if err != nil {
		return nil, err
	}
	weights := make(map[string]*mx.Array, len(tensors))
	for _, t := range tensors {
		dt := t.DType
		if !mapped && dt.IsFloat() {
			dt = compute
		}
		weights[t.Name] = e.Loaded(labelWeights+t.Group, t.Shape, dt, mapped)
	}
	m, err := dg.Build(e, &c, weights, dg.LoadOptions{DType: compute, SkipVision: true})
	if err != nil {
		return nil, err
	}
	for group, w := range m.WeightArrays() {
		e.Keep(labelWeights+group, w)
	}
	return m, nil
}

// step is one training step as train runs it on one example of the options' lengths,
// every canvas position corrupted and scored: the objective's loss and its gradient with
// respect to the adapter (optim.ValueAndGrad), then the AdamW update. forwardEnd is set to
// the time the loss is computed.
func step(e *shapeeng.Engine, m *dg.Model, a *lora.Adapter, opt optim.Optimizer, o Options, forwardEnd *int) {
	n, l := o.PromptLen, o.CanvasLen
	ex := objective.Example{Prompt: make([]int32, n), Target: make([]int32, l)}
	c := objective.Corruption{T: 1, Corrupt: make([]bool, l), Canvas: make([]int32, l), SelfCond: o.Objective.SelfCond > 0}
	for i := range c.Corrupt {
		c.Corrupt[i] = true
	}
	if o.LoRA.Dropout > 0 {
		a.SetTraining(mx.Key(e, 0))
	}
	params := optim.Params(a.Params())
	_, grads, err := optim.ValueAndGrad(a, params, func() *mx.Array {
		terms := o.Objective.ExampleTerms(m, ex, c)
		loss := objective.ShareLoss([]objective.Terms{terms}, float64(l), float64(max(n+l-1, 1)))
		*forwardEnd = e.Now()
		return loss
	})
	if err != nil {
		panic(err) // the adapter's own parameters: a bug
	}
	a.SetTraining(nil)
	e.Label(labelGradients, slices.Collect(maps.Values(grads))...)
	if err := a.SetParams(opt.Update(params, grads)); err != nil {
		panic(err)
	}
}

// String is a human-readable breakdown, one component per line with its parts indented.
func (m Estimate) String() string {
	var b strings.Builder
	o := m.Options
	ckpt := ""
	if o.GradCheckpoint {
		ckpt = ", grad_checkpoint"
	}
	gc := fmt.Sprintf(", GOGC %d", o.GCPercent)
	if o.Engine == EngineMLX {
		gc = ", mlx engine (weights in MLX's memory, no GC)"
	}
	fmt.Fprintf(&b, "memory estimate: prompt %d + canvas %d tokens, LoRA rank %d on %d linears (%d params), %s compute, retention %s%s%s\n",
		o.PromptLen, o.CanvasLen, o.LoRA.Rank, m.AdaptedLinears, m.TrainableParams, o.DType, o.Retention, ckpt, gc)
	line := func(indent, name string, n int64) {
		fmt.Fprintf(&b, "%s%-*s %12s\n", indent, 56-len(indent), name, dg.FormatBytes(n))
	}
	line("  ", "weights", m.Weights)
	for _, p := range m.Peak.Parts {
		if g, ok := strings.CutPrefix(p.Label, labelWeights); ok {
			line("    ", g, p.Heap+p.Mapped)
		}
	}
	if m.MappedWeights > 0 {
		line("    ", "of which mapped from the checkpoint (not Go heap)", m.MappedWeights)
	}
	line("  ", "LoRA parameters (f32)", m.LoRAParams)
	line("  ", "optimizer state (AdamW m, v)", m.OptimizerState)
	line("  ", "LoRA gradients made by the peak (f32)", m.Gradients)
	where := "forward"
	if m.InBackward {
		where = "backward"
	}
	line("  ", "activations at the peak (in the "+where+" pass)", m.Activations)
	const shown = 8
	var other int64
	k := 0
	for _, p := range m.Peak.Parts {
		if strings.HasPrefix(p.Label, labelWeights) || p.Label == labelLoRA || p.Label == labelOptimizer || p.Label == labelGradients {
			continue
		}
		if k < shown {
			line("    ", p.Label, p.Heap+p.Mapped)
		} else {
			other += p.Heap + p.Mapped
		}
		k++
	}
	if other > 0 {
		line("    ", "other ops", other)
	}
	if m.GCHeadroom > 0 {
		line("  ", fmt.Sprintf("Go GC headroom (GOGC %d)", o.GCPercent), m.GCHeadroom)
	}
	line("  ", "total", m.Total)
	return b.String()
}
