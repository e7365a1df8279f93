package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dgtune/dgtune/lora"
	dg "github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/mx/mxtest"
)

// TestExportSignal: SIGINT during --fuse of a model big enough to take seconds stops the
// built command within a second with 130, and neither --out nor its hidden staging
// directory is left.
func TestExportSignal(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the command and runs it as a child process")
	}
	e := mxtest.Go(t)
	dir := t.TempDir()
	model, ad := filepath.Join(dir, "model"), filepath.Join(dir, "adapter")
	writeModel(t, e, model, "4", func(c *dg.Config) {
		p, err := dg.Preset(dg.PresetBench)
		if err != nil {
			t.Fatal(err)
		}
		*c = *p
	})
	writeAdapter(t, e, model, ad, lora.Config{Rank: 4, Scale: 2}, 7, 0.05)
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	bin := filepath.Join(dir, "export")
	if out, err := exec.Command(goBin, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out := filepath.Join(dir, "fused")
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, "--adapter", ad, "--fuse", "--dequantize", "--out", out)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		t.Fatalf("exited before the signal (%v): the fuse is too short for this test\n%s", err, stderr.String())
	case <-time.After(700 * time.Millisecond):
	}
	sent := time.Now()
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("did not exit after SIGINT\n%s", stderr.String())
	}
	if took := time.Since(sent); took > time.Second {
		t.Errorf("took %v to stop, want under a second", took)
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Fatalf("exit %v, want 130\n%s", err, stderr.String())
	}
	if got := strings.TrimSuffix(stderr.String(), "\n"); got != "export: interrupted by SIGINT; nothing written" {
		t.Errorf("stderr %q", got)
	}
	if stdout.Len() > 0 {
		t.Errorf("stdout %q, want nothing", stdout.String())
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("%s exists after the interrupt (%v)", out, err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".fused.tmp-*")); len(left) > 0 {
		t.Errorf("staging left behind: %v", left)
	}
}
