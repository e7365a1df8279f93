package goeng

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/dgtune/dgtune/mx/internal/dims"

	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/internal/sgemm"
	"github.com/dgtune/dgtune/mx/internal/uninit"
)

// matmulKernel multiplies the last two axes, broadcasting the batch axes. Compute is
// float32 through sgemm's blocked, parallel SGEMM, which is bitwise deterministic.
func matmulKernel(a, b *tensor) *tensor { return matmulOp(a, b, false, false) }

// matmulOp is op(a)·op(b) over the last two axes with broadcast batch axes, where op
// swaps an operand's last two axes when its flag is set. sgemm reads the stored
// operand through its strides, so a transpose costs no copy.
func matmulOp(a, b *tensor, ta, tb bool) *tensor {
	p, _ := matmulThen(a, b, ta, tb, nil)
	return p
}

// epilogueFor makes the epilogue that finishes a product's float32 result out, of the
// given shape, in place; nil declines.
type epilogueFor func(out []float32, shape []int) sgemm.Epilogue

// matmulThen is matmulOp that, when the product is a single sgemm call (one B for every
// batch, which then folds into the rows) and then gives an epilogue for it, runs that
// epilogue on every block of the result as sgemm finishes it, and reports true;
// otherwise the product is returned unfinished and it reports false.
func matmulThen(a, b *tensor, ta, tb bool, then epilogueFor) (*tensor, bool) {
	// A pending transpose is read as its source with the other flag.
	if src := a.swapped(); src != nil {
		a, ta = src, !ta
	}
	if src := b.swapped(); src != nil {
		b, tb = src, !tb
	}
	na, nb := len(a.shape), len(b.shape)
	if na < 2 || nb < 2 {
		panic(fmt.Sprintf("goeng: matmul %v × %v: operands need two axes", a.shape, b.shape))
	}
	ar, ac := a.shape[na-2], a.shape[na-1] // as stored
	br, bc := b.shape[nb-2], b.shape[nb-1]
	m, k := ar, ac
	if ta {
		m, k = ac, ar
	}
	kb, n := br, bc
	if tb {
		kb, n = bc, br
	}
	if kb != k {
		panic(fmt.Sprintf("goeng: matmul %v × %v (transposed %v, %v)", a.shape, b.shape, ta, tb))
	}
	batch, err := mx.BroadcastShapes(a.shape[:na-2], b.shape[:nb-2])
	if err != nil {
		panic(fmt.Sprintf("goeng: matmul %v × %v: %v", a.shape, b.shape, err))
	}
	dt := mx.PromoteTypes(a.dt, b.dt)
	if !dt.IsFloat() {
		dt = mx.Float32
	}
	nbatch := dims.Numel(batch)
	out := uninit.Float32s(nbatch * m * n) // every batch's product overwrites its block
	shape := append(slices.Clone(batch), m, n)
	ab := expand(a, append(slices.Clone(batch), ar, ac))
	if dims.Numel(b.shape[:nb-2]) == 1 && !ta {
		// One B for every batch: the batch folds into the rows of A, with no copy of B
		// (sgemm's result per element does not depend on how the rows are grouped).
		if then != nil {
			if ep := then(out, shape); ep != nil {
				sgemm.GemmThen(sgemm.NoTrans, sgemm.Trans(tb), nbatch*m, n, k, ab.f32(), ac, b.f32(), bc, out, n, ep)
				return fromF32(shape, dt, out), true
			}
		}
		sgemm.Gemm(sgemm.NoTrans, sgemm.Trans(tb), nbatch*m, n, k, ab.f32(), ac, b.f32(), bc, out, n, false)
		return fromF32(shape, dt, out), false
	}
	bb := expand(b, append(slices.Clone(batch), br, bc))
	av, bv := ab.f32(), bb.f32()
	gemm := func(i int) {
		sgemm.Gemm(sgemm.Trans(ta), sgemm.Trans(tb), m, n, k, av[i*ar*ac:(i+1)*ar*ac], ac,
			bv[i*br*bc:(i+1)*br*bc], bc, out[i*m*n:(i+1)*m*n], n, false)
	}
	if nbatch > 1 && m*n*k < 1<<18 {
		// Products too small for sgemm to split: run whole batches side by side.
		parallelFor(nbatch, m*n*k, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				gemm(i)
			}
		})
	} else {
		for i := range nbatch {
			gemm(i)
		}
	}
	return fromF32(shape, dt, out), false
}

