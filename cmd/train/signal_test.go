package main

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dgtune/dgtune/internal/cli/clitest"
	"github.com/dgtune/dgtune/train"
)

// built is the command compiled once for every test that runs it as a child process.
var built struct {
	once sync.Once
	dir  string
	bin  string
	err  error
}

// TestMain removes the shared build.
func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// buildTrain compiles this command (once per test binary) and returns its path.
func buildTrain(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		if built.dir, built.err = os.MkdirTemp("", "train-bin-"); built.err != nil {
			return
		}
		built.bin, built.err = clitest.Compile(built.dir, "train")
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.bin
}

// waitFor polls cond every 20 ms until it holds or the deadline passes.
func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// trainEvents counts the train lines of metrics.jsonl.
func trainEvents(dir string) int {
	b, _ := os.ReadFile(filepath.Join(dir, train.MetricsFile))
	return strings.Count(string(b), `"event":"train"`)
}

// stateStep reads the step of the last complete checkpoint (-1 if none) from where
// --resume reads it: the metadata of training_state.safetensors. (training_state.json is
// a readable copy published by a second rename; a signal between the two would make it
// disagree with what resume continues from.)
func stateStep(t *testing.T, dir string) int {
	t.Helper()
	st, err := train.ReadState(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return -1
	}
	if err != nil {
		t.Fatalf("read state: %v", err)
	}
	return st.Step
}

// TestSignals runs the built command as a child process on a config of 100000 steps,
// signals it once it has made progress, and checks the exit code and that the
// checkpoint it leaves is resumable (resumed in-process to two more steps).
func TestSignals(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the command and runs it as a child process")
	}
	bin := buildTrain(t)
	cases := []struct {
		name string
		sig  syscall.Signal
		code int // -1: killed, no exit code
	}{
		{"SIGINT", syscall.SIGINT, 130},
		{"SIGTERM", syscall.SIGTERM, 143},
		// SIGKILL cannot be caught: the run dies mid-step and --resume must restart from
		// the last complete checkpoint (save_every 2).
		{"SIGKILL", syscall.SIGKILL, -1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			cfg := f.config(t, "")
			var stderr bytes.Buffer
			cmd := exec.Command(bin, "--config", cfg, "--iters", "100000", "--save-every", "2")
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			progressed := func() bool {
				select {
				case err := <-done:
					t.Fatalf("train exited before the signal: %v\n%s", err, stderr.String())
				default:
				}
				return trainEvents(f.adapters) >= 3 && stateStep(t, f.adapters) >= 2
			}
			waitFor(t, "training progress", 60*time.Second, progressed)
			if err := cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			var err error
			select {
			case err = <-done:
			case <-time.After(60 * time.Second):
				cmd.Process.Kill()
				t.Fatalf("train did not exit after %s\n%s", tc.name, stderr.String())
			}
			var ee *exec.ExitError
			if !errors.As(err, &ee) {
				t.Fatalf("exit: %v, want a non-zero exit\n%s", err, stderr.String())
			}
			if tc.code >= 0 {
				if ee.ExitCode() != tc.code {
					t.Fatalf("exit code %d, want %d\n%s", ee.ExitCode(), tc.code, stderr.String())
				}
				if !strings.Contains(stderr.String(), "checkpoint saved") || !strings.Contains(stderr.String(), "train: interrupted") {
					t.Errorf("stderr does not report the saved checkpoint:\n%s", stderr.String())
				}
			} else if ws, ok := ee.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
				t.Fatalf("exit %v, want death by SIGKILL", err)
			}

			// A signalled run saves the step it finished: the state is at least as far as
			// the last reported step. A killed run keeps its last periodic checkpoint.
			k := stateStep(t, f.adapters)
			if tc.code >= 0 && k != trainEvents(f.adapters) {
				t.Errorf("checkpoint at step %d, but %d steps were reported", k, trainEvents(f.adapters))
			}
			if k < 2 {
				t.Fatalf("checkpoint at step %d after %s", k, tc.name)
			}
			code, stdout, errOut := runMain("--config", cfg, "--resume", "--iters", strconv.Itoa(k+2))
			if code != 0 {
				t.Fatalf("resume: exit %d\n%s", code, errOut)
			}
			if !strings.Contains(errOut, "continuing from step "+strconv.Itoa(k)) || !strings.HasPrefix(stdout, "trained "+strconv.Itoa(k+2)+" steps") {
				t.Errorf("resume from step %d: stdout %q\n%s", k, stdout, errOut)
			}
		})
	}
}
