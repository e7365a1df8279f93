package goeng

// The vector-Jacobian products of every differentiable op, in one place.
//
// Glossary. The root is the scalar output y of the function given to ValueAndGrad.
// The adjoint (cotangent) of a tensor t is g_t = ∂y/∂t, with t's shape. The VJP of an
// op out = f(x1, ..., xn) maps g_out to (g_out · ∂out/∂x1, ..., g_out · ∂out/∂xn); the
// backward walk sums contributions when a tensor feeds several ops. StopGradient is an
// identity that records nothing, so the walk never crosses it; ops whose outputs are
// integers (argmax, argsort, comparisons, random draws) record nothing either.
// Broadcast inputs receive the cotangent summed over the broadcast axes (unbroadcast).
//
// Every VJP here is computed with the untraced kernels, so the backward pass builds no
// graph of its own.

import (
	"math"
	"slices"

	"github.com/dgtune/dgtune/mx/internal/dims"

	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/internal/uninit"
)

func ksub(a, b *tensor) *tensor { return binaryKernel(mx.OpSubtract, a, b) }

// kmul and kadd are a·b and a+b: the broadcasting kernel, which runs two tensors of one
// shape as a single contiguous run through the AVX2 kernels (the cotangent products and
// sums of the backward walk).
func kmul(a, b *tensor) *tensor { return binaryKernel(mx.OpMultiply, a, b) }
func kadd(a, b *tensor) *tensor { return binaryKernel(mx.OpAdd, a, b) }
func kdiv(a, b *tensor) *tensor { return binaryKernel(mx.OpDivide, a, b) }
func kneg(a *tensor) *tensor    { return unaryKernel(mx.OpNegative, a) }
func kscale(a *tensor, s float32) *tensor {
	in := a.f32()
	out := uninit.Float32s(len(in))
	parallelFor(len(in), 1, func(lo, hi int) {
		done := vecVS(mx.OpMultiply, out[lo:hi], in[lo:hi], s)
		for i := lo + done; i < hi; i++ {
			out[i] = in[i] * s
		}
	})
	return fromF32(a.shape, mx.Float32, out)
}

// unbroadcast sums g over the axes along which an input of shape was broadcast.
func unbroadcast(g *tensor, shape []int) *tensor {
	if slices.Equal(g.shape, shape) {
		return g
	}
	off := len(g.shape) - len(shape)
	var axes []int
	for i := range g.shape {
		if i < off || (shape[i-off] == 1 && g.shape[i] != 1) {
			axes = append(axes, i)
		}
	}
	r := g
	if len(axes) > 0 {
		r = reduceKernel(mx.ReduceSum, g, axes, true)
	}
	return reshapeKernel(r, shape)
}

