// Command eval scores a DiffusionGemma checkpoint, alone or side by side with a LoRA
// adapter, on a held-out split: eval --adapter DIR [--config FILE] [--split test] [--json FILE].
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dgtune/dgtune/config"
	"github.com/dgtune/dgtune/data"
	"github.com/dgtune/dgtune/data/chat"
	"github.com/dgtune/dgtune/evaluate"
	"github.com/dgtune/dgtune/internal/cli"
	"github.com/dgtune/dgtune/lora"
	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/session"
)

func main() { os.Exit(cli.Main(newCommand(), os.Args[1:], os.Stdout, os.Stderr)) }

// options are eval's own flags (the config keys come from cli.LoadConfigInheriting).
type options struct {
	adapter, split, jsonPath, prompt string
	allCheckpoints                   bool
}

func newCommand() *cobra.Command {
	var o options
	cmd := &cobra.Command{
		Use:   "eval [--adapter DIR|FILE [--all-checkpoints]] [--config FILE] [--model DIR] [--data DIR] [--split test] [--json FILE]",
		Short: "Score the base model, or base and adapter side by side, on a held-out split",
		Long: "Held-out denoising loss and canvas-token accuracy at fixed noise levels, and generation metrics\n" +
			"with the denoising sampler (exact match, token F1, denoising steps, tokens/s). Base and adapter see\n" +
			"identical corruptions and sampler seeds. --prompt generates one answer instead.\n" +
			"With --adapter, the data, tokenization and objective settings the adapter was trained with (the\n" +
			"\"training\" object of its adapter_config.json) apply unless --config, DGTUNE_* or a flag sets them;\n" +
			"eval says which it took and which were overridden. --all-checkpoints scores every numbered\n" +
			"NNNNNNN_adapters.safetensors of the run and its adapters.safetensors, and names the best.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			err := runEval(cmd, o)
			if err != nil && cli.Signalled(cmd.Context()) {
				return cli.Interrupted(cmd.Context())
			}
			return err
		},
	}
	cli.AddConfigFlags(cmd)
	f := cmd.Flags()
	f.StringVar(&o.adapter, "adapter", "", "adapter directory (adapters.safetensors or adapter_model.safetensors + adapter_config.json), or one adapter file of a run (best_adapters.safetensors, 0000100_adapters.safetensors)")
	f.StringVar(&o.split, "split", "test", "data split to evaluate (same as --eval.split)")
	f.StringVar(&o.jsonPath, "json", "", "also write the numbers and per-example results as JSON")
	f.StringVar(&o.prompt, "prompt", "", "generate an answer to this user message instead of scoring a split")
	f.BoolVar(&o.allCheckpoints, "all-checkpoints", false, "score every numbered checkpoint of the run in --adapter DIR (and its adapters.safetensors) and name the best (lowest mean loss)")
	return cli.Abandonable(cmd)
}

