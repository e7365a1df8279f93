package shapeeng

import (
	"slices"

	"github.com/dgtune/dgtune/mx/internal/dims"

	"github.com/dgtune/dgtune/mx"
)

// The optimizer's fused step and the random draws.

func (e *Engine) AdamStep(hp, hg, hm, hv mx.Handle, c mx.AdamConstants) (mx.Handle, mx.Handle, mx.Handle) {
	np, nm, nv := e.AdamStepAll([]mx.Handle{hp}, []mx.Handle{hg}, []mx.Handle{hm}, []mx.Handle{hv}, c)
	return np[0], nm[0], nv[0]
}

func (e *Engine) AdamStepAll(hp, hg, hm, hv []mx.Handle, c mx.AdamConstants) (newP, newM, newV []mx.Handle) {
	e.tick()
	newP, newM, newV = make([]mx.Handle, len(hp)), make([]mx.Handle, len(hp)), make([]mx.Handle, len(hp))
	for i := range hp {
		p := h(hp[i])
		e.read(p, h(hg[i]), h(hm[i]), h(hv[i]))
		e.asF32("adam", p, h(hg[i]), h(hm[i]), h(hv[i]))
		newP[i], newM[i], newV[i] = e.fresh(p.shape, mx.Float32, "adam"), e.fresh(p.shape, mx.Float32, "adam"), e.fresh(p.shape, mx.Float32, "adam")
	}
	return newP, newM, newV
}

func (e *Engine) Key(seed uint64) mx.Handle {
	e.tick()
	return e.fresh([]int{2}, mx.Uint32, "random")
}

func (e *Engine) SplitKey(key mx.Handle, num int) mx.Handle {
	e.tick()
	e.read(h(key))
	return e.fresh([]int{num, 2}, mx.Uint32, "random")
}

func (e *Engine) draw(key mx.Handle, shape []int, dt mx.DType, drawn mx.DType) mx.Handle {
	e.tick()
	e.read(h(key))
	if dt != drawn {
		e.temp(int64(dims.Numel(shape))*int64(drawn.Size()), "random")
		e.convertTemp(shape, dt, "random")
	}
	return e.fresh(shape, dt, "random")
}

func (e *Engine) RandomBits(key mx.Handle, shape []int) mx.Handle {
	return e.draw(key, shape, mx.Uint32, mx.Uint32)
}

func (e *Engine) Uniform(key mx.Handle, shape []int, low, high float64, dt mx.DType) mx.Handle {
	return e.draw(key, shape, dt, mx.Float32)
}

func (e *Engine) Randint(key mx.Handle, shape []int, low, high int64, dt mx.DType) mx.Handle {
	return e.draw(key, shape, dt, mx.Int32)
}

func (e *Engine) Normal(key mx.Handle, shape []int, dt mx.DType) mx.Handle {
	return e.draw(key, shape, dt, mx.Float32)
}

func (e *Engine) Categorical(key, logits mx.Handle, axis int) mx.Handle {
	e.tick()
	l := h(logits)
	e.read(h(key), l)
	e.asF32("categorical", l)
	return e.fresh(slices.Delete(slices.Clone(l.shape), axis, axis+1), mx.Int32, "random")
}

var (
	_ mx.Engine             = (*Engine)(nil)
	_ mx.LoRALinearer       = (*Engine)(nil)
	_ mx.GeGLUSplitter      = (*Engine)(nil)
	_ mx.NormRoPEr          = (*Engine)(nil)
	_ mx.TakeWeightedSummer = (*Engine)(nil)
	_ mx.AdamStepper        = (*Engine)(nil)
	_ mx.AdamStepperAll     = (*Engine)(nil)
	_ mx.ValueFree          = (*Engine)(nil)
)
