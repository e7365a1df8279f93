package train

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/dgtune/dgtune/internal/atomicfile"
	"github.com/dgtune/dgtune/internal/sysmem"
	"github.com/dgtune/dgtune/mx"
)

// TrainReport summarises the steps since the previous report.
type TrainReport struct {
	Iteration       int     `json:"iteration"`
	TrainLoss       float64 `json:"train_loss"`
	LearningRate    float64 `json:"learning_rate"`
	ItersPerSecond  float64 `json:"iterations_per_second"`
	TokensPerSecond float64 `json:"tokens_per_second"`
	TrainedTokens   int64   `json:"trained_tokens"`
	PeakMemory      int64   `json:"peak_memory_bytes"` // the process's peak resident set size (0 where unknown)
	ETASeconds      float64 `json:"eta_seconds"`
	// Engine is the engine allocator's own counters (the mlx engine: MLX's active, peak and
	// cache memory), nil for an engine that allocates on Go's heap.
	Engine *EngineMemory `json:"engine_memory,omitempty"`
}

// EngineMemory is mx.MemoryStats as reported.
type EngineMemory struct {
	Active int64 `json:"active_bytes"`
	Peak   int64 `json:"peak_bytes"`
	Cache  int64 `json:"cache_bytes"`
}

// memoryText is a report's memory: peak RSS, then the engine's counters when it has them.
func memoryText(r TrainReport) string {
	s := "peak " + humanBytes(r.PeakMemory)
	if r.PeakMemory == 0 {
		s = "peak RSS n/a"
	}
	if m := r.Engine; m != nil {
		s += fmt.Sprintf(" (engine peak %s, active %s, cache %s)", humanBytes(m.Peak), humanBytes(m.Active), humanBytes(m.Cache))
	}
	return s
}

// ValReport is one validation pass.
type ValReport struct {
	Iteration int     `json:"iteration"`
	ValLoss   float64 `json:"val_loss"`
	Examples  int     `json:"examples"`
	Seconds   float64 `json:"seconds"`
}

// meter times the steps of this process since the last report. The losses since the
// last report live in the state instead (runState.closeWindow), so that a report after a
// resume averages the same steps as an uninterrupted run.
type meter struct {
	steps  int
	tokens int64
	start  time.Time
}

func (m *meter) add(tokens int64) {
	m.steps++
	m.tokens += tokens
}

// report sends the mean loss of the window and this process's rates since the last
// report, opens a new window and returns the mean.
func (r *run) report(step int, pace *meter) float64 {
	el := time.Since(pace.start).Seconds()
	mean := r.state.closeWindow()
	ips := float64(pace.steps) / el
	rep := TrainReport{
		Iteration: step, TrainLoss: mean, LearningRate: r.state.LearningRate, ItersPerSecond: ips,
		TokensPerSecond: float64(pace.tokens) / el, TrainedTokens: r.state.TrainedTokens,
		PeakMemory: sysmem.PeakRSS(), ETASeconds: float64(r.total-step) / ips,
	}
	if m, ok := mx.Memory(r.s.Engine); ok {
		rep.Engine = &EngineMemory{Active: m.Active, Peak: m.Peak, Cache: m.Cache}
	}
	r.reporter.Train(rep)
	*pace = meter{start: time.Now()}
	return mean
}

// Reporter receives reports; reporters chain.
type Reporter interface {
	Train(TrainReport)
	Val(ValReport)
	Close()
}

// multiReporter fans out to several reporters.
type multiReporter []Reporter

func (m multiReporter) Train(r TrainReport) {
	for _, x := range m {
		x.Train(r)
	}
}
func (m multiReporter) Val(r ValReport) {
	for _, x := range m {
		x.Val(r)
	}
}
func (m multiReporter) Close() {
	for _, x := range m {
		x.Close()
	}
}

// jsonlReporter appends one JSON line per event to metrics.jsonl.
type jsonlReporter struct {
	f *os.File
}

func newJSONLReporter(path string) (*jsonlReporter, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	return &jsonlReporter{f: f}, nil
}

func (j *jsonlReporter) write(kind string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// A metrics line must never take the run down; say what could not be written.
		b, _ = json.Marshal(map[string]string{"error": err.Error()})
	}
	line := `{"event":"` + kind + `",` + string(b[1:])
	fmt.Fprintln(j.f, line)
	j.f.Sync()
}
func (j *jsonlReporter) Train(r TrainReport) { j.write("train", r) }

// Val writes a non-finite val loss as null: JSON has no NaN or Inf.
func (j *jsonlReporter) Val(r ValReport) {
	if math.IsNaN(r.ValLoss) || math.IsInf(r.ValLoss, 0) {
		j.write("val", struct {
			ValReport
			ValLoss *float64 `json:"val_loss"`
		}{ValReport: r})
		return
	}
	j.write("val", r)
}
func (j *jsonlReporter) Close() { j.f.Close() }

// truncateMetrics drops events after step, so a resumed run does not repeat lines.
func truncateMetrics(path string, step int) error {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	var keep []string
	for _, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		if line == "" {
			continue
		}
		var ev struct {
			Iteration int `json:"iteration"`
		}
		if json.Unmarshal([]byte(line), &ev) == nil && ev.Iteration <= step {
			keep = append(keep, line)
		}
	}
	out := strings.Join(keep, "\n")
	if out != "" {
		out += "\n"
	}
	return atomicfile.WriteFile(path, []byte(out))
}

// consoleReporter draws a progress bar on a terminal, or prints plain lines.
type consoleReporter struct {
	w     io.Writer
	bar   *progressbar.ProgressBar
	total int
	last  TrainReport
}

func newConsoleReporter(w io.Writer, tty bool, start, total int) *consoleReporter {
	c := &consoleReporter{w: w, total: total}
	if tty {
		c.bar = progressbar.NewOptions(total,
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetDescription("train"),
			progressbar.OptionShowCount(),
			progressbar.OptionShowIts(), // the README's it/s; the time left is progressbar's [elapsed:left]
			progressbar.OptionSetItsString("it"),
			progressbar.OptionSetWidth(24),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionClearOnFinish(),
		)
		c.bar.Set(start)
	}
	return c
}

func (c *consoleReporter) Train(r TrainReport) {
	c.last = r
	line := fmt.Sprintf("iter %d/%d  loss %.4f  lr %.3g  %.2f it/s  %.0f tok/s  %s  eta %s",
		r.Iteration, c.total, r.TrainLoss, r.LearningRate, r.ItersPerSecond, r.TokensPerSecond,
		memoryText(r), (time.Duration(r.ETASeconds) * time.Second).String())
	if c.bar != nil {
		c.bar.Describe(fmt.Sprintf("loss %.4f lr %.2g %.0f tok/s %s", r.TrainLoss, r.LearningRate, r.TokensPerSecond, memoryText(r)))
		c.bar.Set(r.Iteration)
		return
	}
	fmt.Fprintln(c.w, line)
}

func (c *consoleReporter) Val(r ValReport) {
	line := fmt.Sprintf("iter %d: val loss %.4f (%d examples, %.1fs)", r.Iteration, r.ValLoss, r.Examples, r.Seconds)
	if c.bar != nil {
		c.bar.Clear()
	}
	fmt.Fprintln(c.w, line)
}

func (c *consoleReporter) Close() {
	if c.bar != nil {
		c.bar.Finish()
		fmt.Fprintln(c.w)
	}
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return strconv.FormatFloat(float64(n)/(1<<30), 'f', 2, 64) + "GiB"
	case n >= 1<<20:
		return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + "MiB"
	}
	return strconv.FormatInt(n>>10, 10) + "KiB"
}
