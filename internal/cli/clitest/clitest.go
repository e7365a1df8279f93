package clitest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Compile builds the command in the test's package directory into dir/name, with extra
// go build flags (-tags mlx), and returns the binary's path. Tests share one build through
// Binary.
func Compile(dir, name string, flags ...string) (string, error) {
	// go test puts its own GOROOT/bin first on the test binary's PATH.
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("go build: %w", err)
	}
	bin := filepath.Join(dir, name)
	args := append(append([]string{"build"}, flags...), "-o", bin, ".")
	if out, err := exec.Command(goBin, args...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
}

// Binary is the command of the test's package, compiled at most once per test binary for
// every test that runs it as a child process (a go build takes seconds; each test
// building its own took most of a package's test time). Declare one per package and
// call Remove from TestMain after m.Run.
type Binary struct {
	name  string
	flags []string
	once  sync.Once
	dir   string
	bin   string
	err   error
}

// NewBinary is the command name, to be built with flags on first use.
func NewBinary(name string, flags ...string) *Binary {
	return &Binary{name: name, flags: flags}
}

// Path builds the command on the first call and returns the binary's path; a failed
// build fails every test that asks for it.
func (b *Binary) Path(t testing.TB) string {
	t.Helper()
	b.once.Do(func() {
		if b.dir, b.err = os.MkdirTemp("", b.name+"-bin-"); b.err != nil {
			return
		}
		b.bin, b.err = Compile(b.dir, b.name, b.flags...)
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.bin
}

// Remove deletes the build, if one was made.
func (b *Binary) Remove() {
	if b.dir != "" {
		os.RemoveAll(b.dir)
	}
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
