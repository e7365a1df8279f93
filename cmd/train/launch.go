package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dgtune/dgtune/internal/cli"
	"github.com/dgtune/dgtune/train/launch"
)

// launchRanks is --launch N: this command, run N times on this machine as the ranks of
// one ring (see launch.Local), each with the flags it was given. Rank 0's output passes
// through; the others' stderr lines get a "[rank N]" prefix.
func launchRanks(cmd *cobra.Command, n int) error {
	if launch.InsideRank(os.Getenv) {
		return errors.New("--launch starts ranks of its own: unset MLX_RANK and MLX_HOSTFILE, or start this process without --launch")
	}
	if d, _ := cmd.Flags().GetString("distributed"); cmd.Flags().Changed("distributed") && d != "ring" {
		return fmt.Errorf("--launch runs the ring backend, not distributed: %s", d)
	}
	ctx := cmd.Context()
	err := launch.Local{
		Ranks: n, Args: rankArgs(cmd.Flags()), Stdout: cmd.OutOrStdout(), Stderr: cmd.ErrOrStderr(),
		Signal: func() os.Signal {
			if cli.InterruptCode(ctx) == 143 {
				return syscall.SIGTERM
			}
			return syscall.SIGINT
		},
	}.Run(ctx)
	var failed *launch.ExitError
	if errors.As(err, &failed) {
		return &cli.ExitError{Code: failed.Code, Err: err}
	}
	return err
}

// rankArgs are the flags this process was given, less --launch, plus --distributed ring.
func rankArgs(fs *pflag.FlagSet) []string {
	var args []string
	fs.Visit(func(f *pflag.Flag) {
		switch f.Name {
		case "launch", "distributed":
			return
		}
		v := f.Value.String()
		if sv, ok := f.Value.(pflag.SliceValue); ok {
			v = strings.Join(sv.GetSlice(), ",")
		}
		args = append(args, "--"+f.Name+"="+v)
	})
	return append(args, "--distributed=ring")
}
