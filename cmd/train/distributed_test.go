//go:build mlx

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dgtune/dgtune/internal/cli/clitest"
	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
	"github.com/dgtune/dgtune/train"
)

// TestDistributed runs the command built with -tags mlx as ranks of MLX's ring on
// localhost (train --launch N, or ranks started by hand with MLX_RANK and MLX_HOSTFILE
// the way mlx.launch starts them) and checks what a distributed run must show: the
// adapter and reported losses of one process, a lost rank named within a bound with
// the checkpoint intact and resumable, signals stopping every rank at the same step,
// and refusals of runs that cannot work.
func TestDistributed(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the command and runs ranks as child processes")
	}
	bin := buildTrainMLX(t, t.TempDir())
	f := newDistFixture(t)

	t.Run("two ranks equal one process", func(t *testing.T) {
		for _, v := range []struct {
			name string
			args []string
			tol  float64 // the adapters' ‖Δ‖/‖x‖ per tensor
		}{
			// The case: global batch 2, one example per rank; 9 train rows, so
			// step 5 ends the epoch with a single example and rank 1 has none. Each rank
			// adds one example's gradient, as one process adds two: equal to the bit.
			{"batch 2", []string{"--batch-size", "2"}, 0},
			// Gradient accumulation and dropout: the scored positions are summed per
			// micro-batch, the masks keyed by the global example. Two ranks add the same
			// per-example gradients in another order — each rank its examples (b % 2) and
			// micro-batches, then the all_sum: (a+c)/2 + (b+d)/2 where one process forms
			// ((a+b) + (c+d))/2 — and AdamW's division by √v magnifies that rounding
			// where a gradient is near zero. Measured: 2.9e-5 (1.3e-5 with one process
			// made to add in the ranks' order within a micro-batch; 3.2e-6 without dropout).
			{"batch 4, accumulation 2, dropout", []string{"--batch-size", "4", "--grad-accumulation-steps", "2", "--lora-parameters.dropout", "0.2"}, 1e-4},
		} {
			t.Run(v.name, func(t *testing.T) {
				one := filepath.Join(f.dir, "one-"+strings.ReplaceAll(v.name, " ", ""))
				two := filepath.Join(f.dir, "two-"+strings.ReplaceAll(v.name, " ", ""))
				mustRun(t, bin, append([]string{"--config", f.cfg, "--adapter-path", one}, v.args...)...)
				out := mustRun(t, bin, append([]string{"--config", f.cfg, "--adapter-path", two, "--launch", "2", "--json", filepath.Join(two, "result.json")}, v.args...)...)
				if !strings.Contains(out, "[rank 1] distributed: rank 1 of 2 joined") {
					t.Errorf("no word from rank 1:\n%s", out)
				}
				frob, elem := compareAdapters(t, filepath.Join(one, train.AdapterFile), filepath.Join(two, train.AdapterFile), v.tol)
				losses := compareMetrics(t, one, two, 1e-5)
				t.Logf("1 process vs 2 ranks: adapter ‖Δ‖/‖x‖ ≤ %.3g per tensor (elementwise max |Δ|/max |x| %.3g), losses within %.3g", frob, elem, losses)
				if w := stateOf(t, two).WorldSize; w != 2 {
					t.Errorf("world_size %d in %s", w, train.StateJSON)
				}
				if w := stateOf(t, one).WorldSize; w != 1 {
					t.Errorf("world_size %d alone", w)
				}
				var res train.Result
				if err := json.Unmarshal([]byte(readFile(t, filepath.Join(two, "result.json"))), &res); err != nil {
					t.Fatal(err)
				}
				if res.Distributed == nil || res.Distributed.WorldSize != 2 || res.Distributed.StepSeconds <= 0 {
					t.Errorf("result %+v", res.Distributed)
				}
			})
		}
	})

	t.Run("a killed rank", func(t *testing.T) {
		dir := filepath.Join(f.dir, "killed")
		other := filepath.Join(f.dir, "killed-rank1") // rank 1's adapter_path: must stay unwritten
		hosts := testHostfile(t, 2)
		args := []string{"--config", f.cfg, "--iters", "100000", "--save-every", "3", "--steps-per-eval", "0", "--batch-size", "2"}
		r0 := startRank(t, bin, hosts, 0, append(args, "--adapter-path", dir)...)
		r1 := startRank(t, bin, hosts, 1, append(args, "--adapter-path", other)...)
		waitFor(t, "training progress", 120*time.Second, func() bool { return stateStep(t, dir) >= 6 })
		r1.cmd.Process.Kill()
		killed := time.Now()
		err := r0.wait(t, 90*time.Second)
		took := time.Since(killed)
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Fatalf("rank 0: %v, want exit 1\n%s", err, r0.stderr)
		}
		t.Logf("rank 0 exited %s after rank 1 was killed: %s", took.Round(time.Millisecond), lastLine(r0.stderr.String()))
		for _, want := range []string{"rank 0 of 2 stops: rank 1 (127.0.0.1) closed its connection without a goodbye", "the last checkpoint (step "} {
			if !strings.Contains(r0.stderr.String(), want) {
				t.Errorf("rank 0 stderr lacks %q:\n%s", want, r0.stderr)
			}
		}
		if _, err := os.Stat(other); !os.IsNotExist(err) {
			t.Errorf("rank 1 wrote %s: %v", other, err)
		}
		// The checkpoint is whole, and resuming it (same world size) gives the adapter and
		// losses of a run that was never interrupted, to the bit.
		k := stateStep(t, dir)
		if !strings.Contains(r0.stderr.String(), fmt.Sprintf("the last checkpoint (step %d)", k)) {
			t.Errorf("checkpoint at step %d, stderr says otherwise:\n%s", k, lastLine(r0.stderr.String()))
		}
		end := strconv.Itoa(k + 4)
		out := mustRun(t, bin, "--config", f.cfg, "--adapter-path", dir, "--launch", "2", "--batch-size", "2", "--save-every", "3", "--steps-per-eval", "0", "--resume", "--iters", end)
		if !strings.Contains(out, "resume: continuing from step "+strconv.Itoa(k)) {
			t.Errorf("resume output:\n%s", out)
		}
		ref := filepath.Join(f.dir, "uninterrupted")
		mustRun(t, bin, "--config", f.cfg, "--adapter-path", ref, "--launch", "2", "--batch-size", "2", "--save-every", "3", "--steps-per-eval", "0", "--iters", end)
		if a, b := readFile(t, filepath.Join(dir, train.AdapterFile)), readFile(t, filepath.Join(ref, train.AdapterFile)); a != b {
			frob, _ := compareAdapters(t, filepath.Join(dir, train.AdapterFile), filepath.Join(ref, train.AdapterFile), 1e-6)
			t.Errorf("resumed adapter differs from the uninterrupted one (‖Δ‖/‖x‖ %.3g)", frob)
		}
		compareMetrics(t, dir, ref, 0)
	})

	t.Run("a stopped rank", func(t *testing.T) {
		// A rank that hangs (here SIGSTOP; a pulled cable looks the same) keeps its sockets
		// open: MLX's ring would wait in all_sum forever. The side channel's silence bound
		// ends the other rank.
		dir := filepath.Join(f.dir, "stopped")
		hosts := testHostfile(t, 2)
		args := []string{"--config", f.cfg, "--iters", "100000", "--save-every", "3", "--steps-per-eval", "0", "--batch-size", "2", "--distributed-timeout", "3"}
		r0 := startRank(t, bin, hosts, 0, append(args, "--adapter-path", dir)...)
		r1 := startRank(t, bin, hosts, 1, append(args, "--adapter-path", filepath.Join(f.dir, "stopped-rank1"))...)
		waitFor(t, "training progress", 120*time.Second, func() bool { return stateStep(t, dir) >= 3 })
		r1.cmd.Process.Signal(syscall.SIGSTOP)
		stopped := time.Now()
		err := r0.wait(t, 60*time.Second)
		took := time.Since(stopped)
		if err == nil || !strings.Contains(r0.stderr.String(), "rank 1 (127.0.0.1) sent nothing for 3s") {
			t.Errorf("rank 0: %v\n%s", err, r0.stderr)
		}
		if took < 2*time.Second || took > 30*time.Second {
			t.Errorf("rank 0 stopped %s after rank 1 hung, want about the 3 s timeout", took)
		}
		t.Logf("rank 0 exited %s after rank 1 was stopped: %s", took.Round(time.Millisecond), lastLine(r0.stderr.String()))
		r1.cmd.Process.Kill()
		if st := stateOf(t, dir); st.Step < 3 {
			t.Errorf("checkpoint at step %d", st.Step)
		}
	})

	t.Run("Ctrl-C on the launcher", func(t *testing.T) {
		dir := filepath.Join(f.dir, "launched")
		c := exec.Command(bin, "--config", f.cfg, "--adapter-path", dir, "--launch", "2", "--iters", "100000", "--save-every", "0", "--steps-per-eval", "0", "--batch-size", "2")
		var stderr bytes.Buffer
		c.Stderr = &stderr
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		lr := &rank{cmd: c, stderr: &stderr, done: make(chan error, 1)}
		go func() { lr.done <- c.Wait() }()
		t.Cleanup(func() { c.Process.Kill() })
		waitFor(t, "training progress", 120*time.Second, func() bool { return trainEvents(dir) >= 3 })
		c.Process.Signal(syscall.SIGINT)
		err := lr.wait(t, 60*time.Second)
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 130 {
			t.Errorf("launcher: %v, want exit 130\n%s", err, stderr.String())
		}
		// Each rank got the signal; the first step whose all_sum carried any of them is the
		// last for both (which ranks it names depends on when each was interrupted).
		k := stateStep(t, dir)
		for _, want := range []string{fmt.Sprintf(`\ninterrupted at step %d \(signal on rank [01](, 1)?\): checkpoint saved`, k), fmt.Sprintf(`\n\[rank 1\] rank 1: interrupted at step %d with the other ranks`, k)} {
			if !regexp.MustCompile(want).MatchString(stderr.String()) {
				t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
			}
		}
	})

	t.Run("a signal on one rank stops both", func(t *testing.T) {
		dir := filepath.Join(f.dir, "signalled")
		hosts := testHostfile(t, 2)
		args := []string{"--config", f.cfg, "--iters", "100000", "--save-every", "0", "--steps-per-eval", "0", "--batch-size", "2"}
		r0 := startRank(t, bin, hosts, 0, append(args, "--adapter-path", dir)...)
		r1 := startRank(t, bin, hosts, 1, append(args, "--adapter-path", filepath.Join(f.dir, "signalled-rank1"))...)
		waitFor(t, "training progress", 120*time.Second, func() bool { return trainEvents(dir) >= 3 })
		r1.cmd.Process.Signal(syscall.SIGINT)
		for r, rk := range []*rank{r0, r1} {
			err := rk.wait(t, 60*time.Second)
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 130 {
				t.Errorf("rank %d: %v, want exit 130\n%s", r, err, rk.stderr)
			}
		}
		k := stateStep(t, dir)
		if !strings.Contains(r0.stderr.String(), fmt.Sprintf("interrupted at step %d (signal on rank 1): checkpoint saved", k)) {
			t.Errorf("rank 0, checkpoint at step %d:\n%s", k, r0.stderr)
		}
		if !strings.Contains(r1.stderr.String(), fmt.Sprintf("rank 1: interrupted at step %d with the other ranks", k)) {
			t.Errorf("rank 1:\n%s", r1.stderr)
		}
		if n := trainEvents(dir); n != k {
			t.Errorf("%d steps reported, checkpoint at step %d", n, k)
		}

		// Resumed by one process: rank 0's state holds nothing per rank, so the run goes on
		// as a run of one would have, up to float summation order.
		end := strconv.Itoa(k + 3)
		out := mustRun(t, bin, "--config", f.cfg, "--adapter-path", dir, "--save-every", "0", "--steps-per-eval", "0", "--batch-size", "2", "--resume", "--iters", end)
		if !strings.Contains(out, "written by 2 rank(s), this run has 1") {
			t.Errorf("no word of the world size:\n%s", out)
		}
		ref := filepath.Join(f.dir, "signalled-ref")
		mustRun(t, bin, "--config", f.cfg, "--adapter-path", ref, "--save-every", "0", "--steps-per-eval", "0", "--batch-size", "2", "--iters", end)
		frob, elem := compareAdapters(t, filepath.Join(dir, train.AdapterFile), filepath.Join(ref, train.AdapterFile), 1e-5)
		t.Logf("2 ranks to step %d, then 1 process to %s, vs 1 process throughout: ‖Δ‖/‖x‖ ≤ %.3g (elementwise %.3g)", k, end, frob, elem)
		if w := stateOf(t, dir).WorldSize; w != 1 {
			t.Errorf("world_size %d after resuming alone", w)
		}
	})

	t.Run("four ranks", func(t *testing.T) {
		if runtime.NumCPU() < 2 {
			t.Skip("needs two cores")
		}
		one, four := filepath.Join(f.dir, "four-ref"), filepath.Join(f.dir, "four")
		args := []string{"--config", f.cfg, "--batch-size", "4", "--iters", "6"}
		mustRun(t, bin, append(args, "--adapter-path", one)...)
		mustRun(t, bin, append(args, "--adapter-path", four, "--launch", "4", "--json", filepath.Join(f.dir, "four.json"))...)
		// Four partial sums instead of two: more rounding in another order, which Adam's
		// per-element normalisation amplifies over the steps (still an order of magnitude
		// below the difference between the go and mlx engines on the same run).
		frob, elem := compareAdapters(t, filepath.Join(one, train.AdapterFile), filepath.Join(four, train.AdapterFile), 1e-4)
		losses := compareMetrics(t, one, four, 1e-4)
		var res train.Result
		if err := json.Unmarshal([]byte(readFile(t, filepath.Join(f.dir, "four.json"))), &res); err != nil {
			t.Fatal(err)
		}
		d := res.Distributed
		t.Logf("4 ranks on %d cores: %.3f s per step, %.3f s in all_sum (%.0f%%), over %d steps; vs one process: adapter ‖Δ‖/‖x‖ ≤ %.3g (elementwise %.3g), losses within %.3g",
			runtime.NumCPU(), d.StepSeconds, d.AllReduceSeconds, 100*d.AllReduceSeconds/d.StepSeconds, d.Steps, frob, elem, losses)
	})

	t.Run("refusals", func(t *testing.T) {
		// batch_size must divide by the world size, on every rank.
		code, out := runBin(t, bin, "--config", f.cfg, "--adapter-path", filepath.Join(f.dir, "bad-batch"), "--launch", "2", "--batch-size", "3")
		if code != 1 || strings.Count(out, "batch_size 3 does not divide by the 2 ranks") != 2 {
			t.Errorf("batch 3 on 2 ranks: exit %d\n%s", code, out)
		}
		// Ranks that would train different runs: every rank names what differs.
		hosts := testHostfile(t, 2)
		r0 := startRank(t, bin, hosts, 0, "--config", f.cfg, "--adapter-path", filepath.Join(f.dir, "disagree"), "--batch-size", "2")
		r1 := startRank(t, bin, hosts, 1, "--config", f.cfg, "--adapter-path", filepath.Join(f.dir, "disagree"), "--batch-size", "2", "--learning-rate", "0.5", "--lora-parameters.rank", "3")
		for r, rk := range []*rank{r0, r1} {
			err := rk.wait(t, 60*time.Second)
			if err == nil || !strings.Contains(rk.stderr.String(), "differing from rank 0: rank 1: lora_parameters.rank, learning_rate, the trainable tensors (model)") {
				t.Errorf("rank %d: %v\n%s", r, err, rk.stderr)
			}
		}
		// A rank that never starts: the others give up within twice distributed_timeout.
		r0 = startRank(t, bin, testHostfile(t, 2), 0, "--config", f.cfg, "--adapter-path", filepath.Join(f.dir, "alone"), "--distributed-timeout", "2")
		start := time.Now()
		err := r0.wait(t, 60*time.Second)
		if err == nil || !strings.Contains(r0.stderr.String(), "rank 0 of 2: the group did not form within 4s") {
			t.Errorf("missing rank 1: %v\n%s", err, r0.stderr)
		}
		t.Logf("missing rank: gave up after %s: %s", time.Since(start).Round(time.Millisecond), lastLine(r0.stderr.String()))
	})
}

