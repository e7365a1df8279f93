package train

import (
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/tw"

	"github.com/dgtune/dgtune/config"
	"github.com/dgtune/dgtune/data"
	"github.com/dgtune/dgtune/estimate"
	"github.com/dgtune/dgtune/internal/sysmem"
	dg "github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/objective"
	"github.com/dgtune/dgtune/session"
)

// The data check runs before the first step (and is all that train --dry-run does): token
// lengths per split, the rows that max_prompt and max_canvas cut, a refusal for what the
// model cannot hold, and the memory the longest example's step needs (probe estimate's
// model) next to the machine's.
//
// memoryRefuse: the estimate tracks the go engine's peak within 1.5× (TestEstimateTracksEngine;
// 20.4 GiB estimated for a measured 15.3 GiB at a 25,000-token prompt), so a step estimated
// at more than twice the machine's memory cannot fit, and train refuses it; between once and
// twice it warns. dominates: a row whose step needs at least this many times the median
// example's sets the run's memory alone, which the check says.
const (
	memoryRefuse = 2
	dominates    = 2
)

// LengthStats are a split's token counts per row: the largest and the 50th and 99th
// percentiles (nearest rank).
type LengthStats struct {
	P50 int `json:"p50"`
	P99 int `json:"p99"`
	Max int `json:"max"`
}

// SplitCheck is one split's part of the check. Prompt lengths are the chat template's ids
// (images expanded) before max_prompt keeps their last tokens; completion lengths are the
// completion's ids before max_canvas truncates them (and before eos_fill).
type SplitCheck struct {
	Split      string      `json:"split"`
	File       string      `json:"file"`
	Rows       int         `json:"rows"`
	Prompt     LengthStats `json:"prompt_tokens"`
	Completion LengthStats `json:"completion_tokens"`
	// OverMaxPrompt rows had their prompt cut to its last max_prompt tokens; OverMaxCanvas
	// rows their completion truncated to max_canvas (long_targets random_block: split into
	// canvas-sized blocks instead); OverPositions rows need more positions than the model's
	// max_position_embeddings (prompt + canvas), which train refuses.
	OverMaxPrompt int `json:"over_max_prompt"`
	OverMaxCanvas int `json:"over_max_canvas"`
	OverPositions int `json:"over_max_position_embeddings"`
}

// MemoryCheck is the estimated peak of the step of the train split's most demanding
// example (a batch runs its examples one after another, so its largest example sets its
// peak), from probe estimate's model of the go engine, next to this machine's memory.
type MemoryCheck struct {
	Example        string `json:"example"` // file:line
	PromptTokens   int    `json:"prompt_tokens"`
	CanvasTokens   int    `json:"canvas_tokens"`
	EstimateBytes  int64  `json:"estimate_bytes"`
	MedianBytes    int64  `json:"median_example_bytes"` // the step of the example of median length
	MachineBytes   int64  `json:"machine_bytes"`        // 0: unknown
	MachineSource  string `json:"machine_source,omitempty"`
	Engine         string `json:"engine"`
	GradCheckpoint bool   `json:"grad_checkpoint"`
}

// DataCheck is what train knows about its data before the first step.
type DataCheck struct {
	MaxPositions int          `json:"max_position_embeddings"`
	MaxPrompt    int          `json:"max_prompt"`
	MaxCanvas    int          `json:"max_canvas"`
	Splits       []SplitCheck `json:"splits"`
	Memory       *MemoryCheck `json:"memory,omitempty"`
	// MemoryNote says why there is no memory estimate, when there is none.
	MemoryNote string   `json:"memory_note,omitempty"`
	Warnings   []string `json:"warnings,omitempty"`
}

// rowLengths are one example's token counts: as encoded before any cut (raw) and as
// trained (the pair's).
type rowLengths struct {
	line                  int
	rawPrompt, rawComplet int
	prompt, target        int
}

// checkedSplit is a tokenized split with its rows' lengths, in the split's order.
type checkedSplit struct {
	name  string
	split *data.Split
	pairs []data.Pair
	rows  []rowLengths
}

