package train

import (
	"bytes"
	"context"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/dgtune/dgtune/internal/sysmem"
	"github.com/dgtune/dgtune/lossplot"
	dg "github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/objective"
	"github.com/dgtune/dgtune/session"
)

func TestLengthStats(t *testing.T) {
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[99-i] = i + 1 // 100 … 1: the order does not matter
	}
	for _, tc := range []struct {
		in   []int
		want LengthStats
	}{
		{nil, LengthStats{}},
		{[]int{5}, LengthStats{5, 5, 5}},
		{[]int{3, 1, 2}, LengthStats{P50: 2, P99: 3, Max: 3}}, // ranks ⌈1.5⌉ = 2 and ⌈2.97⌉ = 3
		{hundred, LengthStats{P50: 50, P99: 99, Max: 100}},
	} {
		if got := lengthStats(tc.in); got != tc.want {
			t.Errorf("lengthStats(%v) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
}

// TestStepLengths: with random_block a long target's step is bounded by its last block:
// the earlier blocks in the encoder's context, one block on the canvas.
func TestStepLengths(t *testing.T) {
	blocks := objective.Objective{BlockLen: 4}
	for _, tc := range []struct {
		o                    objective.Objective
		prompt, target, n, l int
	}{
		{objective.Objective{}, 10, 8, 10, 8},
		{blocks, 10, 3, 10, 3},
		{blocks, 10, 4, 10, 4},
		{blocks, 10, 10, 18, 4}, // 3 blocks: 10 + 2·4 before the last
	} {
		if n, l := stepLengths(tc.o, tc.prompt, tc.target); n != tc.n || l != tc.l {
			t.Errorf("stepLengths(block %d, %d, %d) = %d, %d; want %d, %d", tc.o.BlockLen, tc.prompt, tc.target, n, l, tc.n, tc.l)
		}
	}
}

// TestMemoryAgainstMachine: the largest step's estimate against the machine's memory: at
// most the memory, a plain line; over it, a warning; over twice it, a refusal on the go
// engine; unknown memory, said so.
func TestMemoryAgainstMachine(t *testing.T) {
	dir := t.TempDir()
	model := writeTinyModel(t, filepath.Join(dir, "model"), dg.BitsNone, nil)
	writeFile(t, filepath.Join(dir, "data", "train.jsonl"), fiveExamples...)
	cfg := tinyConfig(model, filepath.Join(dir, "data"), filepath.Join(dir, "out"))
	s, err := session.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.LoadData(); err != nil {
		t.Fatal(err)
	}
	cs, err := checkedPairs(s, "train", s.Dataset.Train)
	if err != nil {
		t.Fatal(err)
	}
	// The largest example: "grass?" has the longest prompt and "green"/"white"/"black"
	// the longest completions (5 bytes); row 2 has both.
	var longest rowLengths
	for _, r := range cs.rows {
		if r.prompt+r.target > longest.prompt+longest.target {
			longest = r
		}
	}
	if longest.line != 2 {
		t.Fatalf("longest row %+v, want line 2", longest)
	}
	est, err := estimateStep(s, longest.prompt, longest.target)
	if err != nil {
		t.Fatal(err)
	}
	e := est.Total
	for _, tc := range []struct {
		name    string
		mem     sysmem.Memory
		warning string // "" for none
		refusal string
		line    string
	}{
		{"fits", sysmem.Memory{Bytes: e, Source: "RAM"}, "", "", "; this machine has " + dg.FormatBytes(e) + " (RAM)"},
		{"over", sysmem.Memory{Bytes: e * 2 / 3, Source: "cgroup limit"}, "memory: the largest step (train.jsonl:2, prompt", "", ""},
		{"over twice", sysmem.Memory{Bytes: e/2 - 1, Source: "RAM"}, "", "memory: the largest step (train.jsonl:2, prompt", ""},
		{"unknown", sysmem.Memory{}, "", "", "; this machine's memory is unknown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dc, err := buildCheck(s, []checkedSplit{cs}, tc.mem)
			if dc.Memory == nil || dc.Memory.EstimateBytes != e || dc.Memory.Example != "train.jsonl:2" {
				t.Fatalf("memory %+v, want %d B for train.jsonl:2", dc.Memory, e)
			}
			if tc.refusal == "" && err != nil || tc.refusal != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.refusal) || !strings.Contains(err.Error(), "more than twice this machine's")) {
				t.Errorf("refusal %v, want %q…", err, tc.refusal)
			}
			if tc.warning == "" && len(dc.Warnings) > 0 || tc.warning != "" && (len(dc.Warnings) != 1 || !strings.HasPrefix(dc.Warnings[0], tc.warning) ||
				!strings.Contains(dc.Warnings[0], "more than this machine's "+dg.FormatBytes(tc.mem.Bytes)+" (cgroup limit): expect swapping or an out-of-memory kill")) {
				t.Errorf("warnings %q, want %q…", dc.Warnings, tc.warning)
			}
			var b bytes.Buffer
			dc.WriteSummary(&b)
			if tc.line != "" && !strings.Contains(b.String(), tc.line+"\n") {
				t.Errorf("summary lacks %q:\n%s", tc.line, b.String())
			}
		})
	}
}

