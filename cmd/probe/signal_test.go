package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dgtune/dgtune/internal/cli/clitest"
)

// command is this package's command, built once for the tests that run it as a child
// process.
var command = clitest.NewBinary("probe")

// TestMain removes the shared build.
func TestMain(m *testing.M) {
	code := m.Run()
	command.Remove()
	os.Exit(code)
}

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
	bin := command.Path(t)
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
			r := clitest.Interrupt(t, exec.Command(bin, tc.args...), tc.sig, clitest.After(tc.after), 0)
			if r.Took > time.Second {
				t.Errorf("took %v to stop, want under a second", r.Took)
			}
			if r.Code != tc.code {
				t.Fatalf("exit %d, want %d\n%s", r.Code, tc.code, r.Stderr)
			}
			name := map[int]string{130: "SIGINT", 143: "SIGTERM"}[tc.code]
			if got, want := strings.TrimSuffix(r.Stderr, "\n"), "probe: interrupted by "+name+"; nothing written"; got != want {
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
