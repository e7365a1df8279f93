package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMkdataImpossibleSizes: more distinct words than the alphabet and lengths allow is
// refused at once (it looped forever at 100 % CPU), and so is an alphabet the tasks cannot
// use; nothing is written.
func TestMkdataImpossibleSizes(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--task", "copy", "--alphabet", "abc"},
			`probe: --train 2000 + --valid 64 + --test 64 ask for 2128 distinct words, but --alphabet "abc" has only 81 of length 4 to 4: use more letters, longer words or fewer examples`},
		{[]string{"--alphabet", "ab", "--min-len", "1", "--max-len", "3", "--train", "10", "--valid", "3", "--test", "2"},
			`probe: --train 10 + --valid 3 + --test 2 ask for 15 distinct words, but --alphabet "ab" has only 14 of length 1 to 3: use more letters, longer words or fewer examples`},
		{[]string{"--alphabet", "abca"}, `probe: --alphabet "abca" repeats 'a'`},
		{[]string{"--alphabet", "aé"}, `probe: --alphabet "aé": letters must be ASCII`},
		{[]string{"--train", "-1"}, `probe: --train -1, --valid 64, --test 64: counts must not be negative`},
	} {
		out := filepath.Join(t.TempDir(), "data")
		stdout, stderr, code := probe(t, append([]string{"mkdata", "--out", out}, tc.args...)...)
		if code != 1 || stdout != "" || strings.TrimSuffix(stderr, "\n") != tc.want {
			t.Errorf("mkdata %q: exit %d, stdout %q, stderr %q\nwant exit 1 and %q", tc.args, code, stdout, stderr, tc.want)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("mkdata %q wrote %s", tc.args, out)
		}
	}
	// Exactly as many words as exist is possible.
	out := filepath.Join(t.TempDir(), "data")
	if _, stderr, code := probe(t, "mkdata", "--out", out, "--alphabet", "ab", "--min-len", "1", "--max-len", "3", "--train", "10", "--valid", "2", "--test", "2"); code != 0 {
		t.Fatalf("14 of 14 words: exit %d: %s", code, stderr)
	}
}

// TestProbeSignals runs the built command, signals it mid-work and checks that it stops
// within a second with 130 (SIGINT) or 143 (SIGTERM) and leaves no output: bench between
// steps (its --cpuprofile removed), forward inside one long forward pass (abandoned by
// cli.Main after its grace), mkmodel before its staged checkpoint is moved into place.
func TestProbeSignals(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the command and runs it as a child process")
	}
	dir := t.TempDir()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	bin := filepath.Join(dir, "probe")
	if out, err := exec.Command(goBin, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	small := filepath.Join(dir, "small")
	if out, err := exec.Command(bin, "mkmodel", "--preset", "small", "--seed", "1", "--out", small).CombinedOutput(); err != nil {
		t.Fatalf("mkmodel: %v\n%s", err, out)
	}
	ids := make([]string, 3000)
	for i := range ids {
		ids[i] = strconv.Itoa(5 + i%4000)
	}
	profile := filepath.Join(dir, "cpu.prof")
	fwd := filepath.Join(dir, "fwd.safetensors")
	model := filepath.Join(dir, "bench-model")
	for _, tc := range []struct {
		name   string
		args   []string
		sig    syscall.Signal
		after  time.Duration // signal this long after the start
		code   int
		absent string
	}{
		{"bench SIGINT", []string{"bench", "--model", small, "--steps", "100000", "--prompt-len", "16", "--canvas-len", "16", "--cpuprofile", profile}, syscall.SIGINT, 1500 * time.Millisecond, 130, profile},
		{"forward SIGTERM", []string{"forward", "--model", small, "--prompt", strings.Join(ids, ","), "--canvas", "5,6,7", "--out", fwd}, syscall.SIGTERM, 800 * time.Millisecond, 143, fwd},
		{"mkmodel SIGINT", []string{"mkmodel", "--preset", "bench", "--seed", "1", "--bits", "4", "--out", model}, syscall.SIGINT, 300 * time.Millisecond, 130, model},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			cmd := exec.Command(bin, tc.args...)
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				t.Fatalf("exited before the signal (%v): the work is too short for this test\n%s", err, stderr.String())
			case <-time.After(tc.after):
			}
			sent := time.Now()
			if err := cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				cmd.Process.Kill()
				t.Fatalf("did not exit after the signal\n%s", stderr.String())
			}
			if took := time.Since(sent); took > time.Second {
				t.Errorf("took %v to stop, want under a second", took)
			}
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != tc.code {
				t.Fatalf("exit %v, want %d\n%s", err, tc.code, stderr.String())
			}
			name := map[int]string{130: "SIGINT", 143: "SIGTERM"}[tc.code]
			if got, want := strings.TrimSuffix(stderr.String(), "\n"), "probe: interrupted by "+name+"; nothing written"; got != want {
				t.Errorf("stderr %q, want %q", got, want)
			}
			if _, err := os.Stat(tc.absent); !os.IsNotExist(err) {
				t.Errorf("%s was left behind (%v)", tc.absent, err)
			}
			if left, _ := filepath.Glob(filepath.Join(dir, ".*tmp-*")); len(left) > 0 {
				t.Errorf("temporary files left: %v", left)
			}
		})
	}
}