// TestWriteSummary pins the compact form train logs.
func TestWriteSummary(t *testing.T) {
	dc := &DataCheck{MaxPositions: 64, MaxPrompt: 30, MaxCanvas: 8,
		Splits: []SplitCheck{
			{Split: "train", File: "/d/train.jsonl", Rows: 5, Prompt: LengthStats{20, 25, 40}, Completion: LengthStats{4, 9, 9}, OverMaxPrompt: 1, OverMaxCanvas: 2, OverPositions: 1},
			{Split: "valid", File: "/d/valid.parquet", Rows: 2, Prompt: LengthStats{20, 21, 21}, Completion: LengthStats{4, 4, 4}},
		},
		Memory:   &MemoryCheck{Example: "train.jsonl:3", PromptTokens: 30, CanvasTokens: 8, EstimateBytes: 3 << 20, MedianBytes: 2 << 20, MachineBytes: 16 << 30, MachineSource: "RAM", Engine: "go"},
		Warnings: []string{"something"},
	}
	var b bytes.Buffer
	dc.WriteSummary(&b)
	want := `data: train.jsonl: 5 rows; prompt tokens p50 20, p99 25, max 40; completion tokens p50 4, p99 9, max 9; 1 prompts cut to max_prompt 30, 2 completions over max_canvas 8, 1 rows over the model's 64 positions
data: valid.parquet: 2 rows; prompt tokens p50 20, p99 21, max 21; completion tokens p50 4, p99 4, max 4
memory: the largest step (train.jsonl:3, prompt 30 + canvas 8 tokens) needs about 3.00 MiB (probe estimate for the go engine); this machine has 16.0 GiB (RAM)
warning: something
`
	if b.String() != want {
		t.Errorf("WriteSummary:\n%s\nwant:\n%s", b.String(), want)
	}
}

// TestRunPlotsMetrics: a finished run's plot is drawn from its metrics.jsonl — the series
// lossplot reads back are the events train wrote — and the result's best step is the val
// event with the lowest loss.
func TestRunPlotsMetrics(t *testing.T) {
	dir := t.TempDir()
	model := writeTinyModel(t, filepath.Join(dir, "model"), dg.BitsNone, nil)
	writeFile(t, filepath.Join(dir, "data", "train.jsonl"), fiveExamples...)
	writeFile(t, filepath.Join(dir, "data", "valid.jsonl"), fiveExamples...)
	cfg := tinyConfig(model, filepath.Join(dir, "data"), filepath.Join(dir, "out"))
	cfg.StepsPerEval = 3
	res, err := Run(context.Background(), cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Plot != filepath.Join(cfg.AdapterPath, lossplot.File) {
		t.Errorf("plot %q", res.Plot)
	}
	series, err := lossplot.Read(filepath.Join(cfg.AdapterPath, MetricsFile))
	if err != nil {
		t.Fatal(err)
	}
	var want lossplot.Series
	best := -1
	for _, ev := range readMetrics(t, cfg.AdapterPath) {
		switch ev.Event {
		case "train":
			want.Train = append(want.Train, lossplot.Point{Step: ev.Iteration, Value: *ev.TrainLoss})
			want.LearningRate = append(want.LearningRate, lossplot.Point{Step: ev.Iteration, Value: *ev.LR})
		case "val":
			want.Val = append(want.Val, lossplot.Point{Step: ev.Iteration, Value: *ev.ValLoss})
			if best < 0 || *ev.ValLoss < want.Val[best].Value {
				best = len(want.Val) - 1
			}
		}
	}
	if len(want.Train) != 12 || len(want.Val) != 5 || !reflect.DeepEqual(series, want) {
		t.Errorf("plotted series %+v\nwant the metrics' %+v", series, want)
	}
	if res.BestValStep == nil || *res.BestValStep != want.Val[best].Step || *res.BestValLoss != want.Val[best].Value {
		t.Errorf("best step %v (loss %v), want %d (%v)", res.BestValStep, *res.BestValLoss, want.Val[best].Step, want.Val[best].Value)
	}
}
