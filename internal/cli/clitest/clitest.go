package clitest

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
	"testing"
	"time"
)

// Build compiles the command in the test's package directory into dir/name and returns
// the binary's path.
func Build(t testing.TB, dir, name string) string {
	t.Helper()
	bin, err := Compile(dir, name)
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// Compile is Build without a test: for a package's tests that share one build (a
// sync.Once, removed in TestMain).
func Compile(dir, name string) (string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	bin := filepath.Join(dir, name)
	if out, err := exec.Command(goBin, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
}

// Stopped is how a signalled command ended.
type Stopped struct {
	Code           int           // exit code (-1 when it did not exit normally)
	Took           time.Duration // from the signal to the exit
	Stdout, Stderr string
}

// After is a readiness test for Interrupt: true once d has passed since its first call
// (Interrupt makes that call right after starting the command).
func After(d time.Duration) func(stderr string) bool {
	var start time.Time
	return func(string) bool {
		if start.IsZero() {
			start = time.Now()
		}
		return time.Since(start) >= d
	}
}

// Interrupt starts cmd (its Stdin, if any, set by the caller), waits until ready(stderr
// so far) holds, then settle more, sends sig and waits for the exit. It fails the test
// when the command ends before the signal (the work is too short for the test), is not
// ready within a minute, or does not exit within 10 s of the signal.
func Interrupt(t testing.TB, cmd *exec.Cmd, sig os.Signal, ready func(stderr string) bool, settle time.Duration) Stopped {
	t.Helper()
	var stdout, stderr syncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	deadline := time.Now().Add(time.Minute)
	for !ready(stderr.String()) {
		select {
		case err := <-done:
			t.Fatalf("%s exited before the signal (%v): the work is too short for this test\n%s", cmd.Path, err, stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("%s was not ready within a minute:\n%s", cmd.Path, stderr.String())
		}
	}
	time.Sleep(settle)
	sent := time.Now()
	if err := cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	var err error
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("%s did not exit within 10 s of %v\n%s", cmd.Path, sig, stderr.String())
	}
	s := Stopped{Code: 0, Took: time.Since(sent), Stdout: stdout.String(), Stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		s.Code = ee.ExitCode()
	case err != nil:
		t.Fatalf("%s: %v", cmd.Path, err)
	}
	return s
}

// LastLine is the last line of s.
func LastLine(s string) string {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	return lines[len(lines)-1]
}

// syncBuffer is a bytes.Buffer safe for the command's writes and the test's reads.
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
