package evaluate

import (
	"encoding/json"
	"fmt"
	"github.com/dgtune/dgtune/internal/atomicfile"
	"io"
	"math"
	"sort"
	"strconv"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/tw"
)

// Row is one metric across base, adapter and their difference.
type Row struct {
	Metric  string   `json:"metric"`
	Base    float64  `json:"base"`
	Adapter *float64 `json:"adapter,omitempty"`
	Delta   *float64 `json:"delta,omitempty"`
}

// Report is what eval prints and writes.
type Report struct {
	Model string `json:"model"`
	// Checkpoints and BestCheckpoint: eval --all-checkpoints (then Adapted is the best's).
	Checkpoints    []Checkpoint `json:"checkpoints,omitempty"`
	BestCheckpoint string       `json:"best_checkpoint,omitempty"`
	Adapter        string       `json:"adapter,omitempty"`
	Split          string       `json:"split"`
	Examples       int          `json:"examples"`
	Rows           []Row        `json:"rows"`
	Base           *Metrics     `json:"base"`
	Adapted        *Metrics     `json:"adapter_metrics,omitempty"`
	Samples        []Sample     `json:"samples,omitempty"`
}

// Sample pairs one example's generations.
type Sample struct {
	Index     int    `json:"index"`
	Prompt    string `json:"prompt"`
	Reference string `json:"reference"`
	Base      string `json:"base"`
	Adapter   string `json:"adapter,omitempty"`
}

// sortedLevels are the noise levels of a metric map ("0.25", "0.5", ...) in order.
func sortedLevels(m map[string]float64) []string {
	levels := make([]string, 0, len(m))
	for k := range m {
		levels = append(levels, k)
	}
	sort.Slice(levels, func(i, j int) bool {
		a, _ := strconv.ParseFloat(levels[i], 64)
		b, _ := strconv.ParseFloat(levels[j], 64)
		return a < b
	})
	return levels
}

// rows flattens metrics in a fixed order.
func rows(m *Metrics) []Row {
	var out []Row
	levels := sortedLevels(m.Loss)
	for _, k := range levels {
		out = append(out, Row{Metric: "loss @ t=" + k, Base: m.Loss[k]})
	}
	for _, k := range levels {
		out = append(out, Row{Metric: "accuracy @ t=" + k, Base: m.Accuracy[k]})
	}
	if len(m.TwoPassLoss) > 0 {
		for _, k := range levels {
			out = append(out, Row{Metric: "two-pass loss @ t=" + k, Base: m.TwoPassLoss[k]})
		}
		for _, k := range levels {
			out = append(out, Row{Metric: "two-pass accuracy @ t=" + k, Base: m.TwoPassAccuracy[k]})
		}
	}
	add := func(name string, v *float64) {
		if v != nil {
			out = append(out, Row{Metric: name, Base: *v})
		}
	}
	add("exact match", m.ExactMatch)
	add("token F1", m.TokenF1)
	add("mean denoising steps", m.MeanSteps)
	add("generated tokens/s", m.TokensPerS)
	return out
}

// Compare builds the rows of base alone or base against adapter.
func Compare(base, adapted *Metrics) []Row {
	out := rows(base)
	if adapted == nil {
		return out
	}
	ar := rows(adapted)
	for i := range out {
		a := ar[i].Base
		d := a - out[i].Base
		out[i].Adapter, out[i].Delta = &a, &d
	}
	return out
}

// WriteTable prints the rows as a table, under a first row with the number of examples
// scored.
func WriteTable(w io.Writer, rs []Row, examples int) error {
	t := tablewriter.NewTable(w)
	n := strconv.Itoa(examples)
	first := []any{"examples", n}
	if len(rs) > 0 && rs[0].Adapter != nil {
		t.Header("metric", "base", "adapter", "delta")
		first = append(first, n, "")
	} else {
		t.Header("metric", "base")
	}
	if err := t.Append(first...); err != nil {
		return err
	}
	for _, r := range rs {
		cells := []any{r.Metric, format(r.Base)}
		if r.Adapter != nil {
			cells = append(cells, format(*r.Adapter), fmt.Sprintf("%+.4f", *r.Delta))
		}
		if err := t.Append(cells...); err != nil {
			return err
		}
	}
	return t.Render()
}

// Checkpoint is one adapter file of a run, scored (eval --all-checkpoints).
type Checkpoint struct {
	File    string   `json:"file"`
	Step    int      `json:"step"` // from the NNNNNNN_ prefix; -1 for the final adapters.safetensors
	Metrics *Metrics `json:"metrics"`
}

// MeanLoss is the checkpoint's denoising loss averaged over the noise levels: what
// --all-checkpoints ranks by, as training keeps best_adapters.safetensors by val loss.
func MeanLoss(m *Metrics) float64 {
	var s float64
	for _, v := range m.Loss {
		s += v
	}
	return s / math.Max(float64(len(m.Loss)), 1)
}

// Best is the index of the checkpoint with the lowest mean loss (the earliest on a tie).
func Best(cs []Checkpoint) int {
	best := -1
	for i, c := range cs {
		if best < 0 || MeanLoss(c.Metrics) < MeanLoss(cs[best].Metrics) {
			best = i
		}
	}
	return best
}

// WriteCheckpointTable prints one row per checkpoint (the base first): loss at each noise
// level, their mean and, when generated, exact match.
func WriteCheckpointTable(w io.Writer, base *Metrics, cs []Checkpoint, examples int) error {
	levels := sortedLevels(base.Loss)
	header := []any{"checkpoint (" + strconv.Itoa(examples) + " examples)"}
	for _, k := range levels {
		header = append(header, "loss @ t="+k)
	}
	header = append(header, "mean loss")
	if base.ExactMatch != nil {
		header = append(header, "exact match")
	}
	// Headers as written: the auto-format would print "LOSS @ T = 0 . 25".
	t := tablewriter.NewTable(w, tablewriter.WithHeaderAutoFormat(tw.Off))
	t.Header(header...)
	row := func(name string, m *Metrics) error {
		cells := []any{name}
		for _, k := range levels {
			cells = append(cells, format(m.Loss[k]))
		}
		cells = append(cells, format(MeanLoss(m)))
		if base.ExactMatch != nil && m.ExactMatch != nil {
			cells = append(cells, format(*m.ExactMatch))
		}
		return t.Append(cells...)
	}
	if err := row("base", base); err != nil {
		return err
	}
	for _, c := range cs {
		if err := row(c.File, c.Metrics); err != nil {
			return err
		}
	}
	return t.Render()
}

func format(v float64) string { return strconv.FormatFloat(v, 'f', 4, 64) }

// WriteJSON writes the report atomically (a temporary file beside path, synced, then
// renamed), so a failure never leaves a truncated report.
func WriteJSON(path string, r *Report) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("--json: %w", err)
	}
	if err := atomicfile.WriteFile(path, append(b, '\n')); err != nil {
		return fmt.Errorf("--json: %w", err)
	}
	return nil
}
