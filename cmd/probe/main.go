// Command probe is numerics and tooling for people who check implementations:
// synthetic checkpoints (mkmodel), logits/loss/gradients of one forward (forward),
// tokenization (tokenize, template), throughput (bench), loading (load), memory (estimate) and a
// training run's loss plot (plot). Its outputs follow exact contracts that other tools compare
// against.
package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/dgtune/dgtune/internal/cli"
)

func main() { os.Exit(cli.Main(newCommand(), os.Args[1:], os.Stdout, os.Stderr)) }

func newCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "probe",
		Short: "Numerics and tooling: synthetic checkpoints, forward dumps, tokenization, benchmarks, loss plots",
	}
	root.AddCommand(mkmodelCommand(), mkdataCommand(), estimateCommand(), forwardCommand(), tokenizeCommand(), templateCommand(), benchCommand(), loadCommand(), plotCommand())
	// Every subcommand writes its output atomically or staged, so a signal may drop its work.
	return cli.Abandonable(root)
}
