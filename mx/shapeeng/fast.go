package shapeeng

import (
	"slices"

	"github.com/dgtune/dgtune/mx/internal/dims"

	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/goeng"
)

// The fused ops of a layer: norms, RoPE, attention, the gated MLPs, the experts' combine
// and the one-op LoRA linear.

func (e *Engine) RMSNorm(hx, hw mx.Handle, eps float64) mx.Handle {
	e.tick()
	x := h(hx)
	var w *array
	dt := x.dt
	if hw != nil {
		w = h(hw)
		dt = mx.PromoteTypes(dt, w.dt)
	}
	out := e.elementwise("rms_norm", x.shape, dt, x, w)
	return e.record(out, "rms_norm", []*array{x, w}, func(g *array) []*array {
		d := x.shape[len(x.shape)-1]
		rows := x.size() / max(d, 1)
		e.read(x, w, g)
		e.asF32(labelBackward, x, w, g)
		e.temp(8*int64(rows), labelBackward) // the rows' inverse norms
		res := []*array{nil, nil}
		if x.node != nil {
			res[0] = e.fresh(x.shape, mx.Float32, labelBackward)
		}
		if w != nil && w.node != nil {
			e.temp(8*int64((rows+63)/64*d), labelBackward) // float64 sums per block of rows
			res[1] = e.fresh(w.shape, mx.Float32, labelBackward)
		}
		return res
	})
}

func (e *Engine) RoPE(hx mx.Handle, p mx.RoPEParams) mx.Handle {
	e.tick()
	x := h(hx)
	var f *array
	if p.Freqs != nil {
		f = h(p.Freqs)
	}
	out := e.elementwise("rope", x.shape, x.dt, x, f)
	return e.record(out, "rope", []*array{x, f}, func(g *array) []*array {
		return []*array{e.elementwise(labelBackward, g.shape, g.dt, g, f), nil}
	})
}

// NormRoPE implements mx.NormRoPEr as goeng does for float32 operands (nil, the
// composition, otherwise): one output, the rows' scales kept for the VJP, which makes the
// unrotated cotangent [B, L, H, D] and then RMSNorm's.
func (e *Engine) NormRoPE(hx, hw mx.Handle, eps float64, p mx.RoPEParams) mx.Handle {
	x, w := h(hx), h(hw)
	if p.Freqs == nil || p.Traditional || x.dt != mx.Float32 || w.dt != mx.Float32 || len(x.shape) != 4 || p.Dims != x.shape[3] {
		return nil
	}
	e.tick()
	f := h(p.Freqs)
	rows := x.size() / max(x.shape[3], 1)
	scales := e.fresh([]int{rows}, mx.Float32, "norm_rope")
	out := e.elementwise("norm_rope", []int{x.shape[0], x.shape[2], x.shape[1], x.shape[3]}, mx.Float32, x, w, f)
	return e.record(out, "norm_rope", []*array{x, w, f}, func(g *array) []*array {
		e.read(x, w, g, scales)
		gn := e.fresh(x.shape, mx.Float32, labelBackward)
		res := []*array{nil, nil, nil}
		if x.node != nil {
			res[0] = e.fresh(x.shape, mx.Float32, labelBackward)
		}
		if w.node != nil {
			e.temp(8*int64((rows+63)/64*x.shape[3]), labelBackward) // float64 sums per block of rows
			res[1] = e.fresh(w.shape, mx.Float32, labelBackward)
		}
		e.read(gn)
		return res
	})
}

func (e *Engine) GeGLU(hg, hu mx.Handle) mx.Handle {
	e.tick()
	gate, up := h(hg), h(hu)
	out := e.elementwise("geglu", gate.shape, mx.PromoteTypes(gate.dt, up.dt), gate, up)
	return e.record(out, "geglu", []*array{gate, up}, func(g *array) []*array {
		e.asF32(labelBackward, g)
		dg, du := e.grad(gate, gate, up, g), e.grad(up, gate, up, g)
		res := []*array{nil, nil}
		if gate.node != nil {
			res[0] = dg
		}
		if up.node != nil {
			res[1] = du
		}
		return res
	})
}

func (e *Engine) GeGLUSplit(hx mx.Handle) mx.Handle {
	e.tick()
	x := h(hx)
	shape := slices.Clone(x.shape)
	shape[len(shape)-1] /= 2
	out := e.elementwise("geglu_split", shape, x.dt, x)
	return e.record(out, "geglu_split", []*array{x}, func(g *array) []*array {
		e.asF32(labelBackward, g)
		return []*array{e.grad(x, x, g)}
	})
}

func (e *Engine) TakeWeightedSum(hy, hi, hw mx.Handle) mx.Handle {
	e.tick()
	y, idx, w := h(hy), h(hi), h(hw)
	hdim := y.shape[1]
	e.temp(8*int64(idx.size()), "take_weighted_sum") // the indices as int64
	pos := e.fresh(idx.shape, mx.Int64, "take_weighted_sum")
	shape := append(slices.Clone(idx.shape[:len(idx.shape)-1]), hdim)
	out := e.elementwise("take_weighted_sum", shape, mx.PromoteTypes(y.dt, w.dt), y, idx, w)
	return e.record(out, "take_weighted_sum", []*array{y, idx, w}, func(g *array) []*array {
		e.read(pos, y, w, g)
		e.asF32(labelBackward, g)
		res := []*array{nil, nil, nil}
		if y.node != nil {
			e.temp(8*int64(y.shape[0]+1+idx.size()), labelBackward) // rows grouped by destination
			res[0] = e.fresh(y.shape, mx.Float32, labelBackward)
		}
		if w.node != nil {
			res[2] = e.fresh(w.shape, mx.Float32, labelBackward)
		}
		return res
	}, pos)
}

