// Command train fine-tunes DiffusionGemma with LoRA (or fully) on the denoising
// objective: train --config lora.yaml [--key value ...].
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/dgtune/dgtune/config"
	"github.com/dgtune/dgtune/internal/atomicfile"
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
				return launchRanks(cmd, n, cfg.Distributed)
			} else if n < 0 {
				return fmt.Errorf("--launch %d: want a number of ranks", n)
			}
			jsonPath, _ := cmd.Flags().GetString("json")
			verbose, _ := cmd.Flags().GetBool("verbose")
			dryRun, _ := cmd.Flags().GetBool("dry-run")
			stderr := cmd.ErrOrStderr()
			// Outputs are checked before the work: a --json path that cannot be written
			// fails now, not after training.
			if jsonPath != "" {
				if err := checkJSONPath(jsonPath, cfg.AdapterPath, dryRun); err != nil {
					return fmt.Errorf("--json: %w", err)
				}
			}
			if dryRun {
				return runDryRun(cmd.OutOrStdout(), cfg, train.Options{Log: stderr, Verbose: verbose}, jsonPath)
			}
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
	cmd.Flags().Bool("dry-run", false, "check the settings, model and data (token lengths, rows over max_prompt/max_canvas/the model's positions, the largest step's memory) and stop: nothing is trained or written")
	cmd.Flags().Int("launch", 0, "run N ranks of a distributed run on this machine (mlx engine): NCCL with a GPU per rank on a CUDA build, else MLX's ring on localhost (distributed: ring|nccl picks one)")
	return cmd
}

// checkJSONPath checks that the --json file can be written when the run ends. A file in
// adapter_path itself is fine before that folder exists: the run makes it first (a dry
// run makes nothing, so there the folder must already be there).
func checkJSONPath(jsonPath, adapterPath string, dryRun bool) error {
	dir, err := filepath.Abs(filepath.Dir(jsonPath))
	if err != nil {
		return err
	}
	adapterDir, err := filepath.Abs(adapterPath)
	if err != nil {
		return err
	}
	if _, err := os.Stat(dir); !dryRun && errors.Is(err, fs.ErrNotExist) && dir == adapterDir {
		return atomicfile.CheckDirCreatable(dir)
	}
	return atomicfile.CheckWritable(jsonPath)
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
	line := fmt.Sprintf("trained %d steps in %s: final train loss %.4f (mean since the last report)", r.Steps, elapsed(r.ElapsedSeconds), r.FinalLoss)
	if r.FinalValLoss != nil {
		line += fmt.Sprintf(", val loss %.4f", *r.FinalValLoss)
	}
	if r.BestValLoss != nil {
		line += fmt.Sprintf(" (best %.4f", *r.BestValLoss)
		if r.BestValStep != nil {
			line += fmt.Sprintf(" at step %d", *r.BestValStep)
		}
		line += ")"
	}
	line += "; saved to " + r.AdapterPath
	if r.Plot != "" {
		line += "; loss plot " + r.Plot
	}
	fmt.Fprintln(w, line)
	testLine()
	return writeResultJSON(r, jsonPath)
}

// elapsed is a run's wall time as people read it: tenths of a second under ten seconds,
// whole seconds above.
func elapsed(seconds float64) string {
	d := time.Duration(seconds * float64(time.Second))
	if d < 10*time.Second {
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// runDryRun is train --dry-run: the data check's full report on stdout (also when it
// refuses, before the refusal), and with --json the check as JSON.
func runDryRun(w io.Writer, cfg config.Config, opt train.Options, jsonPath string) error {
	check, err := train.Check(cfg, opt)
	if check != nil {
		if werr := check.WriteReport(w); werr != nil {
			return werr
		}
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "dry run: the data fits; nothing trained and nothing written (adapter_path %s)\n", cfg.AdapterPath)
	return writeJSON(struct {
		DryRun    bool             `json:"dry_run"`
		DataCheck *train.DataCheck `json:"data_check"`
	}{true, check}, jsonPath)
}

func writeResultJSON(r *train.Result, jsonPath string) error { return writeJSON(r, jsonPath) }

// writeJSON writes v to jsonPath atomically ("" writes nothing).
func writeJSON(v any, jsonPath string) error {
	if jsonPath == "" {
		return nil
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(jsonPath, append(b, '\n')); err != nil {
		return fmt.Errorf("--json: %w", err)
	}
	return nil
}
