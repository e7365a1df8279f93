package evaluate

import (
	"context"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/dgtune/dgtune/config"
	"github.com/dgtune/dgtune/data"
	"github.com/dgtune/dgtune/imageproc"
	dg "github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/objective"
	"github.com/dgtune/dgtune/session"
)

// Seed purposes for evaluation draws (distinct from training's).
const (
	seedNoise uint64 = 101 + iota
	seedSampler
)

// Case is one evaluation example.
type Case struct {
	Index     int
	Prompt    []int32
	Target    []int32 // as trained (eos_fill applied)
	Reference string  // the completion text
	RefTokens int     // tokens of the bare completion
	Images    []*imageproc.Image
}

// Metrics are one model's numbers.
type Metrics struct {
	Loss     map[string]float64 `json:"loss"`     // by noise level "0.25"
	Accuracy map[string]float64 `json:"accuracy"` // canvas-token accuracy on corrupted positions
	// TwoPassLoss and TwoPassAccuracy score the same corruptions on the second pass of the
	// two-pass step (conditioned on the first pass's logits); only with eval.two_pass.
	TwoPassLoss     map[string]float64 `json:"two_pass_loss,omitempty"`
	TwoPassAccuracy map[string]float64 `json:"two_pass_accuracy,omitempty"`
	ExactMatch      *float64           `json:"exact_match,omitempty"`
	TokenF1         *float64           `json:"token_f1,omitempty"`
	MeanSteps       *float64           `json:"mean_denoising_steps,omitempty"`
	TokensPerS      *float64           `json:"generated_tokens_per_second,omitempty"`
	Generations     []Generation       `json:"generations,omitempty"`
	PerExample      []ExampleScore     `json:"per_example"`
}

// ExampleScore is one example's loss and accuracy at each noise level.
type ExampleScore struct {
	Index    int                `json:"index"`
	Loss     map[string]float64 `json:"loss"`
	Accuracy map[string]float64 `json:"accuracy"`
}

// Generation is one example's sampled answer.
type Generation struct {
	Index      int     `json:"index"`
	Text       string  `json:"text"`
	Reference  string  `json:"reference"`
	ExactMatch bool    `json:"exact_match"`
	F1         float64 `json:"f1"`
	Steps      int     `json:"steps"`
	Finish     string  `json:"finish_reason"`
}

// Evaluator scores models on a fixed set of cases.
type Evaluator struct {
	// Progress, when set, shows how far each pass is: a bar with rate and time left when
	// Terminal, else a plain line at every tenth.
	Progress io.Writer
	Terminal bool
	// Context, when set, stops Run between examples once it is done (SIGINT), with its error.
	Context context.Context
	Session *session.Session
	Config  config.Config
	Cases   []Case
	Log     io.Writer
	// OnCorruption, when set, sees every corrupted canvas Run scores (run label, noise
	// level, case) before the model does: the seam that lets a test check that base and
	// adapter are scored on identical corruptions.
	OnCorruption func(label string, t float64, c Case, corr objective.Corruption)
}

// Cases tokenizes a split into evaluation cases (at most max when max > 0).
func Cases(s *session.Session, split *data.Split, max int) ([]Case, error) {
	pairs, err := s.Pairs(split)
	if err != nil {
		return nil, err
	}
	byIndex := map[int]data.Example{}
	for _, ex := range split.Examples {
		byIndex[ex.Index] = ex
	}
	if max > 0 && len(pairs) > max {
		pairs = pairs[:max]
	}
	out := make([]Case, len(pairs))
	for i, p := range pairs {
		ex := byIndex[p.Index]
		// A long target (long_targets: random_block) is scored on its first canvas, the
		// block generation produces first.
		target := p.Target[:min(len(p.Target), s.Config.MaxCanvas)]
		out[i] = Case{Index: p.Index, Prompt: p.Prompt, Target: target, Reference: ex.Completion,
			RefTokens: min(len(s.Tokenizer.Encode(ex.Completion)), s.Config.MaxCanvas)}
		if len(p.Images) > 0 {
			// Preprocess once: every noise level and both models reuse the pixels.
			if out[i].Images, err = s.Model.Images(p.Images); err != nil {
				return nil, fmt.Errorf("example %d: %w", p.Index, err)
			}
		}
	}
	return out, nil
}

func levelKey(t float64) string { return fmt.Sprintf("%g", t) }

