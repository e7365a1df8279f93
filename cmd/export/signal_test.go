package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dgtune/dgtune/internal/cli/clitest"
	"github.com/dgtune/dgtune/lora"
	dg "github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/mx/mxtest"
)

// command is this package's command, built once for the tests that run it as a child
// process.
var command = clitest.NewBinary("export")

// TestMain removes the shared build.
func TestMain(m *testing.M) {
	code := m.Run()
	command.Remove()
	os.Exit(code)
}

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
		// Four times the bench preset's 6 layers: the fuse takes 2.3–2.5 s here, so the signal
		// at 0.7 s lands inside it (at 6 layers it took 0.6–0.7 s on a quiet machine and
		// finished before the signal).
		c.TextConfig.NumHiddenLayers = 24
		c.TextConfig.LayerTypes = dg.DefaultLayerTypes(24)
	})
	writeAdapter(t, e, model, ad, lora.Config{Rank: 4, Scale: 2}, 7, 0.05)
	bin := command.Path(t)
	out := filepath.Join(dir, "fused")
	r := clitest.Interrupt(t, exec.Command(bin, "--adapter", ad, "--fuse", "--dequantize", "--out", out), syscall.SIGINT, clitest.After(700*time.Millisecond), 0)
	if r.Took > time.Second {
		t.Errorf("took %v to stop, want under a second", r.Took)
	}
	if r.Code != 130 {
		t.Fatalf("exit %d, want 130\n%s", r.Code, r.Stderr)
	}
	if got := strings.TrimSuffix(r.Stderr, "\n"); got != "export: interrupted by SIGINT; nothing written" {
		t.Errorf("stderr %q", got)
	}
	if r.Stdout != "" {
		t.Errorf("stdout %q, want nothing", r.Stdout)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("%s exists after the interrupt (%v)", out, err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".fused.tmp-*")); len(left) > 0 {
		t.Errorf("staging left behind: %v", left)
	}
}
