// Command generate answers a prompt, or holds a chat, with a DiffusionGemma checkpoint and
// optionally a LoRA adapter, as mlx_lm.generate --adapter-path does:
// generate --model DIR [--adapter DIR] [--prompt TEXT | --prompt-file F | stdin] [--chat].
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dgtune/dgtune/data/chat"
	"github.com/dgtune/dgtune/generate"
	"github.com/dgtune/dgtune/internal/cli"
	dg "github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/mx"
)

func main() { os.Exit(cli.Main(newCommand(), os.Args[1:], os.Stdout, os.Stderr)) }

// flags are the command's settings as given.
type flags struct {
	model, adapter, backend    string
	prompt, promptFile, system string
	chat                       bool
	settings                   generate.Settings
}

func newCommand() *cobra.Command {
	var fl flags
	cmd := &cobra.Command{
		Use:   "generate --model DIR [--adapter DIR] [--prompt TEXT | --prompt-file FILE | stdin] [--chat]",
		Short: "Answer a prompt, or chat, with a DiffusionGemma checkpoint and optionally a LoRA adapter",
		Long: "Render the prompt with the model's chat template (after an optional --system prompt), run the\n" +
			"block-diffusion sampler and stream each block's text to stdout as soon as it is final; tokens/s,\n" +
			"blocks and denoising steps go to stderr. --chat reads one message per line from stdin and keeps the\n" +
			"conversation's earlier turns in the prompt (" + generate.CommandExit + " or end of input leaves, " + generate.CommandReset + " starts over).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return untilInterrupted(cmd.Context(), func() error { return run(cmd, fl) })
		},
	}
	f := cmd.Flags()
	f.StringVar(&fl.model, "model", "", "model directory (config.json, safetensors, tokenizer.json); default: the adapter's base_model")
	f.StringVar(&fl.adapter, "adapter", "", "LoRA adapter directory (adapter_config.json + adapters.safetensors, or PEFT's adapter_model.safetensors), or one adapter file of a run")
	f.StringVar(&fl.prompt, "prompt", "", "the user message (- reads it from stdin; without --prompt and --prompt-file, stdin is read)")
	f.StringVar(&fl.promptFile, "prompt-file", "", "read the user message from this file")
	f.StringVar(&fl.system, "system", "", "system prompt, put before the conversation")
	f.BoolVar(&fl.chat, "chat", false, "chat: one message per line from stdin, earlier turns kept in the prompt")
	f.IntVar(&fl.settings.MaxTokens, "max-tokens", 0, "tokens to generate at most (0 = the checkpoint's max_new_tokens)")
	f.Float64Var(&fl.settings.Temperature, "temp", 0, "sampling temperature (0 = greedy)")
	f.IntVar(&fl.settings.Steps, "steps", 0, "denoising steps per block at most (0 = the checkpoint's max_denoising_steps)")
	f.StringVar(&fl.settings.Sampler, "sampler", dg.SamplerConfidence, "denoising sampler: confidence (accept positions whose probability reaches 0.9) or entropy (the checkpoint's entropy budget)")
	f.Uint64Var(&fl.settings.Seed, "seed", 0, "seed of the sampler's random draws")
	f.IntVar(&fl.settings.Canvas, "canvas", 0, "block (canvas) length (0 = the max_canvas the adapter was trained with, else the model's canvas_length)")
	f.StringVar(&fl.backend, "backend", "auto", "array engine: auto, go or mlx (compiled in: "+mx.DescribeEngines()+")")
	cli.SuggestFlags(cmd)
	return cmd
}