// expand is x broadcast to shape, without a copy when only unit axes are added (the
// elements then sit in the same row-major order).
func expand(x *tensor, shape []int) *tensor {
	if x.size() == dims.Numel(shape) {
		return reshapeKernel(x, shape)
	}
	return broadcastKernel(x, shape)
}

// matmulWeightGrad is Σ_batch op(a)ᵀ·g for a [batch..., m, k] against g [batch..., m, n]
// — the gradient of a B without batch axes, shared by every batch. The batch folds into
// the contraction: one product of a k × (batch·m) by a (batch·m) × n matrix, with neither
// the per-batch products nor aᵀ materialised.
func matmulWeightGrad(a, g *tensor) *tensor {
	ng := len(g.shape)
	batch := g.shape[:ng-2]
	m, n := g.shape[ng-2], g.shape[ng-1]
	k := a.shape[len(a.shape)-1]
	ab := expand(a, append(slices.Clone(batch), m, k))
	out := make([]float32, k*n)
	rows := dims.Numel(batch) * m
	sgemm.Gemm(sgemm.Transposed, sgemm.NoTrans, k, n, rows, ab.f32(), k, g.f32(), n, out, n, false)
	dt := mx.PromoteTypes(a.dt, g.dt)
	if !dt.IsFloat() {
		dt = mx.Float32
	}
	return fromF32([]int{k, n}, dt, out)
}

func normIndex(i int64, d int, op string) int {
	j := i
	if j < 0 {
		j += int64(d)
	}
	if j < 0 || j >= int64(d) {
		panic(fmt.Sprintf("goeng: %s: index %d out of range for axis of size %d", op, i, d))
	}
	return int(j)
}

// takeKernel gathers along axis: out[pre, I..., post] = x[pre, idx[I...], post].
func takeKernel(x, idx *tensor, axis int) *tensor {
	pre := dims.Numel(x.shape[:axis])
	d := x.shape[axis]
	post := dims.Numel(x.shape[axis+1:])
	ids := idx.i64()
	pos := make([]int, len(ids))
	for i, v := range ids {
		pos[i] = normIndex(v, d, "take")
	}
	shape := append(append(slices.Clone(x.shape[:axis]), idx.shape...), x.shape[axis+1:]...)
	data := makeData(x.dt, dims.Numel(shape))
	ni := len(pos)
	if v, ok := x.raw().([]float32); ok && post >= 16 {
		// Rows of floats (embedding lookups, the experts' gathered rows): in parallel.
		out := data.([]float32)
		parallelFor(pre*ni, post, func(lo, hi int) {
			for t := lo; t < hi; t++ {
				p, j := t/ni, t%ni
				copy(out[t*post:(t+1)*post], v[(p*d+pos[j])*post:(p*d+pos[j]+1)*post])
			}
		})
		return newTensor(shape, x.dt, data)
	}
	gatherRows(data, x.raw(), func(yield func(dst, src int)) {
		for p := range pre {
			for j, s := range pos {
				yield((p*ni+j)*post, (p*d+s)*post)
			}
		}
	}, post)
	return newTensor(shape, x.dt, data)
}

// gatherRows copies runs of n elements from src to dst at the offsets produced by each.
func gatherRows(dst, src any, each func(yield func(dst, src int)), n int) {
	switch d := dst.(type) {
	case []float32:
		s := src.([]float32)
		each(func(a, b int) { copy(d[a:a+n], s[b:b+n]) })
	case []uint16:
		s := src.([]uint16)
		each(func(a, b int) { copy(d[a:a+n], s[b:b+n]) })
	case []int32:
		s := src.([]int32)
		each(func(a, b int) { copy(d[a:a+n], s[b:b+n]) })
	case []uint32:
		s := src.([]uint32)
		each(func(a, b int) { copy(d[a:a+n], s[b:b+n]) })
	case []float64:
		s := src.([]float64)
		each(func(a, b int) { copy(d[a:a+n], s[b:b+n]) })
	case []int64:
		s := src.([]int64)
		each(func(a, b int) { copy(d[a:a+n], s[b:b+n]) })
	case []uint8:
		s := src.([]uint8)
		each(func(a, b int) { copy(d[a:a+n], s[b:b+n]) })
	case []bool:
		s := src.([]bool)
		each(func(a, b int) { copy(d[a:a+n], s[b:b+n]) })
	default:
		panic(fmt.Sprintf("goeng: bad data %T", dst))
	}
}