// checkCapacity refuses, before any example is tokenized, settings no example can train
// under: a canvas as long as the model's positions, and (eos_fill makes every canvas
// max_canvas long) a canvas whose step alone needs more than memoryRefuse times this
// machine's memory. Tokenizing under such a max_canvas would allocate it for every row.
func checkCapacity(s *session.Session, mem sysmem.Memory) error {
	cfg, mc := s.Config, s.Model.Config
	if mpe := mc.TextConfig.MaxPositionEmbeddings; mpe > 0 && cfg.MaxCanvas >= mpe {
		return fmt.Errorf("max_canvas %d: the model holds %d positions (max_position_embeddings in %s), prompt and canvas together; lower max_canvas",
			cfg.MaxCanvas, mpe, filepath.Join(cfg.Model, "config.json"))
	}
	if !cfg.EOSFill || cfg.LongTargets == config.LongRandomBlock || mem.Bytes == 0 || cfg.FineTuneType == "full" || s.Engine.Name() != "go" {
		return nil
	}
	est, err := estimateStep(s, 0, cfg.MaxCanvas)
	if err != nil || est.Total <= memoryRefuse*mem.Bytes {
		return nil
	}
	return fmt.Errorf("max_canvas %d with eos_fill: every canvas is %d tokens, and one step on such a canvas alone needs about %s (probe estimate), more than twice this machine's %s (%s); lower max_canvas",
		cfg.MaxCanvas, cfg.MaxCanvas, dg.FormatBytes(est.Total), dg.FormatBytes(mem.Bytes), mem.Source)
}

// checkedPairs tokenizes split as Session.Pairs does, recording each row's lengths.
func checkedPairs(s *session.Session, name string, split *data.Split) (checkedSplit, error) {
	raw := map[int][2]int{}
	pairs, err := s.MeasuredPairs(split, func(index, prompt, completion int) {
		raw[index] = [2]int{prompt, completion}
	})
	if err != nil {
		return checkedSplit{}, err
	}
	lines := make(map[int]int, len(split.Examples))
	for _, ex := range split.Examples {
		lines[ex.Index] = ex.Line
	}
	cs := checkedSplit{name: name, split: split, pairs: pairs, rows: make([]rowLengths, len(pairs))}
	for i, p := range pairs {
		r := raw[p.Index]
		cs.rows[i] = rowLengths{line: lines[p.Index], rawPrompt: r[0], rawComplet: r[1], prompt: len(p.Prompt), target: len(p.Target)}
	}
	return cs, nil
}

// where names row r of split as the data errors do: file:line, or file: row N for parquet.
func (cs checkedSplit) where(r rowLengths) string {
	base := filepath.Base(cs.split.Path)
	if strings.HasSuffix(base, ".parquet") {
		return fmt.Sprintf("%s: row %d", base, r.line)
	}
	return fmt.Sprintf("%s:%d", base, r.line)
}

// stepLengths are the encoder (prompt) and decoder (canvas) lengths of one training step
// on an example: with long_targets random_block, an upper bound over its blocks — the
// earlier blocks join the encoder's context, the canvas is one block.
func stepLengths(o objective.Objective, prompt, target int) (n, l int) {
	if o.BlockLen > 0 && target > o.BlockLen {
		return prompt + (o.Blocks(target)-1)*o.BlockLen, o.BlockLen
	}
	return prompt, target
}

// estimateStep is probe estimate's peak for one training step of the session's run on an
// n-token prompt and an l-token canvas, as the session's engine runs it: the go engine's
// (weights mapped, Go's GC headroom), or on the mlx engine MLX's (weights in its memory
// in the compute dtype).
func estimateStep(s *session.Session, n, l int) (estimate.Estimate, error) {
	o := estimate.Options{
		LoRA: LoRAConfig(s.Config), Objective: s.Objective, PromptLen: n, CanvasLen: max(l, 1),
		GCPercent: gcPercent(), GradCheckpoint: s.Config.GradCheckpoint, MappedWeights: true,
	}
	if s.Engine.Name() == estimate.EngineMLX {
		dt, err := session.ComputeDType(s.Config.ComputeDType)
		if err != nil {
			return estimate.Estimate{}, err
		}
		o.Engine, o.DType = estimate.EngineMLX, dt
	}
	return estimate.Step(s.Model.Config, o)
}