// d exp(x) = exp(x); d log x = 1/x; d √x = 1/(2√x); d x^-½ = -½ x^-3/2;
// d tanh = 1 - tanh²; d σ = σ(1-σ); d |x| = sign x; d x² = 2x; d sin = cos; d cos = -sin;
// d erf = 2/√π e^{-x²}; d log1p = 1/(1+x); d 1/x = -1/x²; d GELU-tanh: geluTanhGrad.
func unaryVJP(op mx.UnaryOp, x, out *tensor) func(g *tensor) []*tensor {
	one := func(f func(g *tensor) *tensor) func(g *tensor) []*tensor {
		return func(g *tensor) []*tensor { return []*tensor{f(g)} }
	}
	pointwise := func(df func(x, y float32) float32) func(g *tensor) []*tensor {
		return one(func(g *tensor) *tensor {
			xv, yv, gv := x.f32(), out.f32(), g.f32()
			res := uninit.Float32s(len(gv))
			parallelFor(len(gv), 8, func(lo, hi int) {
				for i := lo; i < hi; i++ {
					res[i] = gv[i] * df(xv[i], yv[i])
				}
			})
			return fromF32(x.shape, mx.Float32, res)
		})
	}
	switch op {
	case mx.OpNegative:
		return one(kneg)
	case mx.OpExp:
		return pointwise(func(_, y float32) float32 { return y })
	case mx.OpLog:
		return pointwise(func(x, _ float32) float32 { return 1 / x })
	case mx.OpSqrt:
		return pointwise(func(_, y float32) float32 { return 0.5 / y })
	case mx.OpRsqrt:
		return pointwise(func(_, y float32) float32 { return -0.5 * y * y * y })
	case mx.OpTanh:
		// g·(1 − y²), each step rounded in float32, with the AVX2 kernels where built.
		return one(func(g *tensor) *tensor {
			yv, gv := out.f32(), g.f32()
			res := uninit.Float32s(len(gv))
			parallelRows(len(gv), func(lo, hi int) {
				r, y, gr := res[lo:hi], yv[lo:hi], gv[lo:hi]
				n := vecVV(mx.OpMultiply, r, y, y)
				vecSV(mx.OpSubtract, r[:n], 1, r)
				vecVV(mx.OpMultiply, r[:n], gr, r)
				for i := n; i < len(r); i++ {
					r[i] = gr[i] * (1 - y[i]*y[i])
				}
			})
			return fromF32(x.shape, mx.Float32, res)
		})
	case mx.OpSigmoid:
		return pointwise(func(_, y float32) float32 { return y * (1 - y) })
	case mx.OpAbs:
		return pointwise(func(x, _ float32) float32 {
			switch {
			case x > 0:
				return 1
			case x < 0:
				return -1
			}
			return 0
		})
	case mx.OpSquare:
		return pointwise(func(x, _ float32) float32 { return 2 * x })
	case mx.OpSin:
		return pointwise(func(x, _ float32) float32 { return float32(math.Cos(float64(x))) })
	case mx.OpCos:
		return pointwise(func(x, _ float32) float32 { return -float32(math.Sin(float64(x))) })
	case mx.OpErf:
		return pointwise(func(x, _ float32) float32 { return float32(2 / math.Sqrt(math.Pi) * math.Exp(-float64(x*x))) })
	case mx.OpLog1p:
		return pointwise(func(x, _ float32) float32 { return 1 / (1 + x) })
	case mx.OpReciprocal:
		return pointwise(func(_, y float32) float32 { return -y * y })
	case mx.OpFloor, mx.OpSign:
		return func(*tensor) []*tensor { return []*tensor{nil} } // zero almost everywhere
	case mx.OpGELUTanh:
		// Reads only x (recomputing tanh), so the forward keeps no temporaries.
		return one(func(g *tensor) *tensor {
			xv, gv := x.f32(), g.f32()
			res := uninit.Float32s(len(gv))
			parallelRows(len(gv), func(lo, hi int) { geluGradRows(res[lo:hi], xv[lo:hi], gv[lo:hi]) })
			return fromF32(x.shape, mx.Float32, res)
		})
	}
	return nil
}

