package convert

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
)

// progress shows how much of the input has been converted: a byte bar with rate and
// time left on a terminal, else a plain line at every tenth of the input (as train and
// eval print when stderr is not a terminal).
type progress struct {
	mu          sync.Mutex
	w           io.Writer
	bar         *progressbar.ProgressBar
	total, done int64
	next        int64
	start       time.Time
}

func newProgress(w io.Writer, terminal bool, total int64) *progress {
	p := &progress{w: w, total: total, next: total / 10, start: time.Now()}
	if w != nil && terminal {
		p.bar = progressbar.NewOptions64(total, progressbar.OptionSetWriter(w), progressbar.OptionSetDescription("convert"),
			progressbar.OptionShowBytes(true), progressbar.OptionShowCount(), progressbar.OptionSetPredictTime(true),
			progressbar.OptionSetWidth(24), progressbar.OptionClearOnFinish(), progressbar.OptionThrottle(100*time.Millisecond))
	}
	return p
}

func (p *progress) add(n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done += n
	switch {
	case p.bar != nil:
		_ = p.bar.Add64(n)
	case p.w != nil && p.done >= p.next:
		for p.next <= p.done {
			p.next += max(p.total/10, 1)
		}
		el := time.Since(p.start).Seconds()
		rate := float64(p.done) / max(el, 1e-9)
		eta := time.Duration(float64(p.total-p.done) / max(rate, 1e-9) * float64(time.Second))
		fmt.Fprintf(p.w, "convert %.2f/%.2f GB (%d%%)  %.2f GB/s  eta %s\n", float64(p.done)/1e9, float64(p.total)/1e9,
			p.done*100/max(p.total, 1), rate/1e9, eta.Round(time.Second))
	}
}

func (p *progress) finish() {
	if p.bar != nil {
		_ = p.bar.Finish()
	}
}
