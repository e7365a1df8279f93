//go:build mlx

package mlxeng

/*
#include <stdlib.h>
#include "mlx/c/mlx.h"

// mlxeng_additive_mask is where(mask, 0, low) in dtype dt: a boolean attention mask as
// the additive one MLX's attention adds to the scores.
static int mlxeng_additive_mask(mlx_array* res, const mlx_array mask, float low, mlx_dtype dt, mlx_stream s) {
	mlx_array zero = mlx_array_new_float(0), lo = mlx_array_new_float(low);
	mlx_array z = mlx_array_new(), l = mlx_array_new();
	int rc = mlx_astype(&z, zero, dt, s) || mlx_astype(&l, lo, dt, s) || mlx_where(res, mask, z, l, s);
	mlx_array_free(zero);
	mlx_array_free(lo);
	mlx_array_free(z);
	mlx_array_free(l);
	return rc;
}
*/
import "C"

import (
	"math"
	"slices"
	"unsafe"

	"github.com/dgtune/dgtune/mx"
)

// RMSNorm implements mx.Engine with mlx.fast.rms_norm (float32 accumulation).
func (e *Engine) RMSNorm(h, hw mx.Handle, eps float64) mx.Handle {
	x := get(h)
	if !x.dt.IsFloat() {
		xc, done := e.cast(x, mx.Float32)
		defer done()
		x = xc
	}
	var w C.mlx_array
	if hw != nil {
		if wa := get(hw); e.normsThroughKernel(x, wa) {
			return e.rmsNormKernelVJP(x, wa, eps)
		}
		w = get(hw).c
	}
	return e.op("rms_norm", func(res *C.mlx_array) C.int {
		return C.mlx_fast_rms_norm(res, x.c, w, C.float(eps), e.stream)
	})
}

// RoPE implements mx.Engine with mlx.fast.rope. With Freqs, pair i turns by
// position·scale/Freqs[i] (+Inf: not at all); otherwise by position·scale·Base^(-2i/Dims).
// A zero Scale means 1, as on the go engine.
func (e *Engine) RoPE(h mx.Handle, p mx.RoPEParams) mx.Handle {
	x := get(h)
	// fast.rope wants at least [B, L, D]; it rotates along the second-to-last axis.
	if len(x.shape) < 3 {
		s := append(slices.Repeat([]int{1}, 3-len(x.shape)), x.shape...)
		x3 := e.reshape(x, s)
		defer e.free(x3)
		out := e.RoPE(x3, p).(*array)
		defer e.free(out)
		return e.reshape(out, x.shape)
	}
	scale := p.Scale
	if scale == 0 {
		scale = 1
	}
	var base C.mlx_optional_float
	var freqs C.mlx_array
	if p.Freqs != nil {
		freqs = get(p.Freqs).c
	} else {
		base = C.mlx_optional_float{value: C.float(p.Base), has_value: true}
	}
	return e.op("rope", func(res *C.mlx_array) C.int {
		return C.mlx_fast_rope(res, x.c, C.int(p.Dims), C.bool(p.Traditional), base, C.float(scale), C.int(p.Offset), freqs, e.stream)
	})
}

// ScaledDotProductAttention implements mx.Engine with
// mlx.fast.scaled_dot_product_attention; a boolean mask marks the keys a query may
// attend to.
func (e *Engine) ScaledDotProductAttention(hq, hk, hv mx.Handle, scale float64, hm mx.Handle) mx.Handle {
	q, k, v := get(hq), get(hk), get(hv)
	mode := C.CString("")
	var mask C.mlx_array
	var maskArr *array
	if hm != nil {
		C.free(unsafe.Pointer(mode))
		mode = C.CString("array")
		maskArr = get(hm)
		if add := e.additiveMask(maskArr, mx.PromoteTypes(mx.PromoteTypes(q.dt, k.dt), v.dt)); add != nil {
			defer e.free(add)
			maskArr = add
		}
		mask = maskArr.c
	}
	defer C.free(unsafe.Pointer(mode))
	if e.foldsAttention(q, k, v, maskArr) {
		return e.sdpaFolded(q, k, v, scale, maskArr)
	}
	var sinks C.mlx_array
	return e.op("sdpa", func(res *C.mlx_array) C.int {
		return C.mlx_fast_scaled_dot_product_attention(res, q.c, k.c, v.c, C.float(scale), mode, mask, sinks, e.stream)
	})
}