func (e *Engine) LoRALinear(hx, hw, hs, hb, ha, hbb mx.Handle, p mx.QuantParams, alpha float64) mx.Handle {
	e.tick()
	x, w, a, b := h(hx), h(hw), h(ha), h(hbb)
	var scales, biases *array
	if hs != nil {
		scales, biases = h(hs), h(hb)
		e.read(scales, biases)
		e.asF32("lora_linear", scales, biases)
	}
	e.read(x, w, a, b)
	lead := x.shape[:len(x.shape)-1]
	r, n := a.shape[1], w.shape[0]
	kin, rows := x.shape[len(x.shape)-1], dims.Numel(lead)
	e.gemm(rows, r, kin, false, false, false)                 // x·a
	e.gemm(rows, n, kin, false, scales == nil, scales != nil) // the base product
	xa := e.fresh(append(slices.Clone(lead), r), mx.Float32, "lora_linear")
	out := e.fresh(append(slices.Clone(lead), n), mx.Float32, "lora_linear")
	return e.record(out, "lora_linear", []*array{x, w, scales, biases, a, b}, func(g *array) []*array {
		res := make([]*array, 6)
		if x.node == nil && a.node == nil && b.node == nil {
			return res
		}
		e.read(g, b)
		if alpha != 1 {
			e.temp(int64(b.size())*4, labelBackward)
		}
		e.gemm(rows, r, n, false, true, false)
		dxa := e.fresh(append(slices.Clone(lead), r), mx.Float32, labelBackward)
		if b.node != nil {
			e.read(xa)
			if alpha != 1 {
				e.temp(int64(xa.size())*4, labelBackward)
			}
			res[5] = e.reshaped(e.weightGrad(xa, g), b.shape)
		}
		if a.node != nil {
			res[4] = e.reshaped(e.weightGrad(x, dxa), a.shape)
		}
		if x.node != nil {
			e.read(w, scales, biases, a)
			e.asF32(labelBackward, scales, biases)
			e.gemm(rows, kin, n, false, false, scales != nil)
			res[0] = e.fresh(x.shape, mx.Float32, labelBackward)
		}
		e.use(dxa)
		return res
	}, xa)
}

func (e *Engine) ScaledDotProductAttention(hq, hk, hv mx.Handle, scale float64, hm mx.Handle) mx.Handle {
	e.tick()
	q, k, v := h(hq), h(hk), h(hv)
	var mask *array
	if hm != nil {
		mask = h(hm)
		e.read(mask)
		if mask.dt != mx.Bool {
			e.temp(int64(mask.size()), "scaled_dot_product_attention")
		}
	}
	e.read(q, k, v)
	b, hqn, lq, hkv, lk, dv := q.shape[0], q.shape[1], q.shape[2], k.shape[1], k.shape[2], v.shape[3]
	plan := goeng.AttentionMemoryOf(b, hqn, hkv, lq, lk)
	// The call's float32 views of half operands live as long as its node.
	var keeps []*array
	for _, x := range []*array{q, k, v} {
		if x.dt != mx.Float32 {
			keeps = append(keeps, e.fresh(x.shape, mx.Float32, "scaled_dot_product_attention"))
		}
	}
	lse := e.fresh([]int{b * hqn * lq}, mx.Float64, "scaled_dot_product_attention")
	var kept *array
	if plan.Kept > 0 {
		kept = e.fresh([]int{plan.Kept}, mx.Float32, "scaled_dot_product_attention")
	}
	e.temp(int64(plan.ForwardScratch)*4, "attention scores")
	r, d := (hqn/max(hkv, 1))*lq, q.shape[3]
	e.gemm(r, lk, d, false, true, false) // a block's scores
	e.gemm(r, dv, lk, false, false, false)
	dt := mx.PromoteTypes(mx.PromoteTypes(q.dt, k.dt), v.dt)
	if !dt.IsFloat() {
		dt = mx.Float32
	}
	shape := []int{b, hqn, lq, dv}
	e.convertTemp(shape, dt, "scaled_dot_product_attention")
	out := e.fresh(shape, dt, "scaled_dot_product_attention")
	keeps = append(keeps, lse)
	if kept != nil {
		keeps = append(keeps, kept)
	}
	return e.record(out, "scaled_dot_product_attention", []*array{q, k, v, mask}, func(g *array) []*array {
		e.read(append([]*array{q, k, v, mask, g}, keeps...)...)
		e.asF32(labelBackward, g)
		e.temp(int64(plan.BackwardScratch)*4, "attention scores")
		e.gemm(r, lk, d, false, true, false)
		e.gemm(lk, dv, r, true, false, false)
		e.gemm(r, d, lk, false, false, false)
		e.gemm(lk, d, r, true, false, false)
		if kept != nil {
			kept.release = e.clock
		}
		res := []*array{nil, nil, nil, nil}
		for i, x := range []*array{q, k, v} {
			if x.node != nil {
				res[i] = e.fresh(x.shape, mx.Float32, labelBackward)
			}
		}
		return res
	}, keeps...)
}
