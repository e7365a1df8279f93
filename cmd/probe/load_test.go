package main

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/dgtune/dgtune/mx/safetensors"
)

// TestLoadJSON: probe load reads the whole float32 tiny checkpoint, so weight_bytes is
// the file's tensor bytes (nothing dropped, nothing cast), and a bad flag is refused.
func TestLoadJSON(t *testing.T) {
	dir := t.TempDir()
	mustProbe(t, "mkmodel", "--preset", "tiny", "--out", dir)
	f, err := safetensors.Open(filepath.Join(dir, safetensors.SingleFile))
	if err != nil {
		t.Fatal(err)
	}
	var want int64
	for _, n := range f.Names() {
		info, _ := f.Info(n)
		want += int64(info.Size())
	}
	f.Close()
	var r LoadResult
	out := mustProbe(t, "load", "--model", dir, "--backend", "go", "--json")
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("load output %q is not JSON: %v", out, err)
	}
	if r.Backend != "go" || r.ComputeDType != "float32" || r.WeightBytes != want || !(r.Seconds > 0) {
		t.Errorf("load = %+v; want backend go, float32, weight_bytes %d, seconds > 0", r, want)
	}
	if _, errs, code := probe(t, "load", "--model", dir, "--quantize-on-load", "3"); code != 1 || errs == "" {
		t.Errorf("load --quantize-on-load 3: exit %d, stderr %q; want a refusal", code, errs)
	}
}
