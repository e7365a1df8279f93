package train

// The parts of a run that mlx-lm's keys ask for besides the loop: scoring the test split
// after training (test, test_batches) and evaluating without training (train: false).
// Starting from an adapter file (resume_adapter_file) is runState.start's.

import (
	"fmt"
	"io"
	"math"

	"github.com/dgtune/dgtune/config"
	"github.com/dgtune/dgtune/data"
	"github.com/dgtune/dgtune/lora"
	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/session"
)

// dataNeed is what a run reads: train (and valid when present), plus test with test:
// true — which then must be there, as in mlx-lm, so a missing test split fails before
// training rather than after.
func dataNeed(cfg config.Config) data.Need {
	need := data.Need{Required: []string{"train"}, Optional: []string{"valid"}}
	if cfg.Test {
		need.Required = append(need.Required, "test")
	}
	return need
}

// TestScore is the test split's denoising loss, reported as mlx-lm reports its test loss.
type TestScore struct {
	Loss     float64 `json:"test_loss"`
	PPL      float64 `json:"test_ppl"` // exp(loss)
	Examples int     `json:"test_examples"`
	Split    string  `json:"test_file"`
}

// scoreTest is the token-weighted denoising loss over the first test_batches·batch_size
// examples of the test split (all with test_batches -1), each with a fixed corruption
// keyed by its index, as validation is — so the number is comparable across runs and
// adapters. ppl = exp(loss), as mlx-lm prints it; for the denoising objective it is the
// perplexity of the corrupted canvas positions, not of next-token prediction.
func scoreTest(s *session.Session, cfg config.Config, log io.Writer) (*TestScore, error) {
	split := s.Dataset.Test
	if split == nil {
		return nil, fmt.Errorf("test: no test split in %s", cfg.Data)
	}
	pairs, err := s.Pairs(split)
	if err != nil {
		return nil, err
	}
	if len(pairs) == 0 {
		return nil, fmt.Errorf("test: %s has no usable examples", split.Path)
	}
	if cfg.TestBatches > 0 {
		pairs = pairs[:min(len(pairs), cfg.TestBatches*cfg.BatchSize)]
	}
	loss := ValidationLoss(s, pairs, session.DeriveSeed(cfg.Seed, seedTestNoise))
	if math.IsNaN(loss) || math.IsInf(loss, 0) {
		return nil, fmt.Errorf("%w: test loss %v", ErrNonFinite, loss)
	}
	fmt.Fprintf(log, "test: %d examples of %s, denoising loss %.4f\n", len(pairs), split.Path, loss)
	return &TestScore{Loss: loss, PPL: math.Exp(loss), Examples: len(pairs), Split: split.Path}, nil
}

// evaluateOnly is train: false — mlx-lm's `--test` without `--train`: the base model, or
// the base with the adapter in adapter_path, scored on the test split.
func evaluateOnly(cfg config.Config, opt Options) (*Result, error) {
	log := opt.Log
	if log == nil {
		log = io.Discard
	}
	if cfg.FineTuneType == "full" && cfg.AdapterPath != "" {
		return nil, fmt.Errorf("train: false with fine_tune_type full: a full fine-tune is a complete checkpoint; set model to %s and adapter_path to \"\"", cfg.AdapterPath)
	}
	s, err := session.Open(cfg)
	if err != nil {
		return nil, err
	}
	if err := s.LoadSplits(data.Need{Required: []string{"test"}}); err != nil {
		return nil, err
	}
	what := "base model " + cfg.Model
	if cfg.AdapterPath != "" {
		f, err := lora.LoadDir(s.Engine, cfg.AdapterPath)
		if err != nil {
			return nil, err
		}
		if _, err := lora.Mount(s.Model, f); err != nil {
			return nil, err
		}
		what += " with the adapter in " + cfg.AdapterPath
	}
	fmt.Fprintf(log, "train: false: evaluating the %s (engine %s)\n", what, mx.Describe(s.Engine))
	score, err := scoreTest(s, cfg, log)
	if err != nil {
		return nil, err
	}
	return &Result{AdapterPath: cfg.AdapterPath, Test: score, EvaluatedOnly: true}, nil
}
