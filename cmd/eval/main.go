// Command eval scores a DiffusionGemma checkpoint, alone or side by side with a LoRA
// adapter, on a held-out split: eval --adapter DIR [--config FILE] [--split test] [--json FILE].
package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dgtune/dgtune/data"
	"github.com/dgtune/dgtune/data/chat"
	"github.com/dgtune/dgtune/evaluate"
	"github.com/dgtune/dgtune/internal/cli"
	"github.com/dgtune/dgtune/lora"
	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/train"
)

func main() { os.Exit(cli.Main(newCommand(), os.Args[1:], os.Stdout, os.Stderr)) }

func newCommand() *cobra.Command {
	var adapterDir, split, jsonPath, prompt string
	cmd := &cobra.Command{
		Use:   "eval [--adapter DIR|FILE] [--config FILE] [--model DIR] [--data DIR] [--split test] [--json FILE]",
		Short: "Score the base model, or base and adapter side by side, on a held-out split",
		Long: "Held-out denoising loss and canvas-token accuracy at fixed noise levels, and generation metrics\n" +
			"with the denoising sampler (exact match, token F1, denoising steps, tokens/s). Base and adapter see\n" +
			"identical corruptions and sampler seeds. --prompt generates one answer instead.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := cli.LoadConfig(cmd)
			if err != nil {
				return err
			}
			if cmd.Flags().Changed("split") {
				cfg.Eval.Split = split
			}
			if adapterDir != "" {
				if _, err := os.Stat(adapterDir); err != nil {
					return fmt.Errorf("--adapter %q: not found", adapterDir)
				}
			}
			if cfg.Model == "" && adapterDir != "" {
				if cfg.Model, err = cli.ResolveBase(adapterDir, cli.RecordedBase(adapterDir)); err != nil {
					return err
				}
			}
			s, err := train.Open(cfg)
			if err != nil {
				return err
			}
			log := cmd.ErrOrStderr()
			s.Log = log
			var adapter *lora.AdapterFile
			if adapterDir != "" {
				if adapter, err = cli.LoadAdapter(s.Engine, "--adapter", adapterDir); err != nil {
					return err
				}
				// Check the adapter against the model now, not after the base run.
				a, err := lora.Mount(s.Model, adapter)
				if err != nil {
					return err
				}
				a.Detach()
			}
			if prompt != "" {
				return single(cmd, s, adapter, prompt)
			}
			// Only the scored split is read: a held-out set needs no train file beside it.
			if err := s.LoadSplits(data.Need{Required: []string{cfg.Eval.Split}}); err != nil {
				return err
			}
			sp, err := s.Dataset.Split(cfg.Eval.Split)
			if err != nil {
				return err
			}
			cases, err := evaluate.Cases(s, sp, cfg.Eval.MaxExamples)
			if err != nil {
				return err
			}
			if len(cases) == 0 {
				return fmt.Errorf("no example of the %s split of %s is usable (all were skipped)", cfg.Eval.Split, cfg.Data)
			}
			fmt.Fprintf(log, "evaluating %d %s examples of %s (engine %s)\n", len(cases), cfg.Eval.Split, cfg.Data, mx.Describe(s.Engine))
			ev := &evaluate.Evaluator{Session: s, Config: cfg, Cases: cases, Log: log}
			if cli.IsTerminal(log) {
				ev.Progress = log
			}
			base, err := ev.Run("base", cfg.Eval.Generate)
			if err != nil {
				return err
			}
			var adapted *evaluate.Metrics
			if adapter != nil {
				if _, err := lora.Mount(s.Model, adapter); err != nil {
					return err
				}
				if adapted, err = ev.Run("adapter", cfg.Eval.Generate); err != nil {
					return err
				}
			}
			rep := &evaluate.Report{Model: cfg.Model, Adapter: adapterDir, Split: cfg.Eval.Split, Examples: len(cases),
				Rows: evaluate.Compare(base, adapted), Base: base, Adapted: adapted}
			rep.Samples = samples(s, cases, base, adapted, cfg.Eval.Samples)
			w := cmd.OutOrStdout()
			if err := evaluate.WriteTable(w, rep.Rows); err != nil {
				return err
			}
			for _, sm := range rep.Samples {
				fmt.Fprintf(w, "\n[%d] prompt:    %s\n    reference: %s\n    base:      %s\n", sm.Index, oneLine(sm.Prompt), oneLine(sm.Reference), oneLine(sm.Base))
				if adapted != nil {
					fmt.Fprintf(w, "    adapter:   %s\n", oneLine(sm.Adapter))
				}
			}
			if jsonPath != "" {
				return evaluate.WriteJSON(jsonPath, rep)
			}
			return nil
		},
	}
	cli.AddConfigFlags(cmd)
	f := cmd.Flags()
	f.StringVar(&adapterDir, "adapter", "", "adapter directory (adapters.safetensors or adapter_model.safetensors + adapter_config.json), or one adapter file of a run (best_adapters.safetensors, 0000100_adapters.safetensors)")
	f.StringVar(&split, "split", "test", "data split to evaluate (same as --eval.split)")
	f.StringVar(&jsonPath, "json", "", "also write the numbers and per-example results as JSON")
	f.StringVar(&prompt, "prompt", "", "generate an answer to this user message instead of scoring a split")
	return cmd
}

func samples(s *train.Session, cases []evaluate.Case, base, adapted *evaluate.Metrics, n int) []evaluate.Sample {
	var out []evaluate.Sample
	for i := 0; i < n && i < len(base.Generations); i++ {
		sm := evaluate.Sample{Index: cases[i].Index, Prompt: s.Tokenizer.Decode(cases[i].Prompt, true),
			Reference: cases[i].Reference, Base: base.Generations[i].Text}
		if adapted != nil {
			sm.Adapter = adapted.Generations[i].Text
		}
		out = append(out, sm)
	}
	return out
}

func single(cmd *cobra.Command, s *train.Session, adapter *lora.AdapterFile, prompt string) error {
	ids, err := chat.EncodePrompt(s.Tokenizer, []chat.Message{{Role: "user", Content: prompt}}, true)
	if err != nil {
		return err
	}
	c := evaluate.Case{Prompt: ids, RefTokens: s.Config.MaxCanvas}
	ev := &evaluate.Evaluator{Session: s, Config: s.Config, Log: cmd.ErrOrStderr()}
	w := cmd.OutOrStdout()
	show := func(label string) error {
		g, err := s.Model.Generate(ids, ev.GenerateOptions(c, 0))
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "%s (%d steps, %s): %s\n", label, g.Steps, g.FinishReason, s.Tokenizer.Decode(g.Tokens, true))
		return nil
	}
	if err := show("base"); err != nil {
		return err
	}
	if adapter != nil {
		if _, err := lora.Mount(s.Model, adapter); err != nil {
			return err
		}
		return show("adapter")
	}
	return nil
}

func oneLine(s string) string { return strings.ReplaceAll(s, "\n", "⏎") }