// Run scores the model as it is now (base, or with an adapter mounted).
func (ev *Evaluator) Run(label string, generate bool) (*Metrics, error) {
	m := ev.Session.Model
	e := ev.Session.Engine
	vocab := m.Config.TextConfig.VocabSize
	log := ev.Log
	if log == nil {
		log = io.Discard
	}
	res := &Metrics{Loss: map[string]float64{}, Accuracy: map[string]float64{}}
	res.PerExample = make([]ExampleScore, len(ev.Cases))
	for i, c := range ev.Cases {
		res.PerExample[i] = ExampleScore{Index: c.Index, Loss: map[string]float64{}, Accuracy: map[string]float64{}}
	}
	twoPass := ev.Config.Eval.TwoPass
	if twoPass {
		res.TwoPassLoss, res.TwoPassAccuracy = map[string]float64{}, map[string]float64{}
	}
	bar := newProgress(ev.Progress, ev.Terminal, label+" loss", "ex", len(ev.Config.Eval.NoiseLevels)*len(ev.Cases))
	for li, t := range ev.Config.Eval.NoiseLevels {
		var lossSum, count, correct, lossSum2, correct2 float64
		for i, c := range ev.Cases {
			if err := ev.stopped(); err != nil {
				return nil, fmt.Errorf("%s: %w", label, err)
			}
			key := mx.Key(e, session.DeriveSeed(ev.Config.Seed, seedNoise, uint64(li), uint64(c.Index), uint64(i)))
			corr := objective.CorruptAt(key, c.Target, t, vocab)
			if ev.OnCorruption != nil {
				ev.OnCorruption(label, t, c, corr)
			}
			ls, n, ok, err := scoreCorruption(m, c, corr, false)
			if err != nil {
				return nil, fmt.Errorf("%s: example %d: %w", label, c.Index, err)
			}
			res.PerExample[i].Loss[levelKey(t)] = ls / math.Max(n, 1)
			res.PerExample[i].Accuracy[levelKey(t)] = ok / math.Max(n, 1)
			if twoPass {
				ls2, _, ok2, err := scoreCorruption(m, c, corr, true)
				if err != nil {
					return nil, fmt.Errorf("%s: example %d: %w", label, c.Index, err)
				}
				lossSum2 += ls2
				correct2 += ok2
			}
			bar.add()
			lossSum += ls
			count += n
			correct += ok
		}
		res.Loss[levelKey(t)] = lossSum / math.Max(count, 1)
		res.Accuracy[levelKey(t)] = correct / math.Max(count, 1)
		fmt.Fprintf(log, "%s: t=%g loss %.4f accuracy %.3f\n", label, t, res.Loss[levelKey(t)], res.Accuracy[levelKey(t)])
		if twoPass {
			res.TwoPassLoss[levelKey(t)] = lossSum2 / math.Max(count, 1)
			res.TwoPassAccuracy[levelKey(t)] = correct2 / math.Max(count, 1)
			fmt.Fprintf(log, "%s: t=%g two-pass loss %.4f accuracy %.3f\n", label, t, res.TwoPassLoss[levelKey(t)], res.TwoPassAccuracy[levelKey(t)])
		}
	}
	bar.finish()
	if !generate {
		return res, nil
	}
	bar = newProgress(ev.Progress, ev.Terminal, label+" generate", "ex", len(ev.Cases))
	defer bar.finish()
	var em, f1, steps float64
	var genTokens int
	start := time.Now()
	for i, c := range ev.Cases {
		if err := ev.stopped(); err != nil {
			return nil, fmt.Errorf("%s: %w", label, err)
		}
		opt := ev.GenerateOptions(c, i)
		g, err := m.GenerateWithImages(c.Prompt, c.Images, opt)
		if err != nil {
			return nil, fmt.Errorf("%s: generate example %d: %w", label, c.Index, err)
		}
		text := ev.Session.Tokenizer.Decode(g.Tokens, true)
		gen := Generation{Index: c.Index, Text: text, Reference: c.Reference, Steps: g.Steps, Finish: g.FinishReason}
		gen.ExactMatch = Normalize(text) == Normalize(c.Reference)
		gen.F1 = TokenF1(text, c.Reference)
		if gen.ExactMatch {
			em++
		}
		f1 += gen.F1
		steps += float64(g.Steps)
		genTokens += len(g.Tokens)
		res.Generations = append(res.Generations, gen)
		bar.add()
	}
	n := math.Max(float64(len(ev.Cases)), 1)
	em, f1, steps = em/n, f1/n, steps/n
	tps := float64(genTokens) / math.Max(time.Since(start).Seconds(), 1e-9)
	res.ExactMatch, res.TokenF1, res.MeanSteps, res.TokensPerS = &em, &f1, &steps, &tps
	fmt.Fprintf(log, "%s: exact match %.3f, token F1 %.3f, %.1f steps, %.1f tokens/s\n", label, em, f1, steps, tps)
	return res, nil
}

