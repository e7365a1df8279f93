package generate

import (
	"fmt"
	"math"

	dg "github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/tokenizer"
)

// Settings are the sampler's knobs as a user sets them (the generate command's flags, whose
// names the messages use); a zero value takes the default named on each field.
type Settings struct {
	MaxTokens   int     // 0: the generation config's max_new_tokens
	Steps       int     // denoising steps per block at most; 0: the generation config's max_denoising_steps
	Sampler     string  // dg.SamplerConfidence ("" too) or dg.SamplerEntropy
	Temperature float64 // 0: greedy (the argmax of each pass)
	Seed        uint64
	// Canvas is the block length; 0: the adapter's training max_canvas, else the model's
	// canvas_length.
	Canvas int
}

// Validate checks what can be checked without the model.
func (s Settings) Validate() error {
	switch {
	case s.MaxTokens < 0:
		return fmt.Errorf("--max-tokens %d: want a positive number (0 = the checkpoint's max_new_tokens)", s.MaxTokens)
	case s.Steps < 0:
		return fmt.Errorf("--steps %d: want a positive number (0 = the checkpoint's max_denoising_steps)", s.Steps)
	case s.Canvas < 0:
		return fmt.Errorf("--canvas %d: want a positive number (0 = the adapter's max_canvas, else the model's canvas_length)", s.Canvas)
	case !(s.Temperature >= 0) || math.IsInf(s.Temperature, 1):
		return fmt.Errorf("--temp %g: want 0 (greedy) or a finite positive temperature", s.Temperature)
	}
	switch s.Sampler {
	case "", dg.SamplerConfidence, dg.SamplerEntropy:
	default:
		return fmt.Errorf("--sampler %q: want %s or %s", s.Sampler, dg.SamplerConfidence, dg.SamplerEntropy)
	}
	return nil
}

// stopTokens are the ids that end an answer: the checkpoint's EOS ids and the tokenizer's
// <eos> and <turn|> (the chat template closes every turn with <turn|>).
func stopTokens(opt dg.GenerateOptions, tok *tokenizer.Tokenizer) []int {
	eos := opt.EOS
	for _, name := range []string{"<eos>", "<turn|>"} {
		id, ok := tok.TokenID(name)
		if !ok {
			continue
		}
		seen := false
		for _, x := range eos {
			seen = seen || x == int(id)
		}
		if !seen {
			eos = append(eos, int(id))
		}
	}
	return eos
}

// Options resolves s for model m: the checkpoint's generation config under the user's
// settings, and, when adapter is not nil, the canvas the adapter was trained on. It returns
// the sampler's options and one line for each thing the adapter's training decided or
// warns of (to print after the adapter's name, so a user knows what was taken).
func Options(m *dg.Model, tok *tokenizer.Tokenizer, s Settings, adapter *Trained) (dg.GenerateOptions, []string, error) {
	if err := s.Validate(); err != nil {
		return dg.GenerateOptions{}, nil, err
	}
	opt := dg.DefaultGenerateOptions(m.Config)
	opt.EOS = stopTokens(opt, tok)
	if s.MaxTokens > 0 {
		opt.MaxTokens = s.MaxTokens
	}
	if s.Steps > 0 {
		opt.Steps = s.Steps
	}
	if s.Sampler != "" {
		opt.Sampler = s.Sampler
	}
	opt.Temperature, opt.Seed = s.Temperature, s.Seed
	modelCanvas := m.Config.CanvasLength
	if s.Canvas > modelCanvas {
		return dg.GenerateOptions{}, nil, fmt.Errorf("--canvas %d: the model's canvas_length is %d", s.Canvas, modelCanvas)
	}
	var notes []string
	switch {
	case s.Canvas > 0:
		opt.MaxCanvas = s.Canvas
		if adapter != nil && adapter.Recorded && adapter.MaxCanvas != s.Canvas {
			notes = append(notes, fmt.Sprintf("blocks of %d tokens (--canvas); it was trained on canvases of %d", s.Canvas, adapter.MaxCanvas))
		}
	case adapter != nil && adapter.Recorded:
		opt.MaxCanvas = min(adapter.MaxCanvas, modelCanvas)
		capped := ""
		if adapter.MaxCanvas > modelCanvas {
			capped = fmt.Sprintf(" (%d) capped at the model's canvas_length", adapter.MaxCanvas)
		}
		notes = append(notes, fmt.Sprintf("blocks of %d tokens, the max_canvas it was trained with%s (--canvas overrides)", opt.MaxCanvas, capped))
	case adapter != nil:
		notes = append(notes, fmt.Sprintf("its adapter_config.json records no training settings: blocks of the model's canvas_length %d", modelCanvas))
	}
	if adapter != nil && adapter.Recorded {
		if adapter.EOSFill {
			notes = append(notes, "trained with eos_fill: an answer ends at its <turn|>")
		} else {
			notes = append(notes, fmt.Sprintf("trained without eos_fill, so it never saw where an answer ends: expect answers to run to --max-tokens (%d)", opt.MaxTokens))
		}
	}
	return opt, notes, nil
}
