package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dgtune/dgtune/internal/cli/clitest"
)

// command is this package's command, built once for the tests that run it as a child
// process (TestMain removes it).
var command = clitest.NewBinary("generate")

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
	bin := command.Path(t)
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
			// The sampler line is the last before generation (or the chat's first read);
			// then well into the first block's passes.
			started := func(stderr string) bool {
				return strings.HasPrefix(stderr, "sampler ") || strings.Contains(stderr, "\nsampler ")
			}
			r := clitest.Interrupt(t, cmd, tc.sig, started, 300*time.Millisecond)
			if r.Code != tc.code {
				t.Fatalf("exit %d, want code %d\n%s", r.Code, tc.code, r.Stderr)
			}
			if r.Took > time.Second {
				t.Errorf("exited %v after the signal, want within a second", r.Took)
			}
			if last := clitest.LastLine(r.Stderr); last != "generate: interrupted" {
				t.Errorf("last stderr line %q, want \"generate: interrupted\"", last)
			}
			t.Logf("exit %d %v after %s", tc.code, r.Took.Round(time.Millisecond), tc.name)
			if tc.chat && r.Stdout != "" {
				t.Errorf("the chat wrote %q before any input", r.Stdout)
			}
		})
	}
}
