//go:build mlx

package mlxeng

import (
	"sync"

	"github.com/dgtune/dgtune/mx"
)

// adamKey names one compiled AdamW update: the number of parameters and the constants the
// trace holds — mx.AdamConstants without the learning rate, an argument, and without
// Decay, which the composition computes from it.
type adamKey struct {
	n int
	c mx.AdamConstants
}

// compiledAdam is one compiled update and what releases its trace.
type compiledAdam struct {
	update  func([]mx.Handle) []mx.Handle
	release func()
}

// adamCache holds the engine's compiled updates. A run has one optimizer, so one entry
// is the common case; past maxAdamTraces the oldest is released.
type adamCache struct {
	mu      sync.Mutex
	entries map[adamKey]compiledAdam
	order   []adamKey
}

const maxAdamTraces = 4

// AdamStepAll implements mx.AdamStepperAll: mx.AdamCompose — MLX's apply_single, op by
// op — over every parameter, compiled by mlx_compile as one function of the learning rate
// and all parameters, gradients and moments, as mlx-lm compiles its step with the
// optimizer's state. Uncompiled, a LoRA step's update was a dozen kernels per adapter
// tensor: on MLX-CUDA, 2,400 float32 kernels of a few microseconds each in the real
// geometry's 6-layer step (bench/results/gpu-profile-real6.txt); compiled, MLX fuses each
// parameter's chain. The trace holds the same float32 ops in the same order, so MLX's CPU
// backend gives the uncompiled composition's bits; a GPU's fused kernel may contract a
// product and a sum into one FMA (NVRTC's default), a rounding apart.
func (e *Engine) AdamStepAll(ps, gs, ms, vs []mx.Handle, c mx.AdamConstants) (newP, newM, newV []mx.Handle) {
	n := len(ps)
	if e.adamKernels.on {
		var arrs [4][]*array
		for k, hs := range [4][]mx.Handle{ps, gs, ms, vs} {
			for _, h := range hs {
				arrs[k] = append(arrs[k], get(h))
			}
		}
		if adamKernelTakes(arrs[0], c) {
			return e.adamStepKernel(arrs[0], arrs[1], arrs[2], arrs[3], c)
		}
	}
	traced := c
	traced.LR, traced.Decay = 0, 0
	update := e.adamUpdate(adamKey{n: n, c: traced})
	lr := e.scalar(float64(c.LR), mx.Float32)
	args := make([]mx.Handle, 0, 1+4*n)
	args = append(args, lr)
	args = append(args, ps...)
	args = append(args, gs...)
	args = append(args, ms...)
	args = append(args, vs...)
	outs := update(args)
	e.free(lr)
	return outs[:n], outs[n : 2*n], outs[2*n:]
}

// adamUpdate returns the compiled update for k, compiling it on first use.
func (e *Engine) adamUpdate(k adamKey) func([]mx.Handle) []mx.Handle {
	a := &e.adam
	a.mu.Lock()
	defer a.mu.Unlock()
	if f, ok := a.entries[k]; ok {
		return f.update
	}
	if a.entries == nil {
		a.entries = map[adamKey]compiledAdam{}
	}
	if len(a.order) >= maxAdamTraces {
		old := a.order[0]
		a.order = a.order[1:]
		a.entries[old].release()
		delete(a.entries, old)
	}
	n, c := k.n, k.c
	body := func(in []mx.Handle) []mx.Handle {
		lr := mx.Wrap(e, in[0])
		out := make([]mx.Handle, 3*n)
		for i := range n {
			p, g := mx.Wrap(e, in[1+i]), mx.Wrap(e, in[1+n+i])
			m, v := mx.Wrap(e, in[1+2*n+i]), mx.Wrap(e, in[1+3*n+i])
			np, nm, nv := mx.AdamCompose(p, g, m, v, lr, c)
			out[i], out[n+i], out[2*n+i] = np.Handle(), nm.Handle(), nv.Handle()
		}
		return out
	}
	update, release := e.Compile(body)
	a.entries[k] = compiledAdam{update, release}
	a.order = append(a.order, k)
	return update
}
