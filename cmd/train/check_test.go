package main

import (
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/dgtune/dgtune/data/chat"
	"github.com/dgtune/dgtune/internal/sysmem"
	"github.com/dgtune/dgtune/lossplot"
	"github.com/dgtune/dgtune/tokenizer"
	"github.com/dgtune/dgtune/train"
)

// checkPNG decodes path as a PNG of the loss plot's size.
func checkPNG(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if img.Bounds() != image.Rect(0, 0, lossplot.Width, lossplot.Height) {
		t.Errorf("%s: %v, want %d×%d", path, img.Bounds(), lossplot.Width, lossplot.Height)
	}
}

// templateLen is the number of ids the chat template adds around a user prompt (the
// synthetic tokenizer encodes the prompt's text byte by byte).
func templateLen(t *testing.T, model string) int {
	t.Helper()
	tok, err := tokenizer.Load(filepath.Join(model, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	ids, err := chat.EncodePrompt(tok, []chat.Message{{Role: "user", Content: "abcd"}}, true)
	if err != nil {
		t.Fatal(err)
	}
	return len(ids) - 4
}

// withPositions rewrites the model's max_position_embeddings.
func withPositions(t *testing.T, model string, n int) {
	t.Helper()
	path := filepath.Join(model, "config.json")
	var doc map[string]any
	if err := json.Unmarshal([]byte(readFile(t, path)), &doc); err != nil {
		t.Fatal(err)
	}
	doc["text_config"].(map[string]any)["max_position_embeddings"] = n
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, string(b))
}

// assertNothingWritten fails if dir exists.
func assertNothingWritten(t *testing.T, dir string) {
	t.Helper()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		entries, _ := os.ReadDir(dir)
		t.Errorf("%s exists (%v): %v", dir, err, entries)
	}
}