// d(a±b) = g, ±g; d(ab) = gb, ga; d(a/b) = g/b, -g·a/b²; max/min route g to the
// chosen side (ties to a); d aᵇ = g·b·a^(b-1), g·aᵇ·ln a; d rem(a,b) = g, -g·⌊a/b⌋.
// Each side is computed only when its input is traced (a constant factor such as the
// scalar of x·c gets nothing, which the backward walk would drop anyway).
func binaryVJP(op mx.BinaryOp, a, b, out *tensor) func(g *tensor) []*tensor {
	both := func(ga, gb func() *tensor) []*tensor {
		var ra, rb *tensor
		if a.node != nil {
			ra = unbroadcast(ga(), a.shape)
		}
		if b.node != nil {
			rb = unbroadcast(gb(), b.shape)
		}
		return []*tensor{ra, rb}
	}
	switch op {
	case mx.OpAdd:
		return func(g *tensor) []*tensor {
			return both(func() *tensor { return g }, func() *tensor { return g })
		}
	case mx.OpSubtract:
		return func(g *tensor) []*tensor {
			return both(func() *tensor { return g }, func() *tensor { return kneg(g) })
		}
	case mx.OpMultiply:
		return func(g *tensor) []*tensor {
			return both(func() *tensor { return kmul(g, b) }, func() *tensor { return kmul(g, a) })
		}
	case mx.OpDivide:
		return func(g *tensor) []*tensor {
			return both(func() *tensor { return kdiv(g, b) }, func() *tensor { return kneg(kdiv(kmul(g, out), b)) })
		}
	case mx.OpMaximum, mx.OpMinimum:
		return func(g *tensor) []*tensor {
			cmp := mx.OpGreaterEqual
			if op == mx.OpMinimum {
				cmp = mx.OpLessEqual
			}
			mask := binaryKernel(cmp, a, b)
			zero := fromF32(nil, mx.Float32, []float32{0})
			return both(func() *tensor { return whereKernel(mask, g, zero) }, func() *tensor { return whereKernel(mask, zero, g) })
		}
	case mx.OpPower:
		return func(g *tensor) []*tensor {
			return both(func() *tensor {
				one := fromF32(nil, mx.Float32, []float32{1})
				return kmul(g, kmul(b, binaryKernel(mx.OpPower, a, ksub(b, one))))
			}, func() *tensor {
				return kmul(g, kmul(out, unaryKernel(mx.OpLog, a)))
			})
		}
	case mx.OpRemainder:
		return func(g *tensor) []*tensor {
			return both(func() *tensor { return g }, func() *tensor {
				return kneg(kmul(g, binaryKernel(mx.OpFloorDivide, a, b)))
			})
		}
	}
	return nil
}

// Where routes g to a where cond holds and to b elsewhere (to traced inputs only).
func whereVJP(c, a, b *tensor) func(g *tensor) []*tensor {
	return func(g *tensor) []*tensor {
		zero := fromF32(nil, mx.Float32, []float32{0})
		res := []*tensor{nil, nil, nil}
		if a.node != nil {
			res[1] = unbroadcast(whereKernel(c, g, zero), a.shape)
		}
		if b.node != nil {
			res[2] = unbroadcast(whereKernel(c, zero, g), b.shape)
		}
		return res
	}
}

// A cast between float types passes g through, cast back to the input's dtype.
func asTypeVJP(x *tensor) func(g *tensor) []*tensor {
	return func(g *tensor) []*tensor { return []*tensor{castTensor(g, x.dt)} }
}

func reshapeVJP(x *tensor) func(g *tensor) []*tensor {
	return func(g *tensor) []*tensor { return []*tensor{reshapeKernel(g, x.shape)} }
}

// Transpose by p is undone by the inverse permutation.
func transposeVJP(perm []int) func(g *tensor) []*tensor {
	inv := make([]int, len(perm))
	for i, p := range perm {
		inv[p] = i
	}
	return func(g *tensor) []*tensor { return []*tensor{transposeKernel(g, inv)} }
}

func broadcastVJP(x *tensor) func(g *tensor) []*tensor {
	return func(g *tensor) []*tensor { return []*tensor{unbroadcast(g, x.shape)} }
}

// A slice's adjoint is g written into zeros of the input's shape.
func sliceVJP(x *tensor, start, stop, step []int) func(g *tensor) []*tensor {
	return func(g *tensor) []*tensor {
		// g scattered into zeros, cleared in parallel: the runtime would clear a recycled
		// block on this goroutine alone.
		out := newTensor(x.shape, mx.Float32, zerosF32(x.size()))
		scatterSlice(out, castTensor(g, mx.Float32), start, stop, step)
		return []*tensor{out}
	}
}

// SliceUpdate: x receives g with the updated region zeroed; update receives that region.
func sliceUpdateVJP(upd *tensor, start, stop, step []int) func(g *tensor) []*tensor {
	return func(g *tensor) []*tensor {
		g = castTensor(g, mx.Float32)
		zeros := fromF32(upd.shape, mx.Float32, make([]float32, upd.size()))
		return []*tensor{sliceUpdateKernel(g, zeros, start, stop, step), sliceKernel(g, start, stop, step)}
	}
}

