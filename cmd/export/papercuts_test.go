package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dgtune/dgtune/lora"
	"github.com/dgtune/dgtune/mx/mxtest"
)

// TestFuseWarning: a fuse whose re-quantization loses the adapter (the 4-bit tiny model,
// whose routing flips) warns on stderr and names --dequantize; an exact fuse does not.
func TestFuseWarning(t *testing.T) {
	e := mxtest.Go(t)
	dir := t.TempDir()
	for _, tc := range []struct {
		bits  string
		extra []string
		warn  bool
	}{
		{"4", nil, true},
		{"4", []string{"--dequantize"}, false},
		{"0", nil, false},
	} {
		name := "bits" + tc.bits + strings.Join(tc.extra, "")
		model, ad := filepath.Join(dir, name, "model"), filepath.Join(dir, name, "adapter")
		writeModel(t, e, model, tc.bits, nil)
		writeAdapter(t, e, model, ad, lora.Config{Rank: 4, Scale: 2}, 7, 0.05)
		code, stdout, stderr := run(t, append([]string{"--adapter", ad, "--fuse", "--out", filepath.Join(dir, name, "fused")}, tc.extra...)...)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", name, code, stderr)
		}
		diff, scale := reportedDiff(t, stdout)
		warned := strings.Contains(stderr, "warning: the fused model's logits differ from base+adapter")
		t.Logf("%s: difference %g of max |logit| %g; warned %v", name, diff, scale, warned)
		if warned != tc.warn {
			t.Errorf("%s: warned %v, want %v (stderr %q)", name, warned, tc.warn, stderr)
		}
		if tc.warn && !strings.Contains(stderr, "--dequantize") {
			t.Errorf("%s: the warning does not point at --dequantize: %q", name, stderr)
		}
	}
	for _, c := range []struct {
		diff, scale, effect float64
		want                bool
	}{{1e-5, 20, 10, false}, {0.7, 20, 6.9, false}, {2.5, 20, 10, true}, {16.85, 17.45, 30, true}, {1, 20, 1.5, true}} {
		if got := fuseWarning(lora.FuseProbe{Diff: c.diff, MaxLogit: c.scale, Effect: c.effect}, true) != ""; got != c.want {
			t.Errorf("fuseWarning(%g, %g, %g) = %v, want %v", c.diff, c.scale, c.effect, got, c.want)
		}
	}
}

// TestAdapterFiles: --adapter takes one adapter file of a run (a numbered checkpoint,
// best_adapters.safetensors) as well as a directory; the export is the same.
func TestAdapterFiles(t *testing.T) {
	e := mxtest.Go(t)
	dir := t.TempDir()
	model, ad := filepath.Join(dir, "model"), filepath.Join(dir, "adapter")
	writeModel(t, e, model, "0", nil)
	writeAdapter(t, e, model, ad, lora.Config{Rank: 2, Scale: 2}, 3, 0.1)
	numbered := filepath.Join(ad, "0000100_adapters.safetensors")
	if err := os.WriteFile(numbered, readBytes(t, filepath.Join(ad, lora.AdaptersFile)), 0o644); err != nil {
		t.Fatal(err)
	}
	fromDir, fromFile := filepath.Join(dir, "from-dir"), filepath.Join(dir, "from-file")
	mustRun(t, "--adapter", ad, "--format", "peft", "--out", fromDir)
	mustRun(t, "--adapter", numbered, "--format", "peft", "--out", fromFile)
	for _, name := range []string{lora.PEFTWeightsFile, lora.ConfigFile} {
		if !bytes.Equal(readBytes(t, filepath.Join(fromDir, name)), readBytes(t, filepath.Join(fromFile, name))) {
			t.Errorf("%s exported from the file differs from the directory's", name)
		}
	}
	// Merge takes files too; fuse finds the base from the file's directory.
	mustRun(t, "--merge", numbered, ad, "--out", filepath.Join(dir, "merged"))
	out := mustRun(t, "--adapter", numbered, "--fuse", "--out", filepath.Join(dir, "fused"))
	if d, _ := reportedDiff(t, out); d > 1e-3 {
		t.Errorf("fuse from a numbered file: difference %g", d)
	}
}

// TestFuseBaseFromAdapterDir: an adapter that records its base relative to where it was
// made still finds it from another working directory, relative to the adapter's own
// directory; one recorded absolutely is found as is.
func TestFuseBaseFromAdapterDir(t *testing.T) {
	e := mxtest.Go(t)
	dir := t.TempDir()
	model, ad := filepath.Join(dir, "model"), filepath.Join(dir, "runs", "adapter")
	writeModel(t, e, model, "0", nil)
	writeAdapter(t, e, model, ad, lora.Config{Rank: 2, Scale: 2}, 4, 0.1)
	f, err := lora.LoadDir(e, ad)
	if err != nil {
		t.Fatal(err)
	}
	f.Config.BaseModel = filepath.Join("..", "..", "model") // relative to runs/adapter
	rel := filepath.Join(dir, "runs", "relative")
	if err := f.Write(rel); err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir()) // somewhere the relative path means nothing
	out := mustRun(t, "--adapter", rel, "--fuse", "--out", filepath.Join(dir, "fused"))
	if !strings.Contains(out, "into "+filepath.Join(rel, "..", "..", "model")) {
		t.Errorf("fuse did not use the base relative to the adapter: %q", out)
	}
	f.Config.BaseModel = filepath.Join(dir, "gone")
	missing := filepath.Join(dir, "runs", "missing")
	if err := f.Write(missing); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := run(t, "--adapter", missing, "--fuse", "--out", filepath.Join(dir, "x"))
	if code != 1 || !strings.Contains(stderr, "the adapter's base_model "+filepath.Join(dir, "gone")+" does not exist here; pass --model DIR") {
		t.Errorf("missing base: exit %d, %q", code, stderr)
	}
	// --model given while the recorded base is gone: fused, with a note that it could not
	// be checked.
	code, _, stderr = run(t, "--adapter", missing, "--model", model, "--fuse", "--out", filepath.Join(dir, "y"))
	if code != 0 || !strings.Contains(stderr, "is not on this machine; cannot check") {
		t.Errorf("recorded base gone, --model given: exit %d, %q", code, stderr)
	}
}

// TestExportHelp: export lists its own flags, not the training ones.
func TestExportHelp(t *testing.T) {
	code, stdout, _ := run(t, "--help")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"--adapter", "--fuse", "--force-base", "--model", "--seed", "--adapter-path"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("export --help lacks %s", want)
		}
	}
	for _, not := range []string{"--learning-rate", "--iters", "--lora-parameters.rank", "--eval.split", "--data", "--max-canvas"} {
		if strings.Contains(stdout, not) {
			t.Errorf("export --help lists the flag %s it does not use", not)
		}
	}
}
