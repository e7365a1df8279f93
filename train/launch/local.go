package launch

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
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Local is a program to run as the ranks of one group on this machine, the way
// mlx.launch -n N does (see Run for what each rank is given).
type Local struct {
	Ranks int // how many (at least 2)
	// Backend is the group the ranks form: "ring" (or empty), "nccl", or "any" (MLX's
	// choice in each rank: NCCL on a build that has it, else the ring).
	Backend string
	Exe     string   // the program; "" is this one (os.Executable)
	Args    []string // every rank's arguments
	// Stdout receives every rank's output as it is; Stderr rank 0's as it is and the
	// others' lines with a "[rank N] " prefix.
	Stdout, Stderr io.Writer
	// Signal is the signal to pass on when the context is already cancelled once the
	// ranks have started (it came while they were starting); nil passes SIGINT.
	Signal func() os.Signal
	// Env is the ranks' environment before the launch adds its variables; nil is this
	// process's.
	Env []string
	// GPUs are the GPUs handed out one per rank as CUDA_VISIBLE_DEVICES (nccl, any); nil
	// is those VisibleGPUs finds in Env and on this machine.
	GPUs []string
}

// ExitError is a launch whose ranks did not all succeed: Code is the first failed rank's
// exit code (1 when it had none), for the launcher to exit with.
type ExitError struct {
	Code     int
	Failures []string // "rank N: <how it ended>"
}

func (e *ExitError) Error() string { return "--launch: " + strings.Join(e.Failures, "; ") }

// Run starts the ranks and waits for every one. Each rank gets MLX_RANK and, by Backend:
//
//   - ring: MLX_HOSTFILE, a hostfile of free ports on 127.0.0.1, as mlx.launch
//     --backend ring writes it;
//   - nccl: MLX_WORLD_SIZE, NCCL_HOST_IP=127.0.0.1 and a free NCCL_PORT (rank 0's), and
//     a GPU of its own in CUDA_VISIBLE_DEVICES, as mlx.launch --backend nccl sets them;
//     also NCCL_NVLS_ENABLE=0 (NVLink multicast off) unless Env sets it. NCCL cannot put
//     two ranks on one GPU, so a machine known to have fewer GPUs than ranks is refused;
//     where the count is unknown rank r gets GPU r, as mlx.launch assumes;
//   - any: the ring's variables, and NCCL's as well when every rank has a GPU of its own,
//     so that each rank chooses as MLX's backend "any" does.
//
// A signal (or ctx cancelled by one) is passed on to every rank once: they stop together
// after the same step, rank 0 saving. A second signal kills them, as does a failed rank
// that leaves the others running past any bound the ranks keep themselves. It returns an
// *ExitError when a rank failed.
func (l Local) Run(ctx context.Context) error {
	exe := l.Exe
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return fmt.Errorf("--launch: %w", err)
		}
	}
	envs, cleanup, err := l.environments()
	if err != nil {
		return err
	}
	defer cleanup()
	stderr := &prefixer{w: l.Stderr}
	ranks := make([]*exec.Cmd, l.Ranks)
	for r := range ranks {
		c := exec.Command(exe, l.Args...)
		c.Env = envs[r]
		c.Stdout = l.Stdout
		c.Stderr = l.Stderr
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
	return waitRanks(ctx, ranks, stderr, l.Signal)
}

