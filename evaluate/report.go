package evaluate

import (
	"encoding/json"
	"fmt"
	"github.com/dgtune/dgtune/internal/atomicfile"
	"io"
	"sort"
	"strconv"

	"github.com/olekukonko/tablewriter"
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
	Model    string   `json:"model"`
	Adapter  string   `json:"adapter,omitempty"`
	Split    string   `json:"split"`
	Examples int      `json:"examples"`
	Rows     []Row    `json:"rows"`
	Base     *Metrics `json:"base"`
	Adapted  *Metrics `json:"adapter_metrics,omitempty"`
	Samples  []Sample `json:"samples,omitempty"`
}

// Sample pairs one example's generations.
type Sample struct {
	Index     int    `json:"index"`
	Prompt    string `json:"prompt"`
	Reference string `json:"reference"`
	Base      string `json:"base"`
	Adapter   string `json:"adapter,omitempty"`
}

// rows flattens metrics in a fixed order.
func rows(m *Metrics) []Row {
	var out []Row
	levels := make([]string, 0, len(m.Loss))
	for k := range m.Loss {
		levels = append(levels, k)
	}
	sort.Slice(levels, func(i, j int) bool {
		a, _ := strconv.ParseFloat(levels[i], 64)
		b, _ := strconv.ParseFloat(levels[j], 64)
		return a < b
	})
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

// WriteTable prints the rows as a table.
func WriteTable(w io.Writer, rs []Row) error {
	t := tablewriter.NewTable(w)
	if len(rs) > 0 && rs[0].Adapter != nil {
		t.Header("metric", "base", "adapter", "delta")
	} else {
		t.Header("metric", "base")
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
