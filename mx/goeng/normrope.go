package goeng

import (
	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/internal/uninit"
)

// NormRoPE implements mx.NormRoPEr for float32 operands: the attention prologue
// RoPE(Transpose(RMSNorm(x, w), 0, 2, 1, 3)) of x [B, L, H, D] in one pass that reads each
// row of x once and writes its normed, rotated row straight to [B, H, L, D], where the
// composition writes the normed rows, their transpose and the rotation, three arrays.
// Every value is the composition's: each row is normed as RMSNorm norms it (rmsInv,
// rmsScaleRow) and rotated as RoPE rotates it (rotateHalf, the same tables). The VJP
// undoes the rotation and the transpose in one pass, then takes RMSNorm's VJP with the
// forward's row scales — the composition's cotangents to the bit. Other dtypes, and
// rotations over fewer than D features, take the composition (nil).
func (e *Engine) NormRoPE(hx, hw mx.Handle, eps float64, p mx.RoPEParams) mx.Handle {
	x, w := tt(hx), tt(hw)
	if p.Freqs == nil || p.Traditional || x.dt != mx.Float32 || w.dt != mx.Float32 || len(x.shape) != 4 || p.Dims != x.shape[3] {
		return nil
	}
	f := tt(p.Freqs)
	nb, nl, nh, d := x.shape[0], x.shape[1], x.shape[2], x.shape[3]
	half := d / 2
	inv := ropeInvFreq(p, f)
	scale := p.Scale
	if scale == 0 {
		scale = 1
	}
	rows := nb * nl * nh
	// outRow is where input row r = (b·L + l)·H + h lands in [B, H, L, D], and its position.
	outRow := func(r int) (int, int) {
		b, l, h := r/(nl*nh), r/nh%nl, r%nh
		return (b*nh+h)*nl + l, l
	}
	cos, sin := e.ropeTables(p.Offset, nl, scale, 1, inv)
	xv, wv := x.f32(), w.f32()
	out := uninit.Float32s(len(xv))
	scales := make([]float32, rows) // rmsInv of every input row, for the VJP
	parallelFor(rows, 2*d, func(lo, hi int) {
		normed := make([]float32, d)
		for r := lo; r < hi; r++ {
			row := xv[r*d : (r+1)*d]
			scales[r] = rmsInv(row, eps)
			rmsScaleRow(normed, row, wv, scales[r])
			o, l := outRow(r)
			rotateHalf(out[o*d:(o+1)*d], normed, cos[l*half:(l+1)*half], sin[l*half:(l+1)*half])
		}
	})
	shape := []int{nb, nh, nl, d}
	return record(fromF32(shape, mx.Float32, out), "norm_rope", []*tensor{x, w, f}, func(g *tensor) []*tensor {
		icos, isin := e.ropeTables(p.Offset, nl, scale, -1, inv)
		gv := g.f32()
		gn := uninit.Float32s(len(gv)) // the cotangent of RMSNorm's output, [B, L, H, D]
		parallelFor(rows, d, func(lo, hi int) {
			for r := lo; r < hi; r++ {
				o, l := outRow(r)
				rotateHalf(gn[r*d:(r+1)*d], gv[o*d:(o+1)*d], icos[l*half:(l+1)*half], isin[l*half:(l+1)*half])
			}
		})
		res := rmsNormVJP(x, w, scales)(fromF32(x.shape, mx.Float32, gn))
		return []*tensor{res[0], res[1], nil}
	})
}

var _ mx.NormRoPEr = (*Engine)(nil)