// additiveMask is a boolean mask as the additive one — 0 where allowed, dt's lowest
// finite value where not — for attention in dt (nil for another dtype: the mask is then
// passed as it is). MLX's attention writes a boolean mask as where(mask, scores, lowest)
// and an additive one as scores + mask: the same scores (lowest + a score rounds back to
// lowest), so the same values, but the where's VJP is a select over every head's scores,
// which MLX-CUDA v0.32.1 ran at ~220 µs a layer of the real 26B-A4B geometry on the H200
// (a [1, 16, 128, 128] bfloat16 select through its strided kernel), and the add's is
// the cotangent itself. Only a row with every key masked, outside the engines' contract
// (the go engine gives NaN there), differs: MLX gives it uniform weights either way, but
// the additive mask passes its scores' gradient on (TestAdditiveMaskMatchesBoolMask).
func (e *Engine) additiveMask(m *array, dt mx.DType) *array {
	if m.dt != mx.Bool || e.boolMasks {
		return nil
	}
	var low float32
	switch dt {
	case mx.Float32:
		low = -math.MaxFloat32
	case mx.BFloat16:
		low = math.Float32frombits(0xff7f0000) // −3.3895314e38, bfloat16's lowest
	case mx.Float16:
		low = -65504
	default:
		return nil
	}
	return e.op("sdpa", func(res *C.mlx_array) C.int {
		return C.mlxeng_additive_mask(res, m.c, C.float(low), toMLX(dt), e.stream)
	})
}

// qargs are the (group size, bits, mode) arguments of MLX's affine quantization.
func qargs(p mx.QuantParams) (C.mlx_optional_int, C.mlx_optional_int, *C.char) {
	return C.mlx_optional_int{value: C.int(p.GroupSize), has_value: true},
		C.mlx_optional_int{value: C.int(p.Bits), has_value: true},
		C.CString("affine")
}

// Quantize implements mx.Engine with mlx.quantize (affine). MLX wants a matrix, so a
// vector is quantized as one row.
func (e *Engine) Quantize(h mx.Handle, p mx.QuantParams) (mx.Handle, mx.Handle, mx.Handle) {
	w := get(h)
	if len(w.shape) == 1 {
		w2 := e.reshape(w, []int{1, w.shape[0]})
		defer e.free(w2)
		a, b, c := e.Quantize(w2, p)
		defer e.Free(a)
		defer e.Free(b)
		defer e.Free(c)
		return e.reshape(get(a), get(a).shape[1:]), e.reshape(get(b), get(b).shape[1:]), e.reshape(get(c), get(c).shape[1:])
	}
	gs, bits, mode := qargs(p)
	defer C.free(unsafe.Pointer(mode))
	var res C.mlx_vector_array = C.mlx_vector_array_new()
	defer C.mlx_vector_array_free(res)
	var gscale C.mlx_array
	// On every device MLX's CPU quantizes: MLX-CUDA's kernel rounds some codes, scales and
	// biases differently from MLX's CPU (on the H200, 467 of TestQuantizeMatchesMLX's
	// 756 tensor, dtype, bits and group cases differed), and a quantized checkpoint
	// should not depend on the machine that wrote it. Weights are quantized once per
	// conversion or export, never per step.
	e.run("quantize", func() C.int { return C.mlx_quantize(&res, w.c, gs, bits, mode, gscale, e.cpuStream) })
	out := e.unpack("quantize", res)
	if len(out) != 3 {
		for _, a := range out {
			e.free(a)
		}
		panic(&Error{Op: "quantize", Msg: "MLX returned no biases (not an affine quantization)"})
	}
	return out[0], out[1], out[2]
}

