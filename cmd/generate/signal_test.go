package main

import (
	"bufio"
	"errors"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// buildGenerate compiles this command into dir.
func buildGenerate(t *testing.T, dir string) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	bin := filepath.Join(dir, "generate")
	if out, err := exec.Command(goBin, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestSignals runs the built command as a child process, signals it once it is busy and
// checks that it exits 130 (SIGINT) or 143 (SIGTERM) within a second, saying so in one
// line. Busy is either a generation that would run for hours (a random tiny model, whose
// entropy never lets the stop rule end a block, with a million denoising steps per block)
// or a chat waiting for its next line on a stdin that stays open.
func TestSignals(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the command and runs it as a child process")
	}
	dir := t.TempDir()
	bin := buildGenerate(t, dir)
	model := filepath.Join(dir, "tiny")
	writeModel(t, model, nil)
	generating := []string{"--model", model, "--prompt", "hi", "--sampler", "entropy", "--steps", "1000000", "--max-tokens", "100000", "--backend", "go"}
	chatting := []string{"--model", model, "--chat", "--backend", "go"}
	for _, tc := range []struct {
		name string
		args []string
		sig  syscall.Signal
		code int
		chat bool
	}{
		{"generating SIGINT", generating, syscall.SIGINT, 130, false},
		{"generating SIGTERM", generating, syscall.SIGTERM, 143, false},
		{"chat waiting for input SIGINT", chatting, syscall.SIGINT, 130, true},
		{"chat waiting for input SIGTERM", chatting, syscall.SIGTERM, 143, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(bin, tc.args...)
			stdin, err := cmd.StdinPipe() // held open: the chat waits on it
			if err != nil {
				t.Fatal(err)
			}
			defer stdin.Close()
			stderr, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			var stdout strings.Builder
			cmd.Stdout = &stdout
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// The sampler line is the last before generation (or the chat's first read).
			lines := make(chan string, 100)
			go func() {
				sc := bufio.NewScanner(stderr)
				for sc.Scan() {
					lines <- sc.Text()
				}
				close(lines)
			}()
			var log []string
			ready := time.After(60 * time.Second)
		wait:
			for {
				select {
				case l, ok := <-lines:
					if !ok {
						t.Fatalf("generate ended before the signal:\n%s", strings.Join(log, "\n"))
					}
					log = append(log, l)
					if strings.HasPrefix(l, "sampler ") {
						break wait
					}
				case <-ready:
					cmd.Process.Kill()
					t.Fatalf("generate did not start within 60 s:\n%s", strings.Join(log, "\n"))
				}
			}
			time.Sleep(300 * time.Millisecond) // well into the first block's passes
			sent := time.Now()
			if err := cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				for l := range lines {
					log = append(log, l)
				}
				done <- cmd.Wait()
			}()
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				cmd.Process.Kill()
				t.Fatalf("generate did not exit within 10 s of %s", tc.name)
			}
			took := time.Since(sent)
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != tc.code {
				t.Fatalf("exit %v, want code %d\n%s", err, tc.code, strings.Join(log, "\n"))
			}
			if took > time.Second {
				t.Errorf("exited %v after the signal, want within a second", took)
			}
			if last := log[len(log)-1]; last != "generate: interrupted" {
				t.Errorf("last stderr line %q, want \"generate: interrupted\"", last)
			}
			t.Logf("exit %d %v after %s", tc.code, took.Round(time.Millisecond), tc.name)
			if tc.chat && stdout.String() != "" {
				t.Errorf("the chat wrote %q before any input", stdout.String())
			}
		})
	}
}
