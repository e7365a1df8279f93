package imageproc

import "math"

// cubic is the Keys cubic convolution kernel with a = −0.5 (PIL's and Catmull-Rom's
// choice), supported on (−2, 2):
//
//	|x| < 1:      (a+2)|x|³ − (a+3)|x|² + 1
//	1 ≤ |x| < 2:  a|x|³ − 5a|x|² + 8a|x| − 4a
func cubic(x float64) float64 {
	const a = -0.5
	x = math.Abs(x)
	switch {
	case x < 1:
		return ((a+2)*x-(a+3))*x*x + 1
	case x < 2:
		return (((x-5)*x+8)*x - 4) * a
	}
	return 0
}

// taps are the input range [lo, lo+len(w)) and normalised weights of one output sample.
type taps struct {
	lo int
	w  []float64
}

// coefficients maps in samples onto out samples. Output i is centred at input coordinate
// (i+0.5)·in/out. When shrinking, the kernel is stretched by the scale so that it
// averages every input sample it covers (antialiasing); weights are renormalised because
// the window is clipped at the borders.
func coefficients(in, out int) []taps {
	scale := float64(in) / float64(out)
	fs := max(scale, 1)
	support := 2 * fs
	res := make([]taps, out)
	for i := range res {
		center := (float64(i) + 0.5) * scale
		lo := max(int(center-support+0.5), 0)
		hi := min(int(center+support+0.5), in)
		w := make([]float64, hi-lo)
		sum := 0.0
		for j := range w {
			w[j] = cubic((float64(lo+j) - center + 0.5) / fs)
			sum += w[j]
		}
		if sum != 0 {
			for j := range w {
				w[j] /= sum
			}
		}
		res[i] = taps{lo: lo, w: w}
	}
	return res
}

// level rounds to the nearest 8-bit level, as the uint8 resampling path stores each pass.
func level(v float64) float64 { return min(max(math.Floor(v+0.5), 0), 255) }

// resize resamples to h×w, horizontally first, then vertically.
func (p *planes) resize(h, w int) *planes {
	cur := p
	if w != cur.w {
		cs := coefficients(cur.w, w)
		next := &planes{h: cur.h, w: w, v: make([]float64, 3*cur.h*w)}
		for r := range 3 * cur.h { // each row of each channel
			src := cur.v[r*cur.w : (r+1)*cur.w]
			dst := next.v[r*w : (r+1)*w]
			for x, t := range cs {
				s := 0.0
				for j, wt := range t.w {
					s += wt * src[t.lo+j]
				}
				dst[x] = level(s)
			}
		}
		cur = next
	}
	if h != cur.h {
		cs := coefficients(cur.h, h)
		next := &planes{h: h, w: cur.w, v: make([]float64, 3*h*cur.w)}
		for c := range 3 {
			src := cur.v[c*cur.h*cur.w : (c+1)*cur.h*cur.w]
			dst := next.v[c*h*cur.w : (c+1)*h*cur.w]
			for y, t := range cs {
				row := dst[y*cur.w : (y+1)*cur.w]
				for j, wt := range t.w {
					in := src[(t.lo+j)*cur.w : (t.lo+j+1)*cur.w]
					for x := range row {
						row[x] += wt * in[x]
					}
				}
				for x := range row {
					row[x] = level(row[x])
				}
			}
		}
		cur = next
	}
	return cur
}