// Dequantize implements mx.Engine with mlx.dequantize, or on CUDA with the engine's
// kernel (dequant_kernel.go) where it takes the weight; the result has the scales' dtype.
func (e *Engine) Dequantize(hw, hs, hb mx.Handle, p mx.QuantParams) mx.Handle {
	wq, s, b := get(hw), get(hs), get(hb)
	if len(wq.shape) == 1 {
		w2, s2, b2 := e.reshape(wq, []int{1, wq.shape[0]}), e.reshape(s, []int{1, s.shape[0]}), e.reshape(b, []int{1, b.shape[0]})
		defer e.free(w2)
		defer e.free(s2)
		defer e.free(b2)
		out := e.Dequantize(w2, s2, b2, p).(*array)
		defer e.free(out)
		return e.reshape(out, out.shape[1:])
	}
	if e.dequantKernelTakes(wq, s, p, s.dt) {
		return e.kernelDequantize(wq, s, b, p)
	}
	gs, bits, mode := qargs(p)
	defer C.free(unsafe.Pointer(mode))
	var gscale C.mlx_array
	var dt C.mlx_optional_dtype
	return e.op("dequantize", func(res *C.mlx_array) C.int {
		return C.mlx_dequantize(res, wq.c, s.c, b.c, gs, bits, mode, gscale, dt, e.stream)
	})
}

// QuantizedMatmul implements mx.Engine with mlx.quantized_matmul.
func (e *Engine) QuantizedMatmul(hx, hw, hs, hb mx.Handle, transpose bool, p mx.QuantParams) mx.Handle {
	x, wq, s, b := get(hx), get(hw), get(hs), get(hb)
	if len(x.shape) == 1 {
		x2 := e.reshape(x, []int{1, x.shape[0]})
		defer e.free(x2)
		out := e.QuantizedMatmul(x2, wq, s, b, transpose, p).(*array)
		defer e.free(out)
		return e.reshape(out, out.shape[1:])
	}
	if transpose && (e.quantized == routeDequant || isCUDA(e.device) && oneGroupRows(wq, p)) {
		return e.dequantLinear(x, wq, s, b, p)
	}
	gs, bits, mode := qargs(p)
	defer C.free(unsafe.Pointer(mode))
	return e.op("quantized_matmul", func(res *C.mlx_array) C.int {
		return C.mlx_quantized_matmul(res, x.c, wq.c, s.c, b.c, C.bool(transpose), gs, bits, mode, e.stream)
	})
}

// GatherQMM implements mx.Engine with mlx.gather_qmm: every row of x (shape [..., K])
// is a one-row matrix multiplied by the expert its index picks; sorted is MLX's
// sorted_indices.
func (e *Engine) GatherQMM(hx, hw, hs, hb, hi mx.Handle, transpose bool, p mx.QuantParams, sorted bool) mx.Handle {
	x, wq, s, b, idx := get(hx), get(hw), get(hs), get(hb), get(hi)
	lead := x.shape[:len(x.shape)-1]
	k := x.shape[len(x.shape)-1]
	x3 := e.reshape(x, append(slices.Clone(lead), 1, k))
	defer e.free(x3)
	rhs := e.reshape(idx, lead)
	defer e.free(rhs)
	var out *array
	if transpose && e.quantized == routeDequant {
		out = e.dequantGather(x3, wq, s, b, rhs, p, sorted)
	} else {
		gs, bits, mode := qargs(p)
		defer C.free(unsafe.Pointer(mode))
		var lhs C.mlx_array
		out = e.op("gather_qmm", func(res *C.mlx_array) C.int {
			return C.mlx_gather_qmm(res, x3.c, wq.c, s.c, b.c, lhs, rhs.c, C.bool(transpose), gs, bits, mode, C.bool(sorted), e.stream)
		})
	}
	defer e.free(out)
	return e.reshape(out, append(slices.Clone(lead), out.shape[len(out.shape)-1]))
}

// GatherMM implements mx.Engine with mlx.gather_mm, each row of x (shape [..., K]) a
// one-row matrix against the [K, N] expert its index picks; sorted is MLX's
// sorted_indices. MLX's own VJP differentiates x and w.
func (e *Engine) GatherMM(hx, hw, hi mx.Handle, sorted bool) mx.Handle {
	x, w, idx := get(hx), get(hw), get(hi)
	lead := x.shape[:len(x.shape)-1]
	k := x.shape[len(x.shape)-1]
	x3 := e.reshape(x, append(slices.Clone(lead), 1, k))
	defer e.free(x3)
	rhs := e.reshape(idx, lead)
	defer e.free(rhs)
	var lhs C.mlx_array
	out := e.op("gather_mm", func(res *C.mlx_array) C.int {
		return C.mlx_gather_mm(res, x3.c, w.c, lhs, rhs.c, C.bool(sorted), e.stream)
	})
	defer e.free(out)
	return e.reshape(out, append(slices.Clone(lead), out.shape[len(out.shape)-1]))
}
