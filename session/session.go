package session

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/dgtune/dgtune/config"
	"github.com/dgtune/dgtune/data"
	dg "github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/engines"
	"github.com/dgtune/dgtune/objective"
	"github.com/dgtune/dgtune/tokenizer"
)

// Session is everything a run needs, loaded and checked before the first step.
type Session struct {
	Config config.Config
	Engine mx.Engine
	// Draws is the engine the objective's noise is drawn on (engines.Draws; nil: Engine).
	Draws     mx.Engine
	Model     *dg.Model
	Tokenizer *tokenizer.Tokenizer
	Objective objective.Objective
	Dataset   *data.Dataset
	Encoder   data.Encoder
	// Log receives notes about the data (rows skipped under skip_bad_rows); nil discards.
	Log io.Writer
}

// Open loads the model, tokenizer and data named by cfg.
func Open(cfg config.Config) (*Session, error) {
	if cfg.Model == "" {
		return nil, fmt.Errorf("no model: set model in the config or pass --model")
	}
	e, err := OpenEngine(cfg.Backend, cfg.ComputeDType, cfg.MemoryLimitGB)
	if err != nil {
		return nil, err
	}
	dt, _ := ComputeDType(cfg.ComputeDType)
	m, err := dg.Load(e, cfg.Model, LoadOptions(cfg, dt))
	if err != nil {
		return nil, err
	}
	tok, err := tokenizer.Load(filepath.Join(cfg.Model, "tokenizer.json"))
	if err != nil {
		return nil, fmt.Errorf("load tokenizer: %w", err)
	}
	s := &Session{Config: cfg, Engine: e, Draws: engines.Draws(e), Model: m, Tokenizer: tok}
	s.Objective, err = ObjectiveFor(cfg, m.Config)
	if err != nil {
		return nil, err
	}
	s.Encoder, err = NewEncoder(cfg, tok, m.Config)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// LoadOptions are the model-loading options of cfg: the compute dtype and, with
// quantize_on_load, the recipe convert --bits N --group-size 64 applies.
func LoadOptions(cfg config.Config, dt mx.DType) dg.LoadOptions {
	opt := dg.LoadOptions{DType: dt}
	if cfg.QuantizeOnLoad != 0 {
		opt.Quantize = &dg.QuantRecipe{Bits: fmt.Sprint(cfg.QuantizeOnLoad), GroupSize: 64}
	}
	return opt
}

// LoadData reads the data directory named by the config: train (required), valid and
// test (when present).
func (s *Session) LoadData() error {
	return s.LoadSplits(data.Need{Required: []string{"train"}, Optional: []string{"valid", "test"}})
}

// LoadSplits reads only the splits need names from the data directory.
func (s *Session) LoadSplits(need data.Need) error {
	if s.Config.Data == "" {
		return fmt.Errorf("no data: set data in the config or pass --data")
	}
	if st, err := os.Stat(s.Config.Data); err != nil {
		return fmt.Errorf("data directory %q: not found", s.Config.Data)
	} else if !st.IsDir() {
		return data.NotADirectory(s.Config.Data)
	}
	ds, err := data.Load(s.Config.Data, DataOptions(s.Config), need)
	if err != nil {
		return err
	}
	s.Dataset = ds
	return nil
}

// DataOptions maps the config's feature names onto the reader's options.
func DataOptions(c config.Config) data.Options {
	return data.Options{
		PromptFeature: c.PromptFeature, CompletionFeature: c.CompletionFeature,
		TextFeature: c.TextFeature, ChatFeature: c.ChatFeature, SkipBadRows: c.SkipBadRows,
	}
}

// Pairs tokenizes a split. Under skip_bad_rows it says how many rows were skipped (bad
// rows and rows whose target encodes to nothing) and why the first were.
func (s *Session) Pairs(split *data.Split) ([]data.Pair, error) {
	return s.pairsWith(split, s.Encoder)
}

// MeasuredPairs is Pairs that also tells measure each example's prompt and completion
// lengths in tokens before max_prompt and max_canvas cut them (train's data check).
func (s *Session) MeasuredPairs(split *data.Split, measure func(index, prompt, completion int)) ([]data.Pair, error) {
	enc, err := newEncoder(s.Config, s.Tokenizer, s.Model.Config, measure)
	if err != nil {
		return nil, err
	}
	return s.pairsWith(split, enc)
}

func (s *Session) pairsWith(split *data.Split, enc data.Encoder) ([]data.Pair, error) {
	pairs, stats, err := data.Tokenize(split, enc, DataOptions(s.Config))
	if err != nil {
		return nil, err
	}
	if note := SkipNote(split, stats); note != "" && s.Log != nil {
		fmt.Fprintln(s.Log, note)
	}
	return pairs, nil
}

// SkipNote describes the rows of split that were skipped, by the reader and by
// tokenization, or is "" when none were.
func SkipNote(split *data.Split, tokenized data.Stats) string {
	n := split.Stats.Skipped + tokenized.Skipped
	if n == 0 {
		return ""
	}
	reasons := append(slices.Clone(split.Stats.Reasons), tokenized.Reasons...)
	note := fmt.Sprintf("data: %s: skipped %d of %d rows (skip_bad_rows)", filepath.Base(split.Path), n, split.Stats.Rows)
	const show = 3
	for i, r := range reasons[:min(show, len(reasons))] {
		sep := "; "
		if i == 0 {
			sep = ": "
		}
		note += sep + strings.TrimPrefix(r.Error(), "data: ")
	}
	if n > show {
		note += fmt.Sprintf("; and %d more", n-show)
	}
	return note
}

// ObjectiveFor resolves the loss options, taking t_min/t_max from the checkpoint's
// generation config when the config leaves them at -1.
func ObjectiveFor(c config.Config, mc *dg.Config) (objective.Objective, error) {
	tMin, tMax := 0.4, 0.8
	if mc.GenerationConfig != nil {
		tMin, tMax = mc.GenerationConfig.TemperatureRange()
	}
	if c.TMin >= 0 {
		tMin = c.TMin
	}
	if c.TMax >= 0 {
		tMax = c.TMax
	}
	o := objective.Objective{TMin: tMin, TMax: tMax, Positions: objective.Positions(c.LossPositions), Weighting: objective.Weighting(c.Weighting),
		SelfCond: c.SelfConditioning, EncoderWeight: c.EncoderLossWeight}
	if c.LongTargets == config.LongRandomBlock {
		o.BlockLen = c.MaxCanvas
	}
	return o, o.Validate()
}

// DrawEngine is the engine the objective's noise and choices are drawn on: Draws, or
// Engine where Draws is unset.
func (s *Session) DrawEngine() mx.Engine {
	if s.Draws != nil {
		return s.Draws
	}
	return s.Engine
}
