package evaluate

import (
	"fmt"
	"io"
	"time"

	"github.com/schollz/progressbar/v3"
)

// progress shows how far one pass over the cases is: a bar with a rate and the time
// left on a terminal, else a plain line at every tenth of the work (as train prints a
// line every steps_per_report when stderr is not a terminal).
type progress struct {
	w           io.Writer
	bar         *progressbar.ProgressBar
	label, unit string
	total, done int
	every       int
	start       time.Time
}

func newProgress(w io.Writer, terminal bool, label, unit string, total int) *progress {
	p := &progress{w: w, label: label, unit: unit, total: total, every: max(1, total/10), start: time.Now()}
	if w != nil && terminal {
		p.bar = progressbar.NewOptions(total, progressbar.OptionSetWriter(w), progressbar.OptionSetDescription(label),
			progressbar.OptionShowCount(), progressbar.OptionShowIts(), progressbar.OptionSetItsString(unit),
			progressbar.OptionSetPredictTime(true), progressbar.OptionSetWidth(24),
			progressbar.OptionClearOnFinish(), progressbar.OptionThrottle(100*time.Millisecond))
	}
	return p
}

func (p *progress) add() {
	p.done++
	switch {
	case p.bar != nil:
		p.bar.Add(1)
	case p.w != nil && (p.done%p.every == 0 || p.done == p.total):
		el := time.Since(p.start).Seconds()
		rate := float64(p.done) / max(el, 1e-9)
		eta := time.Duration(float64(p.total-p.done) / max(rate, 1e-9) * float64(time.Second))
		fmt.Fprintf(p.w, "%s %d/%d  %.1f %s/s  eta %s\n", p.label, p.done, p.total, rate, p.unit, eta.Round(time.Second))
	}
}

func (p *progress) finish() {
	if p.bar != nil {
		p.bar.Finish()
	}
}
