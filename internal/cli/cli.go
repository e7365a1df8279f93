// Package cli holds what dgtune's commands share: one-line errors and exit codes,
// panic containment, signal handling, and the config flags.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/dgtune/dgtune/config"
	"github.com/dgtune/dgtune/mx"
)

// ExitError carries a specific exit code.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// Main runs cmd with args and returns the process exit code: 0, 1 with one line on
// stderr for any error (panics included), or an ExitError's code. SIGINT and SIGTERM
// cancel the command's context; Signal() tells which arrived.
func Main(cmd *cobra.Command, args []string, stdout, stderr io.Writer) (code int) {
	cmd.SetArgs(args)
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	cmd.SilenceUsage = true
	cmd.SilenceErrors = true
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(stderr, "%s: internal error: %v\n", cmd.Name(), r)
			code = 1
		}
	}()
	ctx, stop := SignalContext(context.Background())
	defer stop()
	err := cmd.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	fmt.Fprintf(stderr, "%s: %s\n", cmd.Name(), oneLine(err.Error()))
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	return 1
}

func oneLine(s string) string {
	s = strings.TrimSpace(s)
	return strings.ReplaceAll(s, "\n", "; ")
}

type sigKey struct{}

// SignalContext is cancelled by SIGINT or SIGTERM; Signal reports which.
func SignalContext(parent context.Context) (context.Context, func()) {
	var got atomic.Value
	ctx, cancel := context.WithCancel(context.WithValue(parent, sigKey{}, &got))
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		select {
		case s := <-ch:
			got.Store(s)
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, func() { signal.Stop(ch); cancel() }
}

// InterruptCode returns 130 for SIGINT and 143 for SIGTERM (128 + signal number).
func InterruptCode(ctx context.Context) int {
	if v, ok := ctx.Value(sigKey{}).(*atomic.Value); ok {
		if s, ok := v.Load().(os.Signal); ok {
			if s == syscall.SIGTERM {
				return 143
			}
		}
	}
	return 130
}

// IsTerminal reports whether w is a terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// AddConfigFlags adds --config and one flag per config key the command uses (by its
// name: train takes every key, eval and export their own; see config.Uses). It also makes
// an unknown flag's error suggest the nearest flag. --backend's help names the engines
// compiled in, with the MLX version the mlx engine runs on.
func AddConfigFlags(cmd *cobra.Command) {
	cmd.Flags().String("config", "", "YAML config file (keys as in configs/lora.yaml; every command reads all of it)")
	config.BindFlagsFor(cmd.Flags(), cmd.Name())
	if f := cmd.Flags().Lookup("backend"); f != nil {
		f.Usage += " (compiled in: " + mx.DescribeEngines() + ")"
	}
	cmd.SetFlagErrorFunc(suggestFlag)
}

// suggestFlag adds "did you mean --x?" to pflag's "unknown flag: --y".
func suggestFlag(cmd *cobra.Command, err error) error {
	name, ok := strings.CutPrefix(err.Error(), "unknown flag: --")
	if !ok {
		return err
	}
	var names []string
	cmd.Flags().VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
	if s, ok := config.Suggest(name, names); ok {
		return fmt.Errorf("%w (did you mean --%s?)", err, s)
	}
	return err
}

// LoadConfig resolves the config of cmd: its --config file, DGTUNE_* environment and
// flags. The config's notes (mlx-lm keys that do nothing here, and how max_seq_length
// was mapped) go to stderr, one line each.
func LoadConfig(cmd *cobra.Command) (config.Config, error) {
	path, _ := cmd.Flags().GetString("config")
	c, err := config.Load(path, cmd.Flags())
	if err != nil {
		return c, err
	}
	for _, n := range c.Notes {
		fmt.Fprintf(cmd.ErrOrStderr(), "config: %s\n", n)
	}
	return c, nil
}