// takeAlongPositions returns the output shape and, for every output element, the flat
// index into x that take_along_axis reads.
func takeAlongPositions(xShape []int, idx *tensor, axis int) ([]int, []int) {
	nd := len(xShape)
	xs := slices.Clone(xShape)
	xs[axis] = 1
	is := slices.Clone(idx.shape)
	is[axis] = 1
	bshape, err := mx.BroadcastShapes(xs, is)
	if err != nil {
		panic(fmt.Sprintf("goeng: take_along_axis: x %v indices %v", xShape, idx.shape))
	}
	out := slices.Clone(bshape)
	out[axis] = idx.shape[axis]
	ist := broadcastStrides(idx.shape, out)
	xst := broadcastStrides(xShape, out)
	xfull := strides(xShape)
	ids := idx.i64()
	n := dims.Numel(out)
	pos := make([]int, n)
	cnt := make([]int, nd)
	for i := range n {
		ii, xi := 0, 0
		for d := range nd {
			ii += cnt[d] * ist[d]
			if d != axis {
				xi += cnt[d] * xst[d]
			}
		}
		xi += normIndex(ids[ii], xShape[axis], "take_along_axis") * xfull[axis]
		pos[i] = xi
		for d := nd - 1; d >= 0; d-- {
			cnt[d]++
			if cnt[d] < out[d] {
				break
			}
			cnt[d] = 0
		}
	}
	return out, pos
}

func takeAlongKernel(x, idx *tensor, axis int) *tensor {
	out, pos := takeAlongPositions(x.shape, idx, axis)
	data := makeData(x.dt, len(pos))
	gatherRows(data, x.raw(), func(yield func(dst, src int)) {
		for i, p := range pos {
			yield(i, p)
		}
	}, 1)
	return newTensor(out, x.dt, data)
}

// scatterAddF32 adds g's elements into a zero tensor of shape at the flat positions pos.
// The zeros are cleared on every core: the target logits' cotangent at the real geometry
// is [rows, 262144], whose clearing on this goroutine alone was 16 ms of a 16-thread step.
func scatterAddF32(shape []int, g []float32, pos []int) []float32 {
	out := zerosF32(dims.Numel(shape))
	for i, p := range pos {
		out[p] += g[i]
	}
	return out
}

// rmsNormKernel: y = x · rsqrt(mean(x²) + eps) · w over the last axis, and the
// rsqrt(mean(x²) + eps) of every row (rmsInv), which the VJP reuses instead of reading
// x once more to recompute it.
func rmsNormKernel(x, w *tensor, eps float64) (*tensor, []float32) {
	d := x.shape[len(x.shape)-1]
	in := x.f32()
	var wv []float32
	if w != nil {
		wv = w.f32()
	}
	out := uninit.Float32s(len(in))
	inv := make([]float32, len(in)/max(d, 1))
	rmsNormInto(out, inv, in, wv, d, eps)
	dt := x.dt
	if w != nil {
		dt = mx.PromoteTypes(dt, w.dt)
	}
	return fromF32(x.shape, dt, out), inv
}

// rmsNormInto writes rms_norm of the rows of in (length d) into out, and each row's
// (mean x² + eps)^-½ into inv, rows in parallel.
func rmsNormInto(out, inv, in, wv []float32, d int, eps float64) {
	parallelFor(len(inv), d, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			row, dst := in[r*d:(r+1)*d], out[r*d:(r+1)*d]
			inv[r] = rmsInv(row, eps)
			rmsScaleRow(dst, row, wv, inv[r])
		}
	})
}

// rmsInv is (mean x² + eps)^-½ over row, the squares summed in float64 in four
// interleaved partial sums (one chain would cost an add latency per element).
func rmsInv(row []float32, eps float64) float32 {
	return float32(1 / math.Sqrt(dot4(row, row)/float64(len(row))+eps))
}

// ropeAngles returns the per-pair inverse frequencies (angle per unit position).
func ropeInvFreq(p mx.RoPEParams, freqs *tensor) []float64 {
	half := p.Dims / 2
	inv := make([]float64, half)
	if freqs != nil {
		for i, f := range freqs.f32() {
			inv[i] = 1 / float64(f)
		}
		return inv
	}
	for i := range inv {
		inv[i] = math.Pow(p.Base, -2*float64(i)/float64(p.Dims))
	}
	return inv
}

