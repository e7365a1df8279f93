package main

import (
	"image"
	"image/png"
	"os"
	"path/filepath"
	"testing"

	"github.com/dgtune/dgtune/lossplot"
)

const plotMetrics = `{"event":"val","iteration":0,"val_loss":4.5,"examples":3,"seconds":0.01}
{"event":"train","iteration":10,"train_loss":3.25,"learning_rate":0.001}
{"event":"val","iteration":10,"val_loss":2.5,"examples":3,"seconds":0.01}
{"event":"train","iteration":20,"train_loss":1.5,"learning_rate":0.001}
{"event":"val","iteration":20,"val_loss":2.75,"examples":3,"seconds":0.01}
`

func TestPlot(t *testing.T) {
	run := t.TempDir()
	if err := os.WriteFile(filepath.Join(run, "metrics.jsonl"), []byte(plotMetrics), 0o644); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(t.TempDir(), "curves.png")
	for _, tc := range []struct {
		args []string
		file string
	}{
		{nil, filepath.Join(run, lossplot.File)},
		{[]string{"--out", other}, other},
	} {
		out := mustProbe(t, append([]string{"plot", "--run", run}, tc.args...)...)
		if want := "wrote " + tc.file + ": 2 train and 3 val points; best val loss 2.5000 at step 10\n"; out != want {
			t.Errorf("stdout %q, want %q", out, want)
		}
		f, err := os.Open(tc.file)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", tc.file, err)
		}
		if img.Bounds() != image.Rect(0, 0, lossplot.Width, lossplot.Height) {
			t.Errorf("%s: bounds %v", tc.file, img.Bounds())
		}
	}
}

// TestPlotBadInput: one line naming the problem, exit 1, and no image written.
func TestPlotBadInput(t *testing.T) {
	dir := t.TempDir()
	torn := filepath.Join(dir, "torn")
	empty := filepath.Join(dir, "empty")
	for run, text := range map[string]string{torn: plotMetrics + `{"event":"train","iteration":30,"train_lo` + "\n", empty: ""} {
		if err := os.MkdirAll(run, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(run, "metrics.jsonl"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "probe: give --run DIR (a training run's adapter_path)"},
		{[]string{"--run", torn}, "probe: metrics: " + filepath.Join(torn, "metrics.jsonl") + ":6: invalid JSON: unexpected end of JSON input"},
		{[]string{"--run", empty}, "probe: " + filepath.Join(empty, "metrics.jsonl") + ": no train or val losses to plot (the run has not reported yet)"},
		{[]string{"--run", filepath.Join(dir, "none")}, "probe: --out: cannot write " + filepath.Join(dir, "none", "loss.png") + ": no such file or directory"},
		{[]string{"--run", torn, "--out", filepath.Join(file, "x.png")}, "probe: --out: cannot write " + filepath.Join(file, "x.png") + ": not a directory"},
	} {
		out, errs, code := probe(t, append([]string{"plot"}, tc.args...)...)
		if code != 1 || out != "" || errs != tc.want+"\n" {
			t.Errorf("plot %v: exit %d, stdout %q, stderr %q; want 1 and %q", tc.args, code, out, errs, tc.want)
		}
	}
	for _, run := range []string{torn, empty} {
		entries, _ := os.ReadDir(run)
		for _, e := range entries {
			if e.Name() != "metrics.jsonl" {
				t.Errorf("%s: %s written", run, e.Name())
			}
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "none")); !os.IsNotExist(err) {
		t.Errorf("a missing run directory was created")
	}
}