// runEval is eval's work; an error after SIGINT/SIGTERM becomes "interrupted" in RunE.
func runEval(cmd *cobra.Command, o options) error {
	log := cmd.ErrOrStderr()
	ctx := cmd.Context()
	if o.adapter != "" {
		if _, err := os.Stat(o.adapter); err != nil {
			return fmt.Errorf("--adapter %q: not found", o.adapter)
		}
	}
	if o.allCheckpoints {
		switch {
		case o.adapter == "":
			return fmt.Errorf("--all-checkpoints needs --adapter DIR, the run's adapter_path")
		case cli.AdapterDir(o.adapter) != o.adapter:
			return fmt.Errorf("--all-checkpoints needs --adapter DIR, the run's directory, not the file %s", o.adapter)
		case o.prompt != "":
			return fmt.Errorf("--all-checkpoints scores a split; drop --prompt")
		}
	}
	inh, notes := inherited(o.adapter)
	cfg, rep, err := cli.LoadConfigInheriting(cmd, inh)
	if err != nil {
		return err
	}
	for _, n := range append(notes, rep.Lines(inh.From)...) {
		fmt.Fprintf(log, "eval: %s\n", n)
	}
	if cmd.Flags().Changed("split") {
		cfg.Eval.Split = o.split
	}
	files := []string{o.adapter}
	if o.allCheckpoints {
		if files, err = checkpoints(o.adapter); err != nil {
			return err
		}
	}
	if cfg.Model == "" && o.adapter != "" {
		if cfg.Model, err = cli.ResolveBase(o.adapter, cli.RecordedBase(o.adapter)); err != nil {
			return err
		}
	}
	s, err := session.Open(cfg)
	if err != nil {
		return err
	}
	s.Log = log
	// Every adapter is read and checked against the model now, not after the base run.
	var adapters []*lora.AdapterFile
	if o.adapter != "" {
		for _, path := range files {
			f, err := cli.LoadAdapter(s.Engine, "--adapter", path)
			if err != nil {
				return err
			}
			a, err := lora.Mount(s.Model, f)
			if err != nil {
				return err
			}
			a.Detach()
			adapters = append(adapters, f)
		}
	}
	if o.prompt != "" {
		var adapter *lora.AdapterFile
		if len(adapters) > 0 {
			adapter = adapters[0]
		}
		return single(cmd, s, adapter, o.prompt)
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
	ev := &evaluate.Evaluator{Session: s, Config: cfg, Cases: cases, Log: log, Context: ctx,
		Progress: log, Terminal: cli.IsTerminal(log)}
	base, err := ev.Run("base", cfg.Eval.Generate)
	if err != nil {
		return err
	}
	report := &evaluate.Report{Model: cfg.Model, Adapter: o.adapter, Split: cfg.Eval.Split, Examples: len(cases), Base: base}
	for i, f := range adapters {
		label := "adapter"
		if o.allCheckpoints {
			label = filepath.Base(files[i])
		}
		a, err := lora.Mount(s.Model, f)
		if err != nil {
			return err
		}
		m, err := ev.Run(label, cfg.Eval.Generate)
		a.Detach()
		if err != nil {
			return err
		}
		report.Adapted = m
		if o.allCheckpoints {
			report.Checkpoints = append(report.Checkpoints, evaluate.Checkpoint{File: label, Step: checkpointStep(label), Metrics: m})
		}
	}
	w := cmd.OutOrStdout()
	if o.allCheckpoints {
		best := report.Checkpoints[evaluate.Best(report.Checkpoints)]
		report.BestCheckpoint, report.Adapted = best.File, best.Metrics
		if err := evaluate.WriteCheckpointTable(w, base, report.Checkpoints, len(cases)); err != nil {
			return err
		}
		step := "the final adapter"
		if best.Step >= 0 {
			step = fmt.Sprintf("step %d", best.Step)
		}
		fmt.Fprintf(w, "best: %s (%s): mean loss %.4f over t = %s\n", filepath.Join(o.adapter, best.File), step,
			evaluate.MeanLoss(best.Metrics), strings.Trim(strings.Join(strings.Fields(fmt.Sprint(cfg.Eval.NoiseLevels)), ", "), "[]"))
	}
	report.Rows = evaluate.Compare(base, report.Adapted)
	report.Samples = samples(s, cases, base, report.Adapted, cfg.Eval.Samples)
	if !o.allCheckpoints {
		if err := evaluate.WriteTable(w, report.Rows, len(cases)); err != nil {
			return err
		}
		for _, sm := range report.Samples {
			fmt.Fprintf(w, "\n[%d] prompt:    %s\n    reference: %s\n    base:      %s\n", sm.Index, oneLine(sm.Prompt), oneLine(sm.Reference), oneLine(sm.Base))
			if report.Adapted != nil {
				fmt.Fprintf(w, "    adapter:   %s\n", oneLine(sm.Adapter))
			}
		}
	}
	if o.jsonPath != "" {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return evaluate.WriteJSON(o.jsonPath, report)
	}
	return nil
}

// inherited is the layer of training settings the adapter records (none without an
// adapter), and notes on what could not be taken.
func inherited(adapter string) (config.Inherit, []string) {
	if adapter == "" {
		return config.Inherit{}, nil
	}
	training, from := cli.RecordedTraining(adapter)
	if training == nil {
		return config.Inherit{From: from}, []string{fmt.Sprintf("the adapter records no training settings (no \"training\" in %s): the config's and eval's defaults apply", from)}
	}
	inh := config.InheritFrom(from, training)
	var notes []string
	if d, ok := inh.Values["data"].(string); ok {
		if st, err := os.Stat(d); err != nil || !st.IsDir() {
			delete(inh.Values, "data")
			notes = append(notes, fmt.Sprintf("the adapter was trained on data %s, which is not a directory here: pass --data", d))
		}
	}
	return inh, notes
}

// numbered matches the periodic checkpoints train writes (mlx-lm's names).
var numbered = regexp.MustCompile(`^([0-9]{7})_adapters\.safetensors$`)

// checkpoints lists a run's numbered adapter files in step order, then adapters.safetensors.
func checkpoints(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("--adapter %s: %w", dir, err)
	}
	var out []string
	for _, e := range entries { // ReadDir sorts by name: zero-padded steps sort in order
		if !e.IsDir() && numbered.MatchString(e.Name()) {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	if final := filepath.Join(dir, lora.AdaptersFile); fileExists(final) {
		out = append(out, final)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--all-checkpoints: %s holds no NNNNNNN_adapters.safetensors nor %s", dir, lora.AdaptersFile)
	}
	return out, nil
}

func checkpointStep(name string) int {
	m := numbered.FindStringSubmatch(name)
	if m == nil {
		return -1
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

func fileExists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir()
}

func samples(s *session.Session, cases []evaluate.Case, base, adapted *evaluate.Metrics, n int) []evaluate.Sample {
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

func single(cmd *cobra.Command, s *session.Session, adapter *lora.AdapterFile, prompt string) error {
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