// stepMemory is what one step's memory is checked against: the GPU's memory when the
// engine computes on one (MLX-CUDA, Metal), else the machine's (RAM or cgroup limit).
func stepMemory(s *session.Session) sysmem.Memory {
	if d, ok := mx.Device(s.Engine); ok && d.Kind == "gpu" && d.TotalMemory > 0 {
		name := "GPU"
		if d.Name != "" {
			name = d.Name
		}
		return sysmem.Memory{Bytes: d.TotalMemory, Source: name + " memory"}
	}
	return sysmem.Detect()
}

// gcPercent is GOGC as the runtime reads it: 100 unless set, 0 for off.
func gcPercent() int {
	v := os.Getenv("GOGC")
	if v == "off" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil && n >= 0 {
		return n
	}
	return 100
}

// buildCheck measures the splits and checks them against the model and the machine. It
// returns the check, and an error when train must not start: a row needs more positions
// than the model has, or the largest step more than memoryRefuse times the machine's
// memory (go engine).
func buildCheck(s *session.Session, splits []checkedSplit, mem sysmem.Memory) (*DataCheck, error) {
	cfg, mc := s.Config, s.Model.Config
	mpe := mc.TextConfig.MaxPositionEmbeddings
	dc := &DataCheck{MaxPositions: mpe, MaxPrompt: cfg.MaxPrompt, MaxCanvas: cfg.MaxCanvas}
	var refusal error
	for _, cs := range splits {
		sc := SplitCheck{Split: cs.name, File: cs.split.Path, Rows: len(cs.rows)}
		prompts, completions := make([]int, len(cs.rows)), make([]int, len(cs.rows))
		var over []rowLengths
		for i, r := range cs.rows {
			prompts[i], completions[i] = r.rawPrompt, r.rawComplet
			if cfg.MaxPrompt > 0 && r.rawPrompt > cfg.MaxPrompt {
				sc.OverMaxPrompt++
			}
			if r.rawComplet > cfg.MaxCanvas {
				sc.OverMaxCanvas++
			}
			if mpe > 0 && r.prompt+r.target > mpe {
				sc.OverPositions++
				over = append(over, r)
			}
		}
		sc.Prompt, sc.Completion = lengthStats(prompts), lengthStats(completions)
		dc.Splits = append(dc.Splits, sc)
		if len(over) > 0 && refusal == nil {
			r := over[0]
			more := ""
			if len(over) > 1 {
				more = fmt.Sprintf(" (and %d more rows of %s)", len(over)-1, filepath.Base(cs.split.Path))
			}
			fix := "set max_prompt (it keeps a prompt's last tokens) or shorten the row"
			if cfg.MaxPrompt > 0 {
				fix = "lower max_prompt or max_canvas"
			}
			refusal = fmt.Errorf("data: %s: prompt %d + canvas %d tokens exceed the model's %d positions (max_position_embeddings)%s: %s",
				cs.where(r), r.prompt, r.target, mpe, more, fix)
		}
	}
	if err := dc.checkMemory(s, splits, mem); err != nil && refusal == nil {
		refusal = err
	}
	return dc, refusal
}