// distFixture is the demo's base (a real, pretrained tiny DiffusionGemma, where a step
// moves the adapter without chaos amplifying float rounding), 9 train and 6 valid rows
// of the demo's task, and a config on the mlx engine.
type distFixture struct {
	dir, cfg string
}

func newDistFixture(t *testing.T) distFixture {
	t.Helper()
	dir := t.TempDir()
	rows := func(split string, n int) string {
		lines := strings.SplitAfter(readFile(t, filepath.Join("..", "..", "demo", "data", "shift", split+".jsonl")), "\n")
		if len(lines) < n {
			t.Fatalf("demo %s split has %d rows", split, len(lines))
		}
		return strings.Join(lines[:n], "")
	}
	writeFile(t, filepath.Join(dir, "data", "train.jsonl"), rows("train", 9))
	writeFile(t, filepath.Join(dir, "data", "valid.jsonl"), rows("valid", 6))
	model, err := filepath.Abs(filepath.Join("..", "..", "demo", "base"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := writeFile(t, filepath.Join(dir, "dist.yaml"), "model: "+model+"\ndata: "+filepath.Join(dir, "data")+
		"\nbackend: mlx\nseed: 5\niters: 8\nlearning_rate: 0.002\neos_fill: true\nmax_canvas: 8\nsteps_per_report: 1\nsteps_per_eval: 4\nsave_every: 4\n"+
		"lora_parameters:\n  rank: 4\n")
	return distFixture{dir: dir, cfg: cfg}
}

// buildTrainMLX compiles this command with the mlx engine into dir.
func buildTrainMLX(t *testing.T, dir string) string {
	t.Helper()
	bin, err := clitest.Compile(dir, "train", "-tags", "mlx")
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// runBin runs the built command to the end and returns its exit code and stderr.
func runBin(t *testing.T, bin string, args ...string) (int, string) {
	t.Helper()
	var stderr bytes.Buffer
	c := exec.Command(bin, args...)
	c.Stderr = &stderr
	err := c.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, stderr.String()
	case errors.As(err, &ee):
		return ee.ExitCode(), stderr.String()
	}
	t.Fatalf("run %v: %v", args, err)
	return 0, ""
}

func mustRun(t *testing.T, bin string, args ...string) string {
	t.Helper()
	code, out := runBin(t, bin, args...)
	if code != 0 {
		t.Fatalf("train %s: exit %d\n%s", strings.Join(args, " "), code, out)
	}
	return out
}

// testHostfile writes MLX's ring hostfile for n ranks on free localhost ports.
func testHostfile(t *testing.T, n int) string {
	t.Helper()
	var hosts [][]string
	var ls []net.Listener
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		hosts = append(hosts, []string{l.Addr().String()})
	}
	for _, l := range ls {
		l.Close()
	}
	b, _ := json.Marshal(hosts)
	return writeFile(t, filepath.Join(t.TempDir(), "hosts.json"), string(b))
}

// rank is a rank started by hand, as mlx.launch would.
type rank struct {
	cmd    *exec.Cmd
	stderr *bytes.Buffer
	done   chan error
}

func startRank(t *testing.T, bin, hostfile string, r int, args ...string) *rank {
	t.Helper()
	c := exec.Command(bin, args...)
	c.Env = append(os.Environ(), "MLX_RANK="+strconv.Itoa(r), "MLX_HOSTFILE="+hostfile)
	rk := &rank{cmd: c, stderr: &bytes.Buffer{}, done: make(chan error, 1)}
	c.Stderr = rk.stderr
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { rk.done <- c.Wait() }()
	t.Cleanup(func() { c.Process.Kill() })
	return rk
}

func (rk *rank) wait(t *testing.T, d time.Duration) error {
	t.Helper()
	select {
	case err := <-rk.done:
		return err
	case <-time.After(d):
		rk.cmd.Process.Kill()
		t.Fatalf("rank did not exit within %s\n%s", d, rk.stderr)
	}
	return nil
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

func stateOf(t *testing.T, dir string) train.State {
	t.Helper()
	var st train.State
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(dir, train.StateJSON))), &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// compareAdapters checks that two adapter files hold the same tensors within rel,
// measured per tensor as ‖a−b‖ / ‖b‖ (Frobenius), and returns the largest such
// difference and the largest elementwise one, max |a−b| / max |b|. (Adam divides each
// gradient by its own running magnitude, so an element whose gradient is a near-cancelling
// sum, different in the last bits when summed in another order, moves by a visibly
// different fraction of the learning rate: the elementwise measure is the noisier one.)
func compareAdapters(t *testing.T, pathA, pathB string, rel float64) (frob, elem float64) {
	t.Helper()
	e := mxtest.Go(t)
	a, _, err := mx.LoadSafetensors(e, pathA)
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := mx.LoadSafetensors(e, pathB)
	if err != nil {
		t.Fatal(err)
	}
	if len(a) != len(b) || len(a) == 0 {
		t.Fatalf("%d tensors vs %d", len(a), len(b))
	}
	for n, x := range a {
		y, ok := b[n]
		if !ok {
			t.Fatalf("%s missing from %s", n, pathB)
		}
		xs, ys := x.Float32s(), y.Float32s()
		var maxDiff, maxAbs, d2, s2 float64
		for i := range xs {
			d := math.Abs(float64(xs[i]) - float64(ys[i]))
			maxDiff = math.Max(maxDiff, d)
			maxAbs = math.Max(maxAbs, math.Abs(float64(ys[i])))
			d2 += d * d
			s2 += float64(ys[i]) * float64(ys[i])
		}
		r := math.Sqrt(d2 / math.Max(s2, 1e-300))
		frob, elem = math.Max(frob, r), math.Max(elem, maxDiff/math.Max(maxAbs, 1e-30))
		if r > rel {
			t.Errorf("%s: ‖Δ‖/‖x‖ = %.3g, want ≤ %g (max |Δ| %.3g)", n, r, rel, maxDiff)
		}
	}
	return frob, elem
}

// compareMetrics checks that two runs reported the same train and val losses (within
// rel) at the same iterations, with the same token counts, and returns the largest
// relative difference.
func compareMetrics(t *testing.T, dirA, dirB string, rel float64) (worst float64) {
	t.Helper()
	a, b := metrics(t, dirA), metrics(t, dirB)
	if len(a) != len(b) || len(a) == 0 {
		t.Fatalf("%d metric events vs %d", len(a), len(b))
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.Event != y.Event || x.Iteration != y.Iteration || x.TrainedTokens != y.TrainedTokens {
			t.Errorf("event %d: %+v vs %+v", i, x, y)
			continue
		}
		lx, ly := x.TrainLoss+x.ValLoss, y.TrainLoss+y.ValLoss
		worst = math.Max(worst, math.Abs(lx-ly)/math.Abs(ly))
		if math.Abs(lx-ly) > rel*math.Abs(ly) {
			t.Errorf("%s loss at iteration %d: %.9g vs %.9g", x.Event, x.Iteration, lx, ly)
		}
	}
	return worst
}

type metricEvent struct {
	Event         string  `json:"event"`
	Iteration     int     `json:"iteration"`
	TrainLoss     float64 `json:"train_loss"`
	ValLoss       float64 `json:"val_loss"`
	TrainedTokens int64   `json:"trained_tokens"`
}

func metrics(t *testing.T, dir string) []metricEvent {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, train.MetricsFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []metricEvent
	s := bufio.NewScanner(f)
	for s.Scan() {
		var ev metricEvent
		if err := json.Unmarshal(s.Bytes(), &ev); err != nil {
			t.Fatal(err)
		}
		out = append(out, ev)
	}
	return out
}