// Concatenate's adjoint splits g back into the pieces.
func concatVJP(xs []*tensor, axis int) func(g *tensor) []*tensor {
	return func(g *tensor) []*tensor {
		out := make([]*tensor, len(xs))
		pos := 0
		for i, x := range xs {
			start := make([]int, len(g.shape))
			stop := slices.Clone(g.shape)
			step := make([]int, len(g.shape))
			for j := range step {
				step[j] = 1
			}
			start[axis], stop[axis] = pos, pos+x.shape[axis]
			out[i] = sliceKernel(g, start, stop, step)
			pos += x.shape[axis]
		}
		return out
	}
}

// sum: g broadcast back; max/min: g shared among the elements equal to the result;
// prod: g·out/x; logsumexp: g·exp(x - out) = g·softmax(x).
func reduceVJP(op mx.ReduceOp, x, out *tensor, axes []int) func(g *tensor) []*tensor {
	keptShape := dims.Reduced(x.shape, axes, true)
	back := func(t *tensor) *tensor { return broadcastKernel(reshapeKernel(t, keptShape), x.shape) }
	switch op {
	case mx.ReduceSum:
		return func(g *tensor) []*tensor { return []*tensor{back(g)} }
	case mx.ReduceMax, mx.ReduceMin:
		return func(g *tensor) []*tensor {
			mask := castTensor(binaryKernel(mx.OpEqual, x, reshapeKernel(out, keptShape)), mx.Float32)
			count := reduceKernel(mx.ReduceSum, mask, axes, true)
			return []*tensor{kmul(mask, kdiv(reshapeKernel(g, keptShape), count))}
		}
	case mx.ReduceProd:
		return func(g *tensor) []*tensor { return []*tensor{kdiv(kmul(back(g), back(out)), x)} }
	case mx.ReduceLogSumExp:
		return func(g *tensor) []*tensor {
			if d := lseRowGrad(x, out, g, axes); d != nil {
				return []*tensor{d}
			}
			p := unaryKernel(mx.OpExp, ksub(x, reshapeKernel(out, keptShape)))
			return []*tensor{kmul(p, reshapeKernel(g, keptShape))}
		}
	}
	return nil
}

// lseRowGrad is logsumexp's VJP exp(x − out)·g in one parallel pass over rows, for
// float32 operands reduced over the last axis (the loss over the vocabulary): the same
// float32 subtraction, exponential and product as the composition below it, without
// its three vocabulary-sized temporaries. It returns nil for any other case.
func lseRowGrad(x, out, g *tensor, axes []int) *tensor {
	nd := len(x.shape)
	if nd == 0 || len(axes) != 1 || (axes[0] != nd-1 && axes[0] != -1) || x.dt != mx.Float32 ||
		out.dt != mx.Float32 || g.dt != mx.Float32 {
		return nil
	}
	xv, ok := x.raw().([]float32)
	if !ok {
		return nil
	}
	d := x.shape[nd-1]
	rows := dims.Numel(x.shape[:nd-1])
	ov, gv := out.f32(), g.f32()
	if d == 0 || len(ov) != rows || len(gv) != rows {
		return nil
	}
	res := uninit.Float32s(len(xv))
	parallelFor(rows, 8*d, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			o, gr := ov[r], gv[r]
			src, dst := xv[r*d:(r+1)*d], res[r*d:(r+1)*d]
			expInto(dst, src, o) // as the forward takes its exponentials
			for i := range dst {
				dst[i] *= gr
			}
		}
	})
	return fromF32(x.shape, mx.Float32, res)
}

// d softmax: s ⊙ (g − Σ g⊙s).
func softmaxVJP(out *tensor, axis int) func(g *tensor) []*tensor {
	return func(g *tensor) []*tensor {
		gs := kmul(g, out)
		return []*tensor{ksub(gs, kmul(out, reduceKernel(mx.ReduceSum, gs, []int{axis}, true)))}
	}
}

// The adjoint of a cumulative sum is the cumulative sum of g in the other direction.
func cumsumVJP(axis int, reverse, inclusive bool) func(g *tensor) []*tensor {
	return func(g *tensor) []*tensor { return []*tensor{scanKernel(g, axis, !reverse, inclusive, false)} }
}