// checkMemory estimates the train split's largest step (the examples on the Pareto front of
// encoder and canvas lengths: the estimate grows with both) and its median example's, warns
// when one example dominates or the largest exceeds the machine's memory, and refuses
// beyond memoryRefuse times it on the go engine.
func (dc *DataCheck) checkMemory(s *session.Session, splits []checkedSplit, mem sysmem.Memory) error {
	cfg := s.Config
	if cfg.FineTuneType == "full" {
		dc.MemoryNote = "no memory estimate for fine_tune_type full (probe estimate models LoRA steps)"
		return nil
	}
	i := slices.IndexFunc(splits, func(cs checkedSplit) bool { return cs.name == "train" })
	if i < 0 || len(splits[i].rows) == 0 {
		return nil
	}
	cs := splits[i]
	type cand struct {
		row  rowLengths
		n, l int
	}
	cands := make([]cand, len(cs.rows))
	for j, r := range cs.rows {
		n, l := stepLengths(s.Objective, r.prompt, r.target)
		cands[j] = cand{r, n, l}
	}
	// The front: by encoder length descending (ties: canvas descending, then file order),
	// each example whose canvas is longer than every one before it.
	byN := slices.Clone(cands)
	slices.SortStableFunc(byN, func(a, b cand) int {
		if a.n != b.n {
			return b.n - a.n
		}
		return b.l - a.l
	})
	var worst *cand
	var worstEst estimate.Estimate
	bestL := -1
	for j := range byN {
		c := &byN[j]
		if c.l <= bestL {
			continue
		}
		bestL = c.l
		est, err := estimateStep(s, c.n, c.l)
		if err != nil {
			dc.MemoryNote = "no memory estimate: " + err.Error()
			return nil
		}
		if worst == nil || est.Total > worstEst.Total {
			worst, worstEst = c, est
		}
	}
	// The example of median total length.
	byTotal := slices.Clone(cands)
	slices.SortStableFunc(byTotal, func(a, b cand) int { return (a.n + a.l) - (b.n + b.l) })
	med := byTotal[nearestRank(len(byTotal), 50)]
	medEst, err := estimateStep(s, med.n, med.l)
	if err != nil {
		dc.MemoryNote = "no memory estimate: " + err.Error()
		return nil
	}
	m := &MemoryCheck{
		Example: cs.where(worst.row), PromptTokens: worst.n, CanvasTokens: worst.l,
		EstimateBytes: worstEst.Total, MedianBytes: medEst.Total, MachineBytes: mem.Bytes, MachineSource: mem.Source,
		Engine: s.Engine.Name(), GradCheckpoint: cfg.GradCheckpoint,
	}
	dc.Memory = m
	if m.EstimateBytes >= dominates*m.MedianBytes {
		// The longest prompt among the other rows: a max_prompt that cuts only this one.
		others := 0
		for _, c := range cands {
			if c.row != worst.row {
				others = max(others, c.row.rawPrompt)
			}
		}
		dc.Warnings = append(dc.Warnings, fmt.Sprintf("%s (prompt %d + canvas %d tokens) needs about %s a step, %.0f× the median example's %s: this one row sets the run's memory; drop it, or set max_prompt (%d keeps every other train prompt whole)",
			m.Example, m.PromptTokens, m.CanvasTokens, dg.FormatBytes(m.EstimateBytes), float64(m.EstimateBytes)/float64(max(m.MedianBytes, 1)), dg.FormatBytes(m.MedianBytes), others))
	}
	if mem.Bytes == 0 || m.EstimateBytes <= mem.Bytes {
		return nil
	}
	fix := "lower max_prompt or max_canvas, set grad_checkpoint: true, or drop the longest rows"
	if cfg.GradCheckpoint {
		fix = "lower max_prompt or max_canvas, or drop the longest rows"
	}
	what := fmt.Sprintf("the largest step (%s, prompt %d + canvas %d tokens) needs about %s (probe estimate)", m.Example, m.PromptTokens, m.CanvasTokens, dg.FormatBytes(m.EstimateBytes))
	if m.EstimateBytes > memoryRefuse*mem.Bytes && m.Engine == "go" {
		return fmt.Errorf("memory: %s, more than twice this machine's %s (%s): it cannot fit; %s", what, dg.FormatBytes(mem.Bytes), mem.Source, fix)
	}
	engine := ""
	if m.Engine != "go" {
		engine = " (the " + m.Engine + " engine's estimate, checked on few cases; with grad_checkpoint it runs low)"
	}
	dc.Warnings = append(dc.Warnings, fmt.Sprintf("memory: %s, more than this machine's %s (%s)%s: expect swapping or an out-of-memory kill; %s",
		what, dg.FormatBytes(mem.Bytes), mem.Source, engine, fix))
	return nil
}

// nearestRank is the index of the p-th percentile of n sorted values (nearest rank).
func nearestRank(n int, p float64) int {
	return max(0, int(math.Ceil(p/100*float64(n)))-1)
}

