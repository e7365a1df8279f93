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
	"sync"
	"sync/atomic"
	"syscall"
	"time"

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
// cancel the command's context; InterruptCode tells which arrived, and an error returned
// after one exits 130 (SIGINT) or 143 (SIGTERM).
//
// A command marked Abandonable (its work can be dropped: eval, export, probe) that has not
// returned within AbandonGrace of the signal — inside one long forward pass, say — is
// abandoned: the cleanups it registered with OnAbandon run (removing partial outputs) and
// Main returns the interrupt code, so the process stops within a second whatever it was
// doing. A command that is not (train, which saves a checkpoint first) is waited for.
func Main(cmd *cobra.Command, args []string, stdout, stderr io.Writer) (code int) {
	cmd.SetArgs(args)
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	cmd.SilenceUsage = true
	cmd.SilenceErrors = true
	ctx, stop := SignalContext(context.Background())
	defer stop()
	done := make(chan error, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- fmt.Errorf("internal error: %v", r)
			}
		}()
		done <- cmd.ExecuteContext(ctx)
	}()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		if cmd.Annotations[abandonable] != "true" {
			err = <-done
			break
		}
		select {
		case err = <-done:
		case <-time.After(AbandonGrace):
			interruptionOf(ctx).abandon()
			fmt.Fprintf(stderr, "%s: %s\n", cmd.Name(), Interrupted(ctx))
			return InterruptCode(ctx)
		}
	}
	if err == nil {
		return 0
	}
	fmt.Fprintf(stderr, "%s: %s\n", cmd.Name(), oneLine(err.Error()))
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	if Signalled(ctx) {
		return InterruptCode(ctx)
	}
	return 1
}

// AbandonGrace is how long Main waits, after SIGINT or SIGTERM, for an Abandonable command
// to notice its cancelled context and return by itself.
const AbandonGrace = 500 * time.Millisecond

const abandonable = "dgtune/abandonable"

// Abandonable marks cmd (the command given to Main) as one whose work a signal may drop
// at any point: it writes its outputs atomically, or stages them and registers their
// removal with OnAbandon.
func Abandonable(cmd *cobra.Command) *cobra.Command {
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[abandonable] = "true"
	return cmd
}

func oneLine(s string) string {
	s = strings.TrimSpace(s)
	return strings.ReplaceAll(s, "\n", "; ")
}

// ErrInterrupted: the command stopped because of SIGINT or SIGTERM.
var ErrInterrupted = errors.New("interrupted")

// Interrupted is the error a command returns when it sees its context cancelled by a
// signal before its result was written: "interrupted by SIGINT; nothing written".
func Interrupted(ctx context.Context) error {
	name := "a signal"
	if s := interruptionOf(ctx).signal(); s != nil {
		name = signalName(s)
	}
	return fmt.Errorf("%w by %s; nothing written", ErrInterrupted, name)
}

func signalName(s os.Signal) string {
	switch s {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return s.String()
}

type sigKey struct{}

// interruption is what SIGINT or SIGTERM did to one command: the signal, and the
// cleanups to run if the command is abandoned.
type interruption struct {
	sig      atomic.Value
	mu       sync.Mutex
	next     int
	cleanups map[int]func()
}

func interruptionOf(ctx context.Context) *interruption {
	if in, ok := ctx.Value(sigKey{}).(*interruption); ok {
		return in
	}
	return &interruption{}
}

func (in *interruption) signal() os.Signal {
	s, _ := in.sig.Load().(os.Signal)
	return s
}

// abandon runs the registered cleanups, newest first.
func (in *interruption) abandon() {
	in.mu.Lock()
	var fns []func()
	for id := in.next - 1; id >= 0; id-- {
		if fn, ok := in.cleanups[id]; ok {
			fns = append(fns, fn)
		}
	}
	in.cleanups = nil
	in.mu.Unlock() // a cleanup may release itself
	for _, fn := range fns {
		fn()
	}
}

// OnAbandon registers fn (removing a partial output) to run if Main abandons the command;
// release unregisters it once the output is complete or removed by the command itself.
func OnAbandon(ctx context.Context, fn func()) (release func()) {
	in, ok := ctx.Value(sigKey{}).(*interruption)
	if !ok {
		return func() {}
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.cleanups == nil {
		in.cleanups = map[int]func(){}
	}
	id := in.next
	in.next++
	in.cleanups[id] = fn
	return func() {
		in.mu.Lock()
		defer in.mu.Unlock()
		delete(in.cleanups, id)
	}
}

// SignalContext is cancelled by SIGINT or SIGTERM; InterruptCode and Signalled report it.
func SignalContext(parent context.Context) (context.Context, func()) {
	in := &interruption{}
	ctx, cancel := context.WithCancel(context.WithValue(parent, sigKey{}, in))
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		select {
		case s := <-ch:
			in.sig.Store(s)
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, func() { signal.Stop(ch); cancel() }
}

// Signalled reports whether SIGINT or SIGTERM cancelled ctx.
func Signalled(ctx context.Context) bool { return interruptionOf(ctx).signal() != nil }

// InterruptCode returns 130 for SIGINT and 143 for SIGTERM (128 + signal number).
func InterruptCode(ctx context.Context) int {
	if interruptionOf(ctx).signal() == syscall.SIGTERM {
		return 143
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
// flags. The config's notes (mlx-lm keys that do nothing here, how max_seq_length was
// mapped, how PEFT names were read) go to stderr, one line each.
func LoadConfig(cmd *cobra.Command) (config.Config, error) {
	c, _, err := LoadConfigInheriting(cmd, config.Inherit{})
	return c, err
}

// LoadConfigInheriting is LoadConfig with inh's settings under the file (config.LoadInheriting).
func LoadConfigInheriting(cmd *cobra.Command, inh config.Inherit) (config.Config, config.InheritReport, error) {
	path, _ := cmd.Flags().GetString("config")
	c, rep, err := config.LoadInheriting(path, cmd.Flags(), inh)
	if err != nil {
		return c, rep, err
	}
	for _, n := range c.Notes {
		fmt.Fprintf(cmd.ErrOrStderr(), "config: %s\n", n)
	}
	return c, rep, nil
}
