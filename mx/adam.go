package mx

import (
	"fmt"
	"slices"
)

// AdamStepper is the optional capability of an engine that applies one Adam(W) update
// (without bias correction) to a float32 parameter in one pass over its elements, in
// place of the dozen elementwise ops of the composition
//
//	p' = p·decay                      (only with HasDecay)
//	m' = m·β1 + g·(1−β1)
//	v' = v·β2 + g²·(1−β2)
//	p" = p' − lr·m' / (√v' + eps)
//
// with every intermediate rounded to float32 exactly as those ops round it, so the
// result is bitwise the composition's. A step of LoRA training updates a hundred small
// adapter matrices: on the go engine each op of the composition costs far more in
// setup than in arithmetic, and a many-core machine waits on them one by one. The mlx
// engine does not have it (MLX's own ops are the reference there).
type AdamStepper interface {
	AdamStep(p, g, m, v Handle, c AdamConstants) (newP, newM, newV Handle)
}

// AdamConstants are the float32 scalars of AdamStepper's composition, each the value
// the composition's scalar arrays hold.
type AdamConstants struct {
	LR             float32 // lr
	HasDecay       bool
	Decay          float32 // 1 − lr·wd, as float32 ops
	WeightDecay    float32 // wd, what the composition computes Decay from
	B1, OneMinusB1 float32
	B2, OneMinusB2 float32
	Eps            float32
}

// AdamStep applies one Adam(W) update to float32 arrays p, g, m, v of one shape: the
// engine's one-pass update when it has AdamStepper, elsewhere the composition op by op
// (MLX's apply_single, so the mlx engine reproduces MLX's rounding). Both give the same
// bits. The results are new arrays.
func AdamStep(p, g, m, v *Array, c AdamConstants) (newP, newM, newV *Array) {
	for _, a := range []*Array{p, g, m, v} {
		sameEngine("adam_step", p, a)
		if a.DType() != Float32 || !slices.Equal(a.Shape(), p.Shape()) {
			panic(fmt.Sprintf("mx: adam_step: p %v %s, g %v %s, m %v %s, v %v %s must be float32 of one shape",
				p.Shape(), p.DType(), g.Shape(), g.DType(), m.Shape(), m.DType(), v.Shape(), v.DType()))
		}
	}
	if s, ok := p.e.(AdamStepper); ok {
		hp, hm, hv := s.AdamStep(p.h, g.h, m.h, v.h, c)
		return Wrap(p.e, hp), Wrap(p.e, hm), Wrap(p.e, hv)
	}
	return AdamCompose(p, g, m, v, Scalar(p.e, float64(c.LR), Float32), c)
}

// AdamCompose is AdamStep's composition op by op (MLX's apply_single) with the learning
// rate given as a float32 0-d array lr (c.LR is not read): an engine that compiles the
// update (mlx_compile) traces it with lr as an argument, so a schedule's next rate does
// not need a new trace. c.Decay is not read either: the composition computes 1 − lr·wd.
func AdamCompose(p, g, m, v, lr *Array, c AdamConstants) (newP, newM, newV *Array) {
	e := p.e
	if c.HasDecay {
		p = Multiply(p, Subtract(Scalar(e, 1, Float32), MulScalar(lr, float64(c.WeightDecay))))
	}
	m = Add(MulScalar(m, float64(c.B1)), MulScalar(g, float64(c.OneMinusB1)))
	v = Add(MulScalar(v, float64(c.B2)), MulScalar(Square(g), float64(c.OneMinusB2)))
	step := Divide(Multiply(lr, m), AddScalar(Sqrt(v), float64(c.Eps)))
	return Subtract(p, step), m, v
}

// AdamStepperAll is the optional capability of an engine that applies AdamStepper's
// update to many float32 parameters at once — one pass, and one parallel region, over
// the elements of all of them — with each element's operations those of AdamStep, so
// the results are bitwise AdamStep's. A LoRA step's optimizer updates ~80 adapter
// tensors of a few thousand elements each: one call per tensor is ~80 regions too small
// to spread over many cores.
type AdamStepperAll interface {
	AdamStepAll(ps, gs, ms, vs []Handle, c AdamConstants) (newP, newM, newV []Handle)
}

// AdamStepAll is AdamStep over parameters ps with gradients gs and states ms, vs (index
// by index) in one call, when the engine has AdamStepperAll and every array is float32 of
// its parameter's shape (ok false otherwise: step them one by one). The results are new
// arrays.
func AdamStepAll(ps, gs, ms, vs []*Array, c AdamConstants) (newP, newM, newV []*Array, ok bool) {
	if len(ps) == 0 || len(gs) != len(ps) || len(ms) != len(ps) || len(vs) != len(ps) {
		return nil, nil, nil, false
	}
	e := ps[0].e
	s, has := e.(AdamStepperAll)
	if !has {
		return nil, nil, nil, false
	}
	hs := [4][]Handle{}
	for k, group := range [4][]*Array{ps, gs, ms, vs} {
		hs[k] = make([]Handle, len(ps))
		for i, a := range group {
			if a.e != e || a.DType() != Float32 || !slices.Equal(a.Shape(), ps[i].Shape()) {
				return nil, nil, nil, false
			}
			hs[k][i] = a.h
		}
	}
	hp, hm, hv := s.AdamStepAll(hs[0], hs[1], hs[2], hs[3], c)
	newP, newM, newV = make([]*Array, len(ps)), make([]*Array, len(ps)), make([]*Array, len(ps))
	for i := range ps {
		newP[i], newM[i], newV[i] = Wrap(e, hp[i]), Wrap(e, hm[i]), Wrap(e, hv[i])
	}
	return newP, newM, newV, true
}
