package lossplot

import (
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"math"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/dgtune/dgtune/internal/atomicfile"
)

// File is the plot's name in a run's directory.
const File = "loss.png"

// Width and Height are the plot's size in pixels.
const (
	Width  = 960
	Height = 720
)

// ErrEmpty is returned for a series with neither train nor val losses.
var ErrEmpty = errors.New("no train or val losses to plot")

var (
	trainColor = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff} // matplotlib's first two colours
	valColor   = color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}
	lrColor    = color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}
)

// Render draws s into a w×h image: the losses over steps on top (a log axis when every
// loss is positive, as losses that fall by orders of magnitude are read), the best val
// loss marked, and the learning rate below on the same step axis.
func Render(s Series, title string, w, h int) (*image.RGBA, error) {
	if s.Empty() {
		return nil, ErrEmpty
	}
	if w < 100 || h < 100 {
		return nil, fmt.Errorf("plot size %d×%d: want at least 100×100 pixels", w, h)
	}
	loss, err := lossPlot(s, title)
	if err != nil {
		return nil, err
	}
	lr, err := lrPlot(s)
	if err != nil {
		return nil, err
	}
	// One step axis for both: the union of every point's steps.
	lo, hi := stepRange(s)
	for _, p := range []*plot.Plot{loss, lr} {
		p.X.Min, p.X.Max = lo, hi
	}
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	c := vgimg.NewWith(vgimg.UseImage(img))
	dc := draw.New(c)
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadTop: vg.Points(4), PadBottom: vg.Points(4), PadLeft: vg.Points(4), PadRight: vg.Points(12), PadY: vg.Points(8)}
	canvases := plot.Align([][]*plot.Plot{{loss}, {lr}}, tiles, dc)
	loss.Draw(canvases[0][0])
	lr.Draw(canvases[1][0])
	out, ok := c.Image().(*image.RGBA)
	if !ok {
		return nil, fmt.Errorf("plot: canvas image is %T, not *image.RGBA", c.Image())
	}
	return out, nil
}

func lossPlot(s Series, title string) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = "loss"
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	if len(s.Train) > 0 {
		l, err := plotter.NewLine(xys(s.Train))
		if err != nil {
			return nil, fmt.Errorf("plot train loss: %w", err)
		}
		l.Color = trainColor
		l.Width = vg.Points(1.5)
		p.Add(l)
		p.Legend.Add("train loss", l)
	}
	if len(s.Val) > 0 {
		l, pts, err := plotter.NewLinePoints(xys(s.Val))
		if err != nil {
			return nil, fmt.Errorf("plot val loss: %w", err)
		}
		l.Color, pts.Color = valColor, valColor
		l.Width = vg.Points(1.5)
		pts.Shape = draw.CircleGlyph{}
		p.Add(l, pts)
		p.Legend.Add("val loss", l, pts)
		best, _ := s.Best()
		mark, err := plotter.NewScatter(plotter.XYs{{X: float64(best.Step), Y: best.Value}})
		if err != nil {
			return nil, fmt.Errorf("plot best val loss: %w", err)
		}
		mark.Shape = draw.RingGlyph{}
		mark.Radius = vg.Points(7)
		mark.Color = color.Black
		p.Add(mark)
		p.Legend.Add(fmt.Sprintf("best val %.4g (step %d)", best.Value, best.Step), mark)
	}
	logAxis := allPositive(s.Train) && allPositive(s.Val)
	if p.Y.Min == p.Y.Max {
		if logAxis {
			p.Y.Min, p.Y.Max = p.Y.Min/2, p.Y.Max*2
		} else {
			p.Y.Min, p.Y.Max = p.Y.Min-1, p.Y.Max+1
		}
	}
	if logAxis {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = logTicks{}
	}
	return p, nil
}

func lrPlot(s Series) (*plot.Plot, error) {
	p := plot.New()
	p.X.Label.Text = "step"
	p.Y.Label.Text = "learning rate"
	p.Add(plotter.NewGrid())
	if len(s.LearningRate) > 0 {
		l, err := plotter.NewLine(xys(s.LearningRate))
		if err != nil {
			return nil, fmt.Errorf("plot learning rate: %w", err)
		}
		l.Color = lrColor
		l.Width = vg.Points(1.5)
		p.Add(l)
	}
	// A constant rate would make a zero-height axis: show it from 0.
	if p.Y.Min == p.Y.Max {
		p.Y.Min, p.Y.Max = min(0, p.Y.Min), max(p.Y.Max*1.25, p.Y.Min+1e-12)
	}
	return p, nil
}

// logTicks labels a log axis at 1, 2 and 5 times each power of ten (only the powers of
// ten beyond three decades), with minor ticks at the other integers times them: gonum's
// LogTicks labels only powers of ten, none at all on a range within one decade, and a
// loss curve often spans less than that. With fewer than two labels it falls back to
// gonum's evenly spaced ticks.
type logTicks struct{}

func (logTicks) Ticks(lo, hi float64) []plot.Tick {
	labelled := []float64{1, 2, 5}
	if hi/lo > 1000 {
		labelled = []float64{1}
	}
	var ticks []plot.Tick
	for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
		base := math.Pow(10, e)
		for m := 1.0; m < 10; m++ {
			v := m * base
			if v < lo*(1-1e-9) || v > hi*(1+1e-9) {
				continue
			}
			t := plot.Tick{Value: v}
			if slices.Contains(labelled, m) {
				t.Label = strconv.FormatFloat(v, 'g', 3, 64)
			}
			ticks = append(ticks, t)
		}
	}
	n := 0
	for _, t := range ticks {
		if t.Label != "" {
			n++
		}
	}
	if n < 2 {
		// A range between two marks (0.6 to 0.9): evenly spaced labels read better.
		return plot.DefaultTicks{}.Ticks(lo, hi)
	}
	return ticks
}

func xys(ps []Point) plotter.XYs {
	out := make(plotter.XYs, len(ps))
	for i, p := range ps {
		out[i] = plotter.XY{X: float64(p.Step), Y: p.Value}
	}
	return out
}

func allPositive(ps []Point) bool {
	for _, p := range ps {
		if !(p.Value > 0) {
			return false
		}
	}
	return true
}

func stepRange(s Series) (lo, hi float64) {
	first := true
	for _, ps := range [][]Point{s.Train, s.Val, s.LearningRate} {
		for _, p := range ps {
			x := float64(p.Step)
			if first {
				lo, hi, first = x, x, false
			}
			lo, hi = min(lo, x), max(hi, x)
		}
	}
	if hi == lo {
		hi = lo + 1
	}
	return lo, hi
}

// Encode renders s at Width×Height and writes it to w as PNG.
func Encode(w io.Writer, s Series, title string) error {
	img, err := Render(s, title, Width, Height)
	if err != nil {
		return err
	}
	return png.Encode(w, img)
}

// WriteFile renders s and writes it to path as PNG atomically (temporary file, sync,
// rename), so an interrupted write never leaves a torn image.
func WriteFile(path string, s Series, title string) error {
	img, err := Render(s, title, Width, Height)
	if err != nil {
		return err
	}
	if err := atomicfile.Write(path, func(w io.Writer) error { return png.Encode(w, img) }); err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	return nil
}
