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
// one group (see launch.Local), each with the flags it was given. distributed (the
// config's) picks the group: ring or nccl as named; empty or any as mlx.launch picks by
// default, NCCL on a CUDA build, which each rank settles as MLX's any does when the
// machine has a GPU per rank (the ring otherwise). Rank 0's output passes through; the
// others' stderr lines get a "[rank N]" prefix.
func launchRanks(cmd *cobra.Command, n int, distributed string) error {
	if launch.InsideRank(os.Getenv) {
		return errors.New("--launch starts ranks of its own: unset MLX_RANK, MLX_HOSTFILE and MLX_WORLD_SIZE, or start this process without --launch")
	}
	backend, err := launchBackend(distributed)
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	err = launch.Local{
		Ranks: n, Backend: backend, Args: rankArgs(cmd.Flags(), backend), Stdout: cmd.OutOrStdout(), Stderr: cmd.ErrOrStderr(),
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

// launchBackend is the group --launch starts for the config's distributed.
func launchBackend(distributed string) (string, error) {
	switch distributed {
	case "ring", "nccl":
		return distributed, nil
	case "", "any":
		return "any", nil
	}
	return "", fmt.Errorf("--launch starts ring or NCCL ranks, not distributed: %s (start MPI ranks with mpirun)", distributed)
}

// rankArgs are the flags this process was given, less --launch, plus --distributed
// with the launch's backend.
func rankArgs(fs *pflag.FlagSet, backend string) []string {
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
	return append(args, "--distributed="+backend)
}