// run checks everything the flags say before loading the model, loads and checks the
// model and adapter, and only then says what it took (so that a refusal is the one line on
// stderr) and answers the prompt or runs the chat.
func run(cmd *cobra.Command, fl flags) error {
	if err := fl.settings.Validate(); err != nil {
		return err
	}
	prompt, err := readPrompt(cmd, fl)
	if err != nil {
		return err
	}
	var trained generate.Trained
	if fl.adapter != "" {
		if _, err := os.Stat(fl.adapter); err != nil {
			return fmt.Errorf("--adapter %q: not found", fl.adapter)
		}
		if trained, err = generate.ReadTrained(cli.AdapterDir(fl.adapter)); err != nil {
			return err
		}
	}
	model, source, notes, err := modelDir(fl, trained)
	if err != nil {
		return err
	}
	g, err := generate.Load(fl.backend, model)
	if err != nil {
		return err
	}
	notes = append([]string{fmt.Sprintf("model %s%s, engine %s", model, source, mx.Describe(g.Model.Engine))}, notes...)
	var adapter *generate.Trained
	if fl.adapter != "" {
		f, err := cli.LoadAdapter(g.Model.Engine, "--adapter", fl.adapter)
		if err != nil {
			return err
		}
		if err := g.Mount(f, fl.adapter, model); err != nil {
			return err
		}
		adapter = &trained
	}
	opt, took, err := generate.Options(g.Model, g.Tokenizer, fl.settings, adapter)
	if err != nil {
		return err
	}
	for _, n := range took {
		notes = append(notes, "adapter "+fl.adapter+": "+n)
	}
	g.Options, g.System = opt, fl.system
	log := cmd.ErrOrStderr()
	for _, n := range notes {
		fmt.Fprintln(log, n)
	}
	fmt.Fprintf(log, "sampler %s, at most %d denoising steps per block, temp %g, seed %d, at most %d tokens\n",
		opt.Sampler, opt.Steps, opt.Temperature, opt.Seed, opt.MaxTokens)
	ctx, out := cmd.Context(), cmd.OutOrStdout()
	if fl.chat {
		c := &generate.Chat{Generator: g, In: cmd.InOrStdin(), Out: out, Log: log, Interactive: isTerminal(cmd.InOrStdin())}
		return c.Run(ctx, prompt)
	}
	r, err := g.Reply(ctx, []chat.Message{{Role: "user", Content: prompt}}, out)
	if err != nil {
		return err
	}
	fmt.Fprintln(log, r.Summary())
	return nil
}

// readPrompt returns the user message from --prompt, --prompt-file or stdin; with --chat
// it may be "" (the conversation is read from stdin).
func readPrompt(cmd *cobra.Command, fl flags) (string, error) {
	given := cmd.Flags().Changed("prompt")
	switch {
	case given && fl.promptFile != "":
		return "", errors.New("give the prompt with --prompt or with --prompt-file, not both")
	case fl.chat && given && fl.prompt == "-":
		return "", errors.New("--chat reads the conversation from stdin, so --prompt - cannot read a prompt from it")
	case fl.chat && !given && fl.promptFile == "":
		return "", nil
	}
	var text, where string
	switch {
	case fl.promptFile != "":
		b, err := os.ReadFile(fl.promptFile)
		if err != nil {
			return "", fmt.Errorf("--prompt-file %q: not found", fl.promptFile)
		}
		text, where = string(b), "--prompt-file "+fl.promptFile
	case given && fl.prompt != "-":
		text, where = fl.prompt, "--prompt"
	default:
		in := cmd.InOrStdin()
		if !given && isTerminal(in) {
			return "", errors.New("no prompt: pass --prompt TEXT or --prompt-file FILE, pipe it on stdin, or use --chat")
		}
		b, err := io.ReadAll(in)
		if err != nil {
			return "", fmt.Errorf("read the prompt from stdin: %w", err)
		}
		text, where = string(b), "stdin"
	}
	if strings.TrimSpace(text) == "" {
		return "", fmt.Errorf("the prompt (%s) is empty", where)
	}
	return text, nil
}

// modelDir is --model, or the adapter's recorded base_model; it returns how to name the
// model's source in the notes. A --model that is not the recorded base (where that exists
// here) is used, and a note says so.
func modelDir(fl flags, t generate.Trained) (dir, source string, notes []string, err error) {
	if fl.model == "" {
		if fl.adapter == "" || t.BaseModel == "" {
			return "", "", nil, errors.New("no model: pass --model DIR (or an --adapter whose adapter_config.json names its base_model)")
		}
		dir, err := cli.ResolveBase(fl.adapter, t.BaseModel)
		return dir, " (the adapter's base_model)", nil, err
	}
	if fl.adapter != "" && t.BaseModel != "" {
		if base, err := cli.ResolveBase(fl.adapter, t.BaseModel); err == nil && !cli.SameDir(base, fl.model) {
			notes = []string{fmt.Sprintf("adapter %s: trained on base_model %s, not on --model %s", fl.adapter, base, fl.model)}
		}
	}
	return fl.model, "", notes, nil
}

// untilInterrupted runs work and returns its error; on SIGINT or SIGTERM (the context of
// cli.Main is cancelled) it returns at once with exit code 130 or 143. The work itself stops
// at its next decoder pass; a pass in flight, which takes seconds on a large model on the
// CPU, or a chat blocked reading stdin, ends with the process. Nothing is written but stdout.
func untilInterrupted(ctx context.Context, work func() error) error {
	done := make(chan error, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- fmt.Errorf("internal error: %v", r)
			}
		}()
		done <- work()
	}()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
	}
	if ctx.Err() != nil || errors.Is(err, dg.ErrInterrupted) {
		return &cli.ExitError{Code: cli.InterruptCode(ctx), Err: errors.New("interrupted")}
	}
	return err
}

func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	return ok && cli.IsTerminal(f)
}