// environments are the ranks' environments (see Run), and what removes the files they
// name once the ranks have ended.
func (l Local) environments() ([][]string, func(), error) {
	base := l.Env
	if base == nil {
		base = os.Environ()
	}
	backend := l.Backend
	if backend == "" {
		backend = "ring"
	}
	var gpus []string
	switch backend {
	case "ring":
	case "nccl", "any":
		gpus = l.GPUs
		where := "given"
		if gpus == nil {
			gpus, where = VisibleGPUs(base)
		}
		switch {
		case gpus == nil && backend == "nccl":
			for r := range l.Ranks {
				gpus = append(gpus, strconv.Itoa(r))
			}
		case len(gpus) < l.Ranks && backend == "nccl":
			return nil, nil, fmt.Errorf("--launch %d over NCCL needs a GPU for each rank (NCCL cannot put two ranks on one), and %s lists %d", l.Ranks, where, len(gpus))
		case len(gpus) < l.Ranks:
			gpus = nil // any: the ring, the ranks sharing what GPUs there are
		}
	default:
		return nil, nil, fmt.Errorf("--launch: backend %q: want ring, nccl or any", backend)
	}
	envs := make([][]string, l.Ranks)
	for r := range envs {
		envs[r] = append(slices.Clip(base), "MLX_RANK="+strconv.Itoa(r))
	}
	cleanup := func() {}
	if backend != "nccl" {
		hostfile, err := writeHostfile(l.Ranks)
		if err != nil {
			return nil, nil, err
		}
		cleanup = func() { os.Remove(hostfile) }
		for r := range envs {
			envs[r] = append(envs[r], "MLX_HOSTFILE="+hostfile)
		}
	}
	if gpus != nil {
		ln, err := listenBelowEphemeral()
		if err != nil {
			cleanup()
			return nil, nil, fmt.Errorf("--launch: find a free port: %w", err)
		}
		port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
		ln.Close()
		_, nvlsSet := lookupEnv(base, "NCCL_NVLS_ENABLE")
		for r := range envs {
			envs[r] = append(envs[r], "MLX_WORLD_SIZE="+strconv.Itoa(l.Ranks), "NCCL_HOST_IP=127.0.0.1", "NCCL_PORT="+port, "CUDA_VISIBLE_DEVICES="+gpus[r])
			if !nvlsSet {
				// NVLink multicast (NVLS) stays off: on a host whose GPUs others share, a
				// job that uses it can put them out of service (the GPU machines this
				// project runs on require it off). Two ranks' all_sum does not need it.
				envs[r] = append(envs[r], "NCCL_NVLS_ENABLE=0")
			}
		}
	}
	return envs, cleanup, nil
}

// VisibleGPUs lists the GPUs a process with environment env may use, as the ids to put in
// CUDA_VISIBLE_DEVICES, and where they were found: the entries of CUDA_VISIBLE_DEVICES
// when it is set (as CUDA reads it: up to the first empty or negative entry), else one
// per GPU the NVIDIA driver lists in /proc/driver/nvidia/gpus. nil means unknown.
func VisibleGPUs(env []string) ([]string, string) {
	return visibleGPUs(env, "/proc/driver/nvidia/gpus")
}

func visibleGPUs(env []string, driverDir string) ([]string, string) {
	if v, ok := lookupEnv(env, "CUDA_VISIBLE_DEVICES"); ok {
		ids := []string{}
		for _, id := range strings.Split(v, ",") {
			id = strings.TrimSpace(id)
			if id == "" || strings.HasPrefix(id, "-") {
				break
			}
			ids = append(ids, id)
		}
		return ids, "CUDA_VISIBLE_DEVICES=" + v
	}
	entries, err := os.ReadDir(driverDir)
	if err != nil {
		return nil, ""
	}
	ids := []string{}
	for i := range entries {
		ids = append(ids, strconv.Itoa(i))
	}
	return ids, "this machine (" + driverDir + ")"
}

// lookupEnv is os.LookupEnv on an environment list: the last entry of key wins, as in
// exec.Cmd.Env.
func lookupEnv(env []string, key string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v, true
		}
	}
	return "", false
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

// waitRanks waits for every rank. It passes a signal on to them (cancelled's, or SIGINT,
// when ctx is already cancelled); a second signal, or a failed rank that leaves the others
// running past any bound the ranks keep themselves, kills them.
func waitRanks(ctx context.Context, ranks []*exec.Cmd, out *prefixer, cancelled func() os.Signal) error {
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
		if cancelled != nil {
			sig = cancelled()
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
		return &ExitError{Code: code, Failures: failures}
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
