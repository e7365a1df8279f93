package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer a child process writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestEvalSignals runs the built command on a split long enough to take tens of seconds,
// signals it once it is scoring, and checks that it stops within a second with 130 or
// 143, one line saying so, and no --json file.
func TestEvalSignals(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the command and runs it as a child process")
	}
	dir := t.TempDir()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	bin := filepath.Join(dir, "eval")
	if out, err := exec.Command(goBin, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	data := filepath.Join(dir, "data")
	var rows strings.Builder
	for i := range 3000 {
		w := string([]byte{'a' + byte(i%7), 'b' + byte(i/7%6), 'c' + byte(i/42%5), 'd' + byte(i/210%4)})
		fmt.Fprintf(&rows, "{\"prompt\": \"shift: %s\", \"completion\": \"%s\"}\n", w, w)
	}
	if err := os.MkdirAll(data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "test.jsonl"), []byte(rows.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	model, err := filepath.Abs("../../demo/base")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		sig  syscall.Signal
		name string
		code int
	}{{syscall.SIGINT, "SIGINT", 130}, {syscall.SIGTERM, "SIGTERM", 143}} {
		t.Run(tc.name, func(t *testing.T) {
			jsonPath := filepath.Join(dir, tc.name+".json")
			var stdout, stderr syncBuffer
			cmd := exec.Command(bin, "--model", model, "--data", data, "--backend", "go", "--max-canvas", "8", "--eos-fill", "--json", jsonPath)
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			deadline := time.Now().Add(60 * time.Second)
			for !strings.Contains(stderr.String(), "base loss ") { // the first progress line
				select {
				case err := <-done:
					t.Fatalf("eval exited before the signal: %v\n%s", err, stderr.String())
				case <-time.After(20 * time.Millisecond):
				}
				if time.Now().After(deadline) {
					cmd.Process.Kill()
					t.Fatalf("eval made no progress:\n%s", stderr.String())
				}
			}
			sent := time.Now()
			if err := cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				cmd.Process.Kill()
				t.Fatalf("eval did not exit after %s\n%s", tc.name, stderr.String())
			}
			if took := time.Since(sent); took > time.Second {
				t.Errorf("eval took %v to stop after %s, want under a second", took, tc.name)
			}
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != tc.code {
				t.Fatalf("exit %v, want %d\n%s", err, tc.code, stderr.String())
			}
			lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
			if last, want := lines[len(lines)-1], "eval: interrupted by "+tc.name+"; nothing written"; last != want {
				t.Errorf("last stderr line %q, want %q", last, want)
			}
			if stdout.String() != "" {
				t.Errorf("stdout %q, want nothing", stdout.String())
			}
			if _, err := os.Stat(jsonPath); !os.IsNotExist(err) {
				t.Errorf("--json %s was written (%v)", jsonPath, err)
			}
		})
	}
}
