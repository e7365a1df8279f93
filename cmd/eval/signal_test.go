package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dgtune/dgtune/internal/cli/clitest"
)

// command is this package's command, built once for the tests that run it as a child
// process.
var command = clitest.NewBinary("eval")

// TestMain removes the shared build.
func TestMain(m *testing.M) {
	code := m.Run()
	command.Remove()
	os.Exit(code)
}

// TestEvalSignals runs the built command on a split long enough to take tens of seconds,
// signals it once it is scoring, and checks that it stops within a second with 130 or
// 143, one line saying so, and no --json file.
func TestEvalSignals(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the command and runs it as a child process")
	}
	dir := t.TempDir()
	bin := command.Path(t)
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
			cmd := exec.Command(bin, "--model", model, "--data", data, "--backend", "go", "--max-canvas", "8", "--eos-fill", "--json", jsonPath)
			scoring := func(stderr string) bool { return strings.Contains(stderr, "base loss ") } // the first progress line
			r := clitest.Interrupt(t, cmd, tc.sig, scoring, 0)
			if r.Took > time.Second {
				t.Errorf("eval took %v to stop after %s, want under a second", r.Took, tc.name)
			}
			if r.Code != tc.code {
				t.Fatalf("exit %d, want %d\n%s", r.Code, tc.code, r.Stderr)
			}
			if last, want := clitest.LastLine(r.Stderr), "eval: interrupted by "+tc.name+"; nothing written"; last != want {
				t.Errorf("last stderr line %q, want %q", last, want)
			}
			if r.Stdout != "" {
				t.Errorf("stdout %q, want nothing", r.Stdout)
			}
			if _, err := os.Stat(jsonPath); !os.IsNotExist(err) {
				t.Errorf("--json %s was written (%v)", jsonPath, err)
			}
		})
	}
}
