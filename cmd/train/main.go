// Command train fine-tunes DiffusionGemma with LoRA (or fully) on the denoising
// objective: train --config lora.yaml [--key value ...].
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dgtune/dgtune/internal/cli"
	"github.com/dgtune/dgtune/train"
)

func main() { os.Exit(cli.Main(newCommand(), os.Args[1:], os.Stdout, os.Stderr)) }

func newCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "train --config lora.yaml [--key value ...]",
		Short: "Fine-tune DiffusionGemma with LoRA on the denoising objective",
		Long: "Fine-tune DiffusionGemma with LoRA (or fully) on the denoising objective.\n" +
			"Settings come from --config, DGTUNE_* environment variables and flags (flag > env > file > default).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := cli.LoadConfig(cmd)
			if err != nil {
				return err
			}
			if n, _ := cmd.Flags().GetInt("launch"); n > 1 {
				return launchRanks(cmd, n)
			} else if n < 0 {
				return fmt.Errorf("--launch %d: want a number of ranks", n)
			}
			jsonPath, _ := cmd.Flags().GetString("json")
			verbose, _ := cmd.Flags().GetBool("verbose")
			stderr := cmd.ErrOrStderr()
			res, err := train.Run(cmd.Context(), cfg, train.Options{
				Log: stderr, Terminal: cli.IsTerminal(stderr), Verbose: verbose,
				// A distributed run that loses a rank ends from the goroutine that noticed.
				Exit: func(err error) {
					fmt.Fprintf(stderr, "%s: %s\n", cmd.Name(), strings.ReplaceAll(err.Error(), "\n", "; "))
					os.Exit(1)
				},
			})
			if errors.Is(err, train.ErrInterrupted) {
				return &cli.ExitError{Code: cli.InterruptCode(cmd.Context()), Err: err}
			}
			if err != nil {
				return err
			}
			if res.Rank != 0 {
				return nil // rank 0 reports the run
			}
			return printResult(cmd.OutOrStdout(), res, jsonPath)
		},
	}
	cli.AddConfigFlags(cmd)
	cmd.Flags().String("json", "", "also write the result as JSON to this file")
	cmd.Flags().Bool("verbose", false, "print every resolved setting at start, not only those that differ from the defaults")
	cmd.Flags().Int("launch", 0, "run N ranks of a distributed run on this machine (ring backend on localhost, mlx engine)")
	return cmd
}

func printResult(w io.Writer, r *train.Result, jsonPath string) error {
	// mlx-lm's words and precision for the test split, so that what reads its output reads ours.
	testLine := func() {
		if r.Test != nil {
			fmt.Fprintf(w, "Test loss %.3f, Test ppl %.3f.\n", r.Test.Loss, r.Test.PPL)
		}
	}
	if r.EvaluatedOnly {
		testLine()
		return writeResultJSON(r, jsonPath)
	}
	if r.AlreadyDone {
		fmt.Fprintf(w, "already trained %d steps; nothing to do (adapter in %s)\n", r.Steps, r.AdapterPath)
		testLine()
		return writeResultJSON(r, jsonPath)
	}
	line := fmt.Sprintf("trained %d steps: final train loss %.4f (mean since the last report)", r.Steps, r.FinalLoss)
	if r.FinalValLoss != nil {
		line += fmt.Sprintf(", val loss %.4f", *r.FinalValLoss)
	}
	if r.BestValLoss != nil {
		line += fmt.Sprintf(" (best %.4f)", *r.BestValLoss)
	}
	fmt.Fprintf(w, "%s; saved to %s\n", line, r.AdapterPath)
	testLine()
	return writeResultJSON(r, jsonPath)
}

func writeResultJSON(r *train.Result, jsonPath string) error {
	if jsonPath == "" {
		return nil
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(jsonPath, append(b, '\n'), 0o644)
}