// scoreCorruption returns Σ CE over corrupted positions, their count and the number
// whose argmax is the target, on the single decoder pass or (twoPass) on the second pass
// of the two-pass step.
func scoreCorruption(m *dg.Model, c Case, corr objective.Corruption, twoPass bool) (float64, float64, float64, error) {
	var lossSum, count, correct float64
	var err error
	mx.Tidy(m.Engine, func() []*mx.Array {
		e := m.Engine
		prompt, canvas := mx.FromInt32(e, c.Prompt, 1, len(c.Prompt)), mx.FromInt32(e, corr.Canvas, 1, len(corr.Canvas))
		var hidden *mx.Array
		if !twoPass && len(c.Images) == 0 {
			hidden = m.EncodeDecodeHidden(prompt, canvas)
		} else {
			cache := m.NewCache()
			if err = m.EncodeWithImages(prompt, c.Images, cache); err != nil {
				return nil
			}
			if twoPass {
				hidden = objective.SelfConditionedHidden(m, canvas, cache)
			} else {
				hidden = m.DecodeHidden(canvas, cache, nil)
			}
		}
		// Only corrupted positions are scored, so only their rows go through the head.
		var rows, target []int32
		for i, bad := range corr.Corrupt {
			if bad {
				rows = append(rows, int32(i))
				target = append(target, c.Target[i])
			}
		}
		if len(rows) == 0 {
			return nil
		}
		logits := m.Logits(mx.Take(hidden, mx.FromInt32(e, rows, len(rows)), 1))
		ce := objective.CrossEntropy(logits, target).Float32s()
		pred := mx.Argmax(logits, -1, false).Int32s()
		for j := range rows {
			count++
			lossSum += float64(ce[j])
			if pred[j] == target[j] {
				correct++
			}
		}
		return nil
	})
	return lossSum, count, correct, err
}

// generateOptions bounds the canvas: with eos_fill the model was trained on max_canvas
// canvases ending in EOS, so generation uses that canvas; without it the reference
// objective never marks an answer's end, so the canvas is the reference length.
func (ev *Evaluator) GenerateOptions(c Case, i int) dg.GenerateOptions {
	cfg := ev.Config
	m := ev.Session.Model
	opt := dg.DefaultGenerateOptions(m.Config)
	length := c.RefTokens
	if cfg.EOSFill {
		length = cfg.MaxCanvas
	}
	if cfg.Eval.MaxTokens > 0 {
		length = cfg.Eval.MaxTokens
	}
	length = max(length, 1)
	opt.MaxTokens = length
	opt.MinCanvas = min(length, m.Config.CanvasLength)
	opt.MaxCanvas = min(length, m.Config.CanvasLength)
	if cfg.Eval.Steps > 0 {
		opt.Steps = cfg.Eval.Steps
	}
	opt.Sampler = cfg.Eval.Sampler
	opt.Temperature = cfg.Eval.Temperature
	opt.NoSelfConditioning = !cfg.Eval.SelfCond
	opt.Seed = session.DeriveSeed(cfg.Seed, seedSampler, uint64(c.Index), uint64(i))
	for _, name := range []string{"<eos>", "<turn|>"} {
		if id, ok := ev.Session.Tokenizer.TokenID(name); ok {
			opt.EOS = appendUnique(opt.EOS, int(id))
		}
	}
	return opt
}

func appendUnique(s []int, v int) []int {
	for _, x := range s {
		if x == v {
			return s
		}
	}
	return append(s, v)
}

// Normalize collapses whitespace runs and trims, for exact match.
func Normalize(s string) string { return strings.Join(strings.Fields(s), " ") }

// TokenF1 is SQuAD-style F1 over whitespace tokens of the normalised strings.
func TokenF1(pred, ref string) float64 {
	p, r := strings.Fields(pred), strings.Fields(ref)
	if len(p) == 0 && len(r) == 0 {
		return 1
	}
	if len(p) == 0 || len(r) == 0 {
		return 0
	}
	counts := map[string]int{}
	for _, w := range r {
		counts[w]++
	}
	common := 0
	for _, w := range p {
		if counts[w] > 0 {
			counts[w]--
			common++
		}
	}
	if common == 0 {
		return 0
	}
	prec := float64(common) / float64(len(p))
	rec := float64(common) / float64(len(r))
	return 2 * prec * rec / (prec + rec)
}

// stopped is the error of ev.Context once it is done.
func (ev *Evaluator) stopped() error {
	if ev.Context == nil {
		return nil
	}
	return ev.Context.Err()
}