// C = A·B: dA = g·Bᵀ, dB = Aᵀ·g (summed over broadcast batch axes). The transposes are
// read in place by sgemm; a B shared by every batch (a weight) gets its sum over the
// batch inside one product. An input outside the traced graph gets no cotangent, since
// the backward walk would drop it.
func matmulVJP(a, b *tensor) func(g *tensor) []*tensor {
	return func(g *tensor) []*tensor {
		var ga, gb *tensor
		if a.node != nil {
			ga = unbroadcast(matmulOp(g, b, false, true), a.shape)
		}
		if b.node != nil {
			if dims.Numel(b.shape[:len(b.shape)-2]) == 1 {
				gb = reshapeKernel(matmulWeightGrad(a, g), b.shape)
			} else {
				gb = unbroadcast(matmulOp(a, g, true, false), b.shape)
			}
		}
		return []*tensor{ga, gb}
	}
}

// zerosF32 is make([]float32, n), cleared on every core for a large n.
func zerosF32(n int) []float32 {
	v := uninit.Float32s(n)
	parallelFor(n, 1, func(lo, hi int) { clear(v[lo:hi]) })
	return v
}

// Gathers scatter-add g back into the source positions.
func takeVJP(x, idx *tensor, axis int) func(g *tensor) []*tensor {
	return func(g *tensor) []*tensor {
		pre := dims.Numel(x.shape[:axis])
		d := x.shape[axis]
		post := dims.Numel(x.shape[axis+1:])
		ids := idx.i64()
		ni := len(ids)
		gv := g.f32()
		res := uninit.Float32s(x.size()) // every row is written below (rows never taken cleared)
		pos := make([]int, ni)
		for j, s := range ids {
			pos[j] = normIndex(s, d, "take")
		}
		// Rows that repeat an index add into one row: every element sums its rows in
		// order of j, starting from 0; the parallel split is over destination rows ×
		// column ranges.
		first, from := groupByDestination(pos, d)
		const chunk = 256
		parts := (post + chunk - 1) / chunk
		tasks := d * parts
		parallelFor(pre*tasks, max(1, ni/max(d, 1))*min(chunk, post), func(lo, hi int) {
			for t := lo; t < hi; t++ {
				p, u := t/tasks, t%tasks
				dr, c0 := u/parts, (u%parts)*chunk
				c1 := min(c0+chunk, post)
				dst := res[(p*d+dr)*post+c0 : (p*d+dr)*post+c1]
				rows := from[first[dr]:first[dr+1]]
				if len(rows) == 0 {
					clear(dst)
					continue
				}
				// 0 + row (not a copy: −0 becomes +0, as the sum from zero makes it),
				// then each further row added in order.
				row := gv[(p*ni+rows[0])*post+c0 : (p*ni+rows[0])*post+c1]
				for k := vecVS(mx.OpAdd, dst, row, 0); k < len(dst); k++ {
					dst[k] = row[k] + 0
				}
				for _, j := range rows[1:] {
					row := gv[(p*ni+j)*post+c0 : (p*ni+j)*post+c1]
					for k := vecVV(mx.OpAdd, dst, dst, row); k < len(dst); k++ {
						dst[k] += row[k]
					}
				}
			}
		})
		return []*tensor{fromF32(x.shape, mx.Float32, res), nil}
	}
}

// groupByDestination lists, for each destination row r < d, the sources j with
// pos[j] = r in increasing j: from[first[r]:first[r+1]] (a stable counting sort), so a
// scatter can give each destination row to one goroutine and still add in order of j.
func groupByDestination(pos []int, d int) (first, from []int) {
	first = make([]int, d+1)
	for _, s := range pos {
		first[s+1]++
	}
	for i := range d {
		first[i+1] += first[i]
	}
	from = make([]int, len(pos))
	fill := slices.Clone(first[:d])
	for j, s := range pos {
		from[fill[s]] = j
		fill[s]++
	}
	return first, from
}

func takeAlongVJP(x, idx *tensor, axis int) func(g *tensor) []*tensor {
	return func(g *tensor) []*tensor {
		_, pos := takeAlongPositions(x.shape, idx, axis)
		return []*tensor{fromF32(x.shape, mx.Float32, scatterAddF32(x.shape, g.f32(), pos)), nil}
	}
}