// ropeKernel rotates x [..., S, D]; sign -1 applies the inverse rotation (for the VJP).
// The cosine and sine tables come from the engine's cache of recent ones (nil e: none).
func ropeKernel(e *Engine, x *tensor, p mx.RoPEParams, freqs *tensor, sign float64) *tensor {
	nd := len(x.shape)
	if nd < 2 {
		panic(fmt.Sprintf("goeng: rope on shape %v", x.shape))
	}
	s, d := x.shape[nd-2], x.shape[nd-1]
	half := p.Dims / 2
	inv := ropeInvFreq(p, freqs)
	scale := p.Scale
	if scale == 0 {
		scale = 1
	}
	cos, sin := e.ropeTables(p.Offset, s, scale, sign, inv)
	in := x.f32()
	out := uninit.Float32s(len(in))
	rows := len(in) / max(d, 1)
	parallelFor(rows, d, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			t := r % s
			row, dst := in[r*d:(r+1)*d], out[r*d:(r+1)*d]
			copy(dst, row) // the dimensions past p.Dims pass through
			c, sn := cos[t*half:(t+1)*half], sin[t*half:(t+1)*half]
			if !p.Traditional {
				rotateHalf(dst, row, c, sn)
				continue
			}
			for i := range half {
				x1, x2 := row[2*i], row[2*i+1]
				dst[2*i] = x1*c[i] - x2*sn[i]
				dst[2*i+1] = x2*c[i] + x1*sn[i]
			}
		}
	})
	return fromF32(x.shape, x.dt, out)
}

// rotateHalf is RoPE's rotate-half rotation of the first 2·len(c) features of src into
// dst, pairing feature i with i + len(c), with the cosines c and sines sn of one position:
// ropeKernel's and NormRoPE's one definition of it, so that their values agree to the bit.
func rotateHalf(dst, src, c, sn []float32) {
	half := len(c)
	sn = sn[:half]
	lo, hi := src[:half], src[half:2*half]
	dlo, dhi := dst[:half], dst[half:2*half]
	for i := range half {
		x1, x2 := lo[i], hi[i]
		dlo[i] = x1*c[i] - x2*sn[i]
		dhi[i] = x2*c[i] + x1*sn[i]
	}
}

// ropeTables returns cos(a) and sign·sin(a) for the angles a = (offset + t)·scale·inv[i],
// t < s, i < len(inv), as [s, len(inv)] tables. A training step rotates q and k of every
// layer at the same positions, forward and backward, so the tables are kept in a small
// cache of the most recent ones (read only once made) instead of taking 2·s·len(inv)
// sines and cosines, ~20 ns each, every call.
func (e *Engine) ropeTables(offset, s int, scale, sign float64, inv []float64) (cos, sin []float32) {
	key := make([]byte, 0, 8*(4+len(inv)))
	for _, v := range []uint64{uint64(offset), uint64(s), math.Float64bits(scale), math.Float64bits(sign)} {
		key = binary.LittleEndian.AppendUint64(key, v)
	}
	for _, v := range inv {
		key = binary.LittleEndian.AppendUint64(key, math.Float64bits(v))
	}
	if e != nil {
		if cos, sin, ok := e.rope.get(string(key)); ok {
			return cos, sin
		}
	}
	half := len(inv)
	cos, sin = make([]float32, s*half), make([]float32, s*half)
	parallelFor(s, 40*half, func(lo, hi int) { // a sine and a cosine cost ~20 ns each
		for t := lo; t < hi; t++ {
			pos := float64(offset+t) * scale
			for i := range half {
				a := float32(pos * inv[i])
				cos[t*half+i] = float32(math.Cos(float64(a)))
				sin[t*half+i] = float32(sign * math.Sin(float64(a)))
			}
		}
	})
	if e != nil {
		e.rope.put(string(key), cos, sin)
	}
	return cos, sin
}

// ropeCache holds the last few RoPE tables, most recent first.
type ropeCache struct {
	mu      sync.Mutex
	entries []ropeEntry
}

type ropeEntry struct {
	key      string
	cos, sin []float32
}

// ropeCacheSize covers a step's distinct tables (sliding and full layers, forward and
// backward signs, a few lengths) with room to spare; each is 2·s·dims/2 floats.
const ropeCacheSize = 16

func (c *ropeCache) get(key string) (cos, sin []float32, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, en := range c.entries {
		if en.key == key {
			copy(c.entries[1:i+1], c.entries[:i]) // move to the front
			c.entries[0] = en
			return en.cos, en.sin, true
		}
	}
	return nil, nil, false
}

func (c *ropeCache) put(key string, cos, sin []float32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) < ropeCacheSize {
		c.entries = append(c.entries, ropeEntry{})
	}
	copy(c.entries[1:], c.entries[:len(c.entries)-1])
	c.entries[0] = ropeEntry{key, cos, sin}
}