// TestDryRun: --dry-run prints the check and stops with exit 0, writing nothing in
// adapter_path; its numbers are the rows' token counts. The fixture's prompts are "sky?",
// "grass?" and "snow?" (4, 6, 5 bytes) inside the chat template, its completions "blue",
// "green", "white" (4, 5, 5): nearest-rank p50 of three is the second, p99 the third.
func TestDryRun(t *testing.T) {
	f := newFixture(t)
	cfg := f.config(t, "")
	tl := templateLen(t, f.model)
	jsonOut := filepath.Join(f.dir, "check.json")
	code, stdout, stderr := runMain("--config", cfg, "--dry-run", "--json", jsonOut, "--max-prompt", strconv.Itoa(tl+5), "--max-canvas", "4")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if want := "dry run: the data fits; nothing trained and nothing written (adapter_path " + f.adapters + ")\n"; !strings.HasSuffix(stdout, want) {
		t.Errorf("stdout does not end with %q:\n%s", want, stdout)
	}
	for _, want := range []string{
		fmt.Sprintf("data check: max_prompt %d, max_canvas 4, the model's max_position_embeddings 262144", tl+5),
		"│ split │", "over max_canvas", "│ train │ train.jsonl │", "│ valid │ valid.jsonl │",
		"memory: the largest step (train.jsonl:", "the median example's step needs",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	assertNothingWritten(t, f.adapters)
	var got struct {
		DryRun    bool            `json:"dry_run"`
		DataCheck train.DataCheck `json:"data_check"`
	}
	if err := json.Unmarshal([]byte(readFile(t, jsonOut)), &got); err != nil {
		t.Fatal(err)
	}
	dc := got.DataCheck
	if !got.DryRun || len(dc.Splits) != 2 || dc.MaxPositions != 262144 || dc.MaxCanvas != 4 || dc.MaxPrompt != tl+5 {
		t.Fatalf("check %+v", got)
	}
	for _, sc := range dc.Splits {
		want := train.SplitCheck{Split: sc.Split, File: sc.File, Rows: 3,
			Prompt:        train.LengthStats{P50: tl + 5, P99: tl + 6, Max: tl + 6},
			Completion:    train.LengthStats{P50: 5, P99: 5, Max: 5},
			OverMaxPrompt: 1, OverMaxCanvas: 2}
		if sc != want {
			t.Errorf("split %+v\nwant  %+v", sc, want)
		}
	}
	if m := dc.Memory; m == nil || m.Engine != "go" || m.EstimateBytes <= 0 || m.CanvasTokens != 4 || m.PromptTokens != tl+5 {
		t.Errorf("memory %+v: want the go engine's estimate for prompt %d (cut to max_prompt) + canvas 4", m, tl+5)
	}

	// train: false only evaluates: nothing for a dry run to check.
	code, stdout, stderr = runMain("--config", cfg, "--train=false", "--test", "--dry-run")
	if code != 1 || stdout != "" || stderr != "train: --dry-run checks a training run's data; train: false only evaluates (nothing to check)\n" {
		t.Errorf("dry run with train: false: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}

	// A folder that already holds a run (or is locked) is what train would refuse; the dry
	// run says so and still checks.
	if code, _, stderr := runMain("--config", cfg, "--iters", "1"); code != 0 {
		t.Fatalf("train: exit %d: %s", code, stderr)
	}
	code, stdout, stderr = runMain("--config", cfg, "--dry-run")
	if code != 0 || !strings.Contains(stderr, "note: adapter_path "+f.adapters+" already holds a run (") || !strings.Contains(stderr, "(train would refuse)") || !strings.Contains(stdout, "dry run: the data fits") {
		t.Errorf("dry run over a run: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

// TestDataRefusals: what the model or the machine cannot hold is refused in one line
// before anything is written (and, for the canvas, before any row is tokenized).
func TestDataRefusals(t *testing.T) {
	f := newFixture(t)
	tl := templateLen(t, f.model)
	short := filepath.Join(f.dir, "short-positions")
	writeTinyModel(t, short, false)
	withPositions(t, short, tl+20)
	long := func(name string, promptLen int) string {
		dir := filepath.Join(f.dir, name)
		writeFile(t, filepath.Join(dir, "train.jsonl"), trainRows+`{"prompt": "`+strings.Repeat("a", promptLen)+`", "completion": "bc"}`+"\n")
		return dir
	}
	over := long("over", 30)
	huge := long("huge", 200_000)
	mem := sysmem.Detect()
	if mem.Bytes == 0 || mem.Bytes > 200<<30 {
		t.Skipf("machine memory %+v: the memory refusals below assume a known memory under 200 GiB", mem)
	}
	cases := []struct {
		name string
		args []string
		want string // a regexp of the whole line
	}{
		{"canvas beyond the positions", []string{"--max-canvas", "100000000"},
			regexp.QuoteMeta("train: max_canvas 100000000: the model holds 262144 positions (max_position_embeddings in " + filepath.Join(f.model, "config.json") + "), prompt and canvas together; lower max_canvas")},
		{"canvas equal to the positions", []string{"--model", short, "--max-canvas", strconv.Itoa(tl + 20)},
			regexp.QuoteMeta(fmt.Sprintf("train: max_canvas %d: the model holds %d positions (max_position_embeddings in %s), prompt and canvas together; lower max_canvas", tl+20, tl+20, filepath.Join(short, "config.json")))},
		{"eos_fill canvas beyond memory", []string{"--max-canvas", "100000", "--eos-fill"},
			`^train: max_canvas 100000 with eos_fill: every canvas is 100000 tokens, and one step on such a canvas alone needs about [0-9.]+ [GT]iB \(probe estimate\), more than twice this machine's [0-9.]+ GiB \((RAM|cgroup limit)\); lower max_canvas$`},
		// Row 4's prompt is the template + 30 bytes, its canvas "bc": 2 bytes.
		{"prompt beyond the positions", []string{"--model", short, "--data", over},
			regexp.QuoteMeta(fmt.Sprintf("train: data: train.jsonl:4: prompt %d + canvas 2 tokens exceed the model's %d positions (max_position_embeddings): set max_prompt (it keeps a prompt's last tokens) or shorten the row", tl+30, tl+20))},
		{"prompt beyond the positions under max_prompt", []string{"--model", short, "--data", over, "--max-prompt", strconv.Itoa(tl + 19)},
			regexp.QuoteMeta(fmt.Sprintf("train: data: train.jsonl:4: prompt %d + canvas 2 tokens exceed the model's %d positions (max_position_embeddings): lower max_prompt or max_canvas", tl+19, tl+20))},
		{"step beyond memory", []string{"--data", huge},
			`^train: memory: the largest step \(train\.jsonl:4, prompt ` + strconv.Itoa(tl+200_000) + ` \+ canvas 2 tokens\) needs about [0-9.]+ [GT]iB \(probe estimate\), more than twice this machine's [0-9.]+ GiB \((RAM|cgroup limit)\): it cannot fit; lower max_prompt or max_canvas, set grad_checkpoint: true, or drop the longest rows$`},
	}
	for _, tc := range cases {
		for _, dry := range []bool{false, true} {
			name := tc.name
			if dry {
				name += " (dry run)"
			}
			t.Run(name, func(t *testing.T) {
				out := filepath.Join(f.dir, "out-"+strings.ReplaceAll(name, " ", "-"))
				args := append([]string{"--config", f.config(t, ""), "--adapter-path", out}, tc.args...)
				if dry {
					args = append(args, "--dry-run")
				}
				code, stdout, stderr := runMain(args...)
				lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
				last := lines[len(lines)-1]
				if code != 1 || !regexp.MustCompile(tc.want).MatchString(last) {
					t.Errorf("exit %d, last stderr line\n%q\nwant %s", code, last, tc.want)
				}
				if !dry && stdout != "" {
					t.Errorf("stdout %q", stdout)
				}
				assertNothingWritten(t, out)
			})
		}
	}
}

// TestDominatingRow: one row whose step needs at least twice the median example's memory
// is a warning, in train's log and in the dry run's report, naming the row and the
// max_prompt that would cut only it.
func TestDominatingRow(t *testing.T) {
	f := newFixture(t)
	tl := templateLen(t, f.model)
	dir := filepath.Join(f.dir, "dominating")
	writeFile(t, filepath.Join(dir, "train.jsonl"), trainRows+`{"prompt": "`+strings.Repeat("a", 2000)+`", "completion": "bc"}`+"\n")
	want := regexp.MustCompile(`warning: train\.jsonl:4 \(prompt ` + strconv.Itoa(tl+2000) + ` \+ canvas 2 tokens\) needs about [0-9.]+ MiB a step, [0-9]+× the median example's [0-9.]+ MiB: this one row sets the run's memory; drop it, or set max_prompt \(` + strconv.Itoa(tl+6) + ` keeps every other train prompt whole\)\n`)
	code, stdout, stderr := runMain("--config", f.config(t, ""), "--data", dir, "--dry-run")
	if code != 0 || !want.MatchString(stdout) {
		t.Errorf("dry run: exit %d, stdout lacks %s:\n%s%s", code, want, stdout, stderr)
	}
	code, _, stderr = runMain("--config", f.config(t, ""), "--data", dir, "--iters", "1", "--steps-per-eval", "0")
	if code != 0 || !want.MatchString(stderr) {
		t.Errorf("train: exit %d, stderr lacks %s:\n%s", code, want, stderr)
	}
	// Short rows only: no warning.
	if _, _, stderr := runMain("--config", f.config(t, ""), "--adapter-path", filepath.Join(f.dir, "plain"), "--iters", "1"); strings.Contains(stderr, "warning:") {
		t.Errorf("warning on the plain fixture:\n%s", stderr)
	}
}

// TestOutputsCheckedFirst: a --json (or loss plot) path that cannot be written fails before
// any work, in one line, with nothing written; the lock is released on every error.
func TestOutputsCheckedFirst(t *testing.T) {
	f := newFixture(t)
	file := writeFile(t, filepath.Join(f.dir, "file"), "x")
	plotDir := filepath.Join(f.dir, "plot-is-a-dir")
	if err := os.MkdirAll(filepath.Join(plotDir, lossplot.File), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"json in a missing directory", []string{"--json", filepath.Join(f.dir, "none", "r.json")},
			"train: --json: cannot write " + filepath.Join(f.dir, "none", "r.json") + ": no such file or directory"},
		{"json under a file", []string{"--json", filepath.Join(file, "r.json")},
			"train: --json: cannot write " + filepath.Join(file, "r.json") + ": not a directory"},
		{"json is a directory", []string{"--json", f.dir}, "train: --json: " + f.dir + " is a directory"},
		{"dry run json", []string{"--dry-run", "--json", filepath.Join(f.dir, "none", "r.json")},
			"train: --json: cannot write " + filepath.Join(f.dir, "none", "r.json") + ": no such file or directory"},
		{"plot is a directory", []string{"--adapter-path", plotDir, "--iters", "100000"},
			"train: loss plot: " + filepath.Join(plotDir, lossplot.File) + " is a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runMain(append([]string{"--config", f.config(t, "")}, tc.args...)...)
			if code != 1 || stdout != "" || stderr != tc.want+"\n" {
				t.Errorf("exit %d, stdout %q, stderr %q; want 1 and %q", code, stdout, stderr, tc.want)
			}
			assertNothingWritten(t, f.adapters)
		})
	}
	if entries, _ := os.ReadDir(plotDir); len(entries) != 1 {
		t.Errorf("%s holds %v, want only %s", plotDir, entries, lossplot.File)
	}
	if os.Geteuid() != 0 {
		ro := filepath.Join(f.dir, "ro")
		if err := os.Mkdir(ro, 0o555); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(ro, "r.json")
		code, _, stderr := runMain("--config", f.config(t, ""), "--json", p)
		if code != 1 || stderr != "train: --json: cannot write "+p+": permission denied\n" {
			t.Errorf("read-only --json: exit %d, stderr %q", code, stderr)
		}
		assertNothingWritten(t, f.adapters)
	}
}

// A --json file in adapter_path itself is accepted before the run makes that folder (the
// distributed tests and users write the result next to the adapter); one under a file is
// refused before any work.
func TestJSONInNewAdapterPath(t *testing.T) {
	f := newFixture(t)
	out := filepath.Join(f.dir, "new-run")
	p := filepath.Join(out, "result.json")
	code, _, stderr := runMain("--config", f.config(t, ""), "--adapter-path", out, "--json", p)
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("no result: %v", err)
	}
	file := writeFile(t, filepath.Join(f.dir, "file"), "x")
	under := filepath.Join(file, "run")
	code, stdout, stderr := runMain("--config", f.config(t, ""), "--adapter-path", under, "--json", filepath.Join(under, "r.json"))
	want := "train: --json: cannot write " + filepath.Join(under, "r.json") + ": not a directory\n"
	if code != 1 || stdout != "" || stderr != want {
		t.Errorf("exit %d, stdout %q, stderr %q; want 1 and %q", code, stdout, stderr, want)
	}
}