// y = x·r·w with r = (mean x² + ε)^-½ per row of length D:
// dx = r·(g⊙w) − x·r³/D·Σ(g⊙w⊙x),   dw = Σ_rows g⊙x·r.
// Rows run in parallel; dw is summed in float64 over fixed blocks of rows and the blocks
// added in order, so its bits do not depend on the number of threads.
func rmsNormVJP(x, w *tensor, invF []float32) func(g *tensor) []*tensor {
	return func(g *tensor) []*tensor {
		d := x.shape[len(x.shape)-1]
		xv, gv := x.f32(), g.f32()
		var wv []float32
		if w != nil {
			wv = w.f32()
		}
		// A frozen weight (LoRA training's norms) or an untraced input needs no
		// cotangent: the backward would drop it, so it is not computed.
		wantX, wantW := x.node != nil, w != nil && w.node != nil
		rows := len(xv) / max(d, 1)
		// r of every row, as the forward computed it (rmsInv).
		inv := make([]float64, rows)
		for r, v := range invF {
			inv[r] = float64(v)
		}
		if !wantX {
			return []*tensor{nil, rmsNormWeightGrad(xv, gv, inv, w, d)}
		}
		dx := uninit.Float32s(len(xv))
		// dx row by row, in parallel at any granularity (each row is its own sum).
		parallelFor(rows, 4*d, func(lo, hi int) {
			for r := lo; r < hi; r++ {
				row, grow, drow := xv[r*d:(r+1)*d], gv[r*d:(r+1)*d], dx[r*d:(r+1)*d]
				ir := inv[r]
				var dot float64
				if wv == nil {
					dot = dot4(grow, row)
				} else {
					dot = dot4w(grow, wv, row)
				}
				c := ir * ir * ir / float64(d) * dot
				rmsGradRow(drow, grow, wv, row, ir, c)
			}
		})
		var dw *tensor
		if wantW {
			dw = rmsNormWeightGrad(xv, gv, inv, w, d)
		}
		return []*tensor{fromF32(x.shape, mx.Float32, dx), dw}
	}
}

// rmsNormWeightGrad is rms_norm's dw = Σ_rows g⊙x·r, or nil without a traced weight. It
// sums in float64 over fixed blocks of 64 rows, added in block order, so its bits
// depend on neither the thread count nor the split: tasks are (block, column range)
// pairs, each summing its rows in order.
func rmsNormWeightGrad(xv, gv []float32, inv []float64, w *tensor, d int) *tensor {
	if w == nil || w.node == nil {
		return nil
	}
	rows := len(inv)
	const block, colChunk = 64, 128
	nb := (rows + block - 1) / block
	dwBlocks := make([][]float64, nb)
	for b := range dwBlocks {
		dwBlocks[b] = make([]float64, d)
	}
	nc := (d + colChunk - 1) / colChunk
	parallelFor(nb*nc, block*min(d, colChunk), func(lo, hi int) {
		for task := lo; task < hi; task++ {
			b, c0 := task/nc, task%nc*colChunk
			c1 := min(c0+colChunk, d)
			dw := dwBlocks[b][c0:c1]
			for r := b * block; r < min((b+1)*block, rows); r++ {
				row, grow := xv[r*d+c0:r*d+c1], gv[r*d+c0:r*d+c1]
				ir := inv[r]
				for i := range dw {
					dw[i] += float64(grow[i]) * float64(row[i]) * ir
				}
			}
		}
	})
	dwf := make([]float32, d)
	for i := range dwf {
		var sum float64
		for _, blk := range dwBlocks {
			sum += blk[i]
		}
		dwf[i] = float32(sum)
	}
	return fromF32(w.shape, mx.Float32, dwf)
}

// RoPE is a rotation per pair; its adjoint rotates g by the opposite angle.
func ropeVJP(e *Engine, p mx.RoPEParams, freqs *tensor) func(g *tensor) []*tensor {
	return func(g *tensor) []*tensor { return []*tensor{ropeKernel(e, g, p, freqs, -1), nil} }
}
