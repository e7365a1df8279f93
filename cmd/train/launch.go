package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dgtune/dgtune/internal/cli"
)

// launchRanks runs this command n times on this machine as the ranks of one ring, the
// way mlx.launch -n N does: free ports on 127.0.0.1, a generated hostfile, MLX_RANK and
// MLX_HOSTFILE per rank. Rank 0's output passes through; the others' stderr lines get a
// "[rank N]" prefix. A signal is passed on to every rank once (they stop together after
// the same step, rank 0 saving); a second one kills them.
func launchRanks(cmd *cobra.Command, n int) error {
	if os.Getenv("MLX_RANK") != "" || os.Getenv("MLX_HOSTFILE") != "" {
		return errors.New("--launch starts ranks of its own: unset MLX_RANK and MLX_HOSTFILE, or start this process without --launch")
	}
	if d, _ := cmd.Flags().GetString("distributed"); cmd.Flags().Changed("distributed") && d != "ring" {
		return fmt.Errorf("--launch runs the ring backend, not distributed: %s", d)
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("--launch: %w", err)
	}
	hostfile, err := writeHostfile(n)
	if err != nil {
		return err
	}
	defer os.Remove(hostfile)
	args := rankArgs(cmd.Flags())
	stderr := &prefixer{w: cmd.ErrOrStderr()}
	ranks := make([]*exec.Cmd, n)
	for r := range ranks {
		c := exec.Command(exe, args...)
		c.Env = append(os.Environ(), "MLX_RANK="+strconv.Itoa(r), "MLX_HOSTFILE="+hostfile)
		c.Stdout = cmd.OutOrStdout()
		c.Stderr = cmd.ErrOrStderr()
		if r > 0 {
			c.Stderr = stderr.rank(r)
		}
		ownProcessGroup(c)
		if err := c.Start(); err != nil {
			for _, started := range ranks[:r] {
				started.Process.Kill()
			}
			return fmt.Errorf("--launch: start rank %d: %w", r, err)
		}
		ranks[r] = c
	}
	return waitRanks(cmd.Context(), ranks, stderr)
}

// writeHostfile picks n ports that are free on 127.0.0.1 and writes MLX's ring
// hostfile for them.
//
// The ports come from below the system's ephemeral range: a port the kernel hands out for
// "127.0.0.1:0" can be handed out again, between this check and the rank's bind, as the
// source port of some other outgoing connection (MLX's own ring sockets of another run
// among them), and the rank then fails with EADDRINUSE.
func writeHostfile(n int) (string, error) {
	var hosts [][]string
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := listenBelowEphemeral()
		if err != nil {
			return "", fmt.Errorf("--launch: find a free port: %w", err)
		}
		ls = append(ls, l)
		hosts = append(hosts, []string{l.Addr().String()})
	}
	b, err := json.Marshal(hosts)
	if err != nil {
		return "", err
	}
	f, err := os.CreateTemp("", "dgtune-hostfile-*.json")
	if err != nil {
		return "", fmt.Errorf("--launch: %w", err)
	}
	defer f.Close()
	if _, err := f.Write(append(b, '\n')); err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("--launch: %w", err)
	}
	return f.Name(), nil
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

// waitRanks waits for every rank. It passes a signal on to them; a second signal, or a
// failed rank that leaves the others running past any bound the ranks keep themselves,
// kills them.
func waitRanks(ctx context.Context, ranks []*exec.Cmd, out *prefixer) error {
	type exit struct {
		rank int
		err  error
	}
	exits := make(chan exit, len(ranks))
	for r, c := range ranks {
		go func() { exits <- exit{r, c.Wait()} }()
	}
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	signalled := false
	pass := func(sig os.Signal) {
		if signalled {
			fmt.Fprintln(out.w, "train: --launch: second signal: killing every rank")
			for _, c := range ranks {
				c.Process.Kill()
			}
			return
		}
		signalled = true
		for _, c := range ranks {
			c.Process.Signal(sig)
		}
	}
	if ctx.Err() != nil { // a signal came while the ranks were starting
		sig := os.Signal(syscall.SIGINT)
		if cli.InterruptCode(ctx) == 143 {
			sig = syscall.SIGTERM
		}
		pass(sig)
	}
	var deadline <-chan time.Time
	var failures []string
	code := 0
	for left := len(ranks); left > 0; {
		select {
		case e := <-exits:
			left--
			if e.err == nil {
				continue
			}
			c := 1
			var ee *exec.ExitError
			if errors.As(e.err, &ee) && ee.ExitCode() > 0 {
				c = ee.ExitCode()
			}
			if code == 0 {
				code = c
			}
			failures = append(failures, fmt.Sprintf("rank %d: %v", e.rank, e.err))
			if deadline == nil {
				deadline = time.After(3 * time.Minute)
			}
		case sig := <-sigs:
			pass(sig)
		case <-deadline:
			fmt.Fprintln(out.w, "train: --launch: a rank failed and the others are still running after 3 minutes: killing them")
			for _, c := range ranks {
				c.Process.Kill()
			}
			deadline = nil
		}
	}
	out.flush()
	if code != 0 {
		return &cli.ExitError{Code: code, Err: fmt.Errorf("--launch: %s", strings.Join(failures, "; "))}
	}
	return nil
}

// prefixer writes the ranks' stderr lines with a "[rank N] " prefix, whole lines at a
// time so that ranks do not interleave within a line.
type prefixer struct {
	mu      sync.Mutex
	w       io.Writer
	partial map[int]*bytes.Buffer
}

type rankWriter struct {
	p    *prefixer
	rank int
}

func (p *prefixer) rank(r int) io.Writer { return rankWriter{p, r} }

func (w rankWriter) Write(b []byte) (int, error) {
	p := w.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.partial == nil {
		p.partial = map[int]*bytes.Buffer{}
	}
	buf := p.partial[w.rank]
	if buf == nil {
		buf = &bytes.Buffer{}
		p.partial[w.rank] = buf
	}
	buf.Write(b)
	for {
		line, err := buf.ReadBytes('\n')
		if err != nil {
			buf.Write(line) // no newline yet: keep it for the next write
			break
		}
		fmt.Fprintf(p.w, "[rank %d] %s", w.rank, line)
	}
	return len(b), nil
}

func (p *prefixer) flush() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for r, buf := range p.partial {
		if buf.Len() > 0 {
			fmt.Fprintf(p.w, "[rank %d] %s\n", r, buf.Bytes())
			buf.Reset()
		}
	}
}

// listenBelowEphemeral listens on a free 127.0.0.1 port between 20000 and the start of the
// ephemeral range (Linux's ip_local_port_range; 32768 elsewhere, below macOS's 49152),
// falling back to any free port.
func listenBelowEphemeral() (net.Listener, error) {
	low := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if v, err := strconv.Atoi(f[0]); err == nil && v > 20100 {
				low = v
			}
		}
	}
	for range 50 {
		port := 20000 + rand.IntN(low-20000)
		if l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port)); err == nil {
			return l, nil
		}
	}
	return net.Listen("tcp", "127.0.0.1:0")
}
