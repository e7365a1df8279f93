package main

import (
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/dgtune/dgtune/internal/atomicfile"
	"github.com/dgtune/dgtune/lossplot"
	"github.com/dgtune/dgtune/train"
)

func plotCommand() *cobra.Command {
	var run, out string
	cmd := &cobra.Command{
		Use:   "plot --run DIR [--out FILE]",
		Short: "Draw a run's train/val loss and learning rate over steps (DIR/metrics.jsonl) as a PNG",
		Long: "Draw a training run's curves from DIR/metrics.jsonl: train and val loss over steps (a log axis when\n" +
			"every loss is positive; the best val loss marked) above the learning rate, " + fmt.Sprintf("%d×%d", lossplot.Width, lossplot.Height) + " pixels,\n" +
			"written atomically to --out (default DIR/" + lossplot.File + ", the file train writes at the end of a run).\n" +
			"It works on a run in progress too: the plot shows the events written so far.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if run == "" {
				return fmt.Errorf("give --run DIR (a training run's adapter_path)")
			}
			if out == "" {
				out = filepath.Join(run, lossplot.File)
			}
			if err := atomicfile.CheckWritable(out); err != nil {
				return fmt.Errorf("--out: %w", err)
			}
			metrics := filepath.Join(run, train.MetricsFile)
			s, err := lossplot.Read(metrics)
			if err != nil {
				return err
			}
			if s.Empty() {
				return fmt.Errorf("%s: %w (the run has not reported yet)", metrics, lossplot.ErrEmpty)
			}
			if err := lossplot.WriteFile(out, s, filepath.Base(filepath.Clean(run))); err != nil {
				return err
			}
			line := fmt.Sprintf("wrote %s: %d train and %d val points", out, len(s.Train), len(s.Val))
			if best, ok := s.Best(); ok {
				line += fmt.Sprintf("; best val loss %.4f at step %d", best.Value, best.Step)
			}
			fmt.Fprintln(cmd.OutOrStdout(), line)
			return nil
		},
	}
	cmd.Flags().StringVar(&run, "run", "", "the run's directory (adapter_path), holding metrics.jsonl")
	cmd.Flags().StringVar(&out, "out", "", "PNG file to write (default DIR/"+lossplot.File+")")
	return cmd
}