func lengthStats(v []int) LengthStats {
	if len(v) == 0 {
		return LengthStats{}
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return LengthStats{P50: s[nearestRank(len(s), 50)], P99: s[nearestRank(len(s), 99)], Max: s[len(s)-1]}
}

func (l LengthStats) String() string {
	return fmt.Sprintf("p50 %d, p99 %d, max %d", l.P50, l.P99, l.Max)
}

// WriteSummary prints the compact form train logs before its first step: one line per
// split, one for memory, then the warnings.
func (dc *DataCheck) WriteSummary(w io.Writer) {
	for _, sc := range dc.Splits {
		line := fmt.Sprintf("data: %s: %d rows; prompt tokens %s; completion tokens %s", filepath.Base(sc.File), sc.Rows, sc.Prompt, sc.Completion)
		var cut []string
		if sc.OverMaxPrompt > 0 {
			cut = append(cut, fmt.Sprintf("%d prompts cut to max_prompt %d", sc.OverMaxPrompt, dc.MaxPrompt))
		}
		if sc.OverMaxCanvas > 0 {
			cut = append(cut, fmt.Sprintf("%d completions over max_canvas %d", sc.OverMaxCanvas, dc.MaxCanvas))
		}
		if sc.OverPositions > 0 {
			cut = append(cut, fmt.Sprintf("%d rows over the model's %d positions", sc.OverPositions, dc.MaxPositions))
		}
		if len(cut) > 0 {
			line += "; " + strings.Join(cut, ", ")
		}
		fmt.Fprintln(w, line)
	}
	if line := dc.memoryLine(); line != "" {
		fmt.Fprintln(w, line)
	}
	for _, warn := range dc.Warnings {
		fmt.Fprintln(w, "warning: "+warn)
	}
}

func (dc *DataCheck) memoryLine() string {
	m := dc.Memory
	if m == nil {
		if dc.MemoryNote != "" {
			return "memory: " + dc.MemoryNote
		}
		return ""
	}
	line := fmt.Sprintf("memory: the largest step (%s, prompt %d + canvas %d tokens) needs about %s (probe estimate for the go engine", m.Example, m.PromptTokens, m.CanvasTokens, dg.FormatBytes(m.EstimateBytes))
	if m.GradCheckpoint {
		line += ", grad_checkpoint"
	}
	line += ")"
	if m.MachineBytes > 0 {
		line += fmt.Sprintf("; this machine has %s (%s)", dg.FormatBytes(m.MachineBytes), m.MachineSource)
	} else {
		line += "; this machine's memory is unknown"
	}
	return line
}

// WriteReport prints the full form (train --dry-run): the settings that bound lengths, a
// table of the splits' token lengths and the rows that go over them, the memory line and
// the warnings.
func (dc *DataCheck) WriteReport(w io.Writer) error {
	mp := "no limit"
	if dc.MaxPrompt > 0 {
		mp = strconv.Itoa(dc.MaxPrompt)
	}
	fmt.Fprintf(w, "data check: max_prompt %s, max_canvas %d, the model's max_position_embeddings %d (tokens per row: prompt as the chat template renders it, completion before max_canvas)\n", mp, dc.MaxCanvas, dc.MaxPositions)
	// Headers as written (the keys keep their underscores); numbers right-aligned.
	t := tablewriter.NewTable(w, tablewriter.WithHeaderAutoFormat(tw.Off), tablewriter.WithRowAlignment(tw.AlignRight))
	t.Header("split", "file", "rows", "prompt p50", "p99", "max", "completion p50", "p99", "max", "over max_prompt", "over max_canvas", "over positions")
	for _, sc := range dc.Splits {
		if err := t.Append(sc.Split, filepath.Base(sc.File), sc.Rows, sc.Prompt.P50, sc.Prompt.P99, sc.Prompt.Max,
			sc.Completion.P50, sc.Completion.P99, sc.Completion.Max, sc.OverMaxPrompt, sc.OverMaxCanvas, sc.OverPositions); err != nil {
			return err
		}
	}
	if err := t.Render(); err != nil {
		return err
	}
	if line := dc.memoryLine(); line != "" {
		if m := dc.Memory; m != nil {
			line += fmt.Sprintf("; the median example's step needs %s", dg.FormatBytes(m.MedianBytes))
		}
		fmt.Fprintln(w, line)
	}
	for _, warn := range dc.Warnings {
		fmt.Fprintln(w, "warning: "+warn)
	}
	return nil
}