// AddMM implements mx.Engine: beta·c + alpha·(a·b) in one pass over the product, which
// sgemm writes into the result's own buffer. The terms round as the separate ops
// would (the product, then alpha·p, beta·c and their sum, each once in float32; a
// factor of 1 is skipped, as multiplying by 1 is exact). The VJP is dc = beta·g (summed
// over c's broadcast axes), da = g·(alpha·b)ᵀ, db = (alpha·a)ᵀ·g: alpha scales the small
// factor of each product rather than g (for LoRA, [tokens, out] against [rank, out] and
// [tokens, rank]), which rounds differently from the separate ops' (alpha·g) in the last
// place.
func (e *Engine) AddMM(hc, ha, hb mx.Handle, alpha, beta float64) mx.Handle {
	c, a, b := tt(hc), tt(ha), tt(hb)
	al, be := float32(alpha), float32(beta)
	vjp := addmmVJP(c, a, b, al, be)
	var p *tensor
	if dt := mx.PromoteTypes(a.dt, b.dt); c.dt == mx.Float32 && (dt == mx.Float32 || !dt.IsFloat()) {
		// β·c + α·(a·b) finished block by block inside the product, while each block is
		// in cache, when the product is one sgemm call of c's shape.
		var done bool
		p, done = matmulThen(a, b, false, false, func(out []float32, shape []int) sgemm.Epilogue {
			if !slices.Equal(c.shape, shape) {
				return nil
			}
			cv, n := c.f32(), shape[len(shape)-1]
			return func(i0, i1, j0, j1 int) {
				for i := i0; i < i1; i++ {
					addScaledRow(out[i*n+j0:i*n+j1], cv[i*n+j0:i*n+j1], al, be)
				}
			}
		})
		if done {
			return record(p, "addmm", []*tensor{c, a, b}, vjp)
		}
	} else {
		p = matmulKernel(a, b)
	}
	out, ok := p.raw().([]float32)
	if !ok || p.dt != mx.Float32 || !slices.Equal(c.shape, p.shape) {
		// Half or broadcast operands: the composition, op by op.
		res := binaryKernel(mx.OpAdd, kscaleDT(c, be), kscaleDT(p, al))
		return record(res, "addmm", []*tensor{c, a, b}, vjp)
	}
	cv := c.f32()
	parallelFor(len(out), 2, func(lo, hi int) { addScaledRow(out[lo:hi], cv[lo:hi], al, be) })
	return record(p, "addmm", []*tensor{c, a, b}, vjp)
}

// addScaledRow sets o = β·c + α·o, rounding each product and the sum as the ops
// multiply and add would (a factor of 1 is no multiply).
func addScaledRow(o, c []float32, al, be float32) {
	c = c[:len(o)]
	switch {
	case al == 1 && be == 1:
		for i := vecVV(mx.OpAdd, o, c, o); i < len(o); i++ {
			o[i] = c[i] + o[i]
		}
	case be == 1:
		n := vecVS(mx.OpMultiply, o, o, al)
		vecVV(mx.OpAdd, o[:n], c, o)
		for i := n; i < len(o); i++ {
			o[i] = c[i] + float32(al*o[i])
		}
	default:
		for i := range o {
			o[i] = float32(be*c[i]) + float32(al*o[i])
		}
	}
}

// kscaleDT is s·t in t's dtype (t itself when s is 1).
func kscaleDT(t *tensor, s float32) *tensor {
	if s == 1 {
		return t
	}
	return binaryKernel(mx.OpMultiply, t, fromF32(nil, t.dt, []float32{s}))
}

func addmmVJP(c, a, b *tensor, alpha, beta float32) func(g *tensor) []*tensor {
	mm := matmulVJP(a, b)
	return func(g *tensor) []*tensor {
		res := []*tensor{nil, nil, nil}
		if c.node != nil {
			dc := g
			if beta != 1 {
				dc = kscale(g, beta)
			}
			res[0] = unbroadcast(dc, c.shape)
		}
		if alpha != 1 {
			// α on the small factor of each product — da = g·(α·b)ᵀ, db = (α·a)ᵀ·g — not on
			// g: for LoRA, a is [tokens, rank] and b [rank, out] while g is [tokens, out].
			if a.node != nil {
				res[1] = unbroadcast(matmulOp(g, kscale(b, alpha), false, true), a.shape)
			}
			if b.node != nil {
				res[2] = matmulVJP(kscale(a, alpha), b)(g)[1] // kscale's result is untraced: no da
			}
		} else if a.node != nil || b.node != nil {
			ab := mm(g)
			res[1], res[2] = ab[0], ab[1]
		}
		return res
	}
}
