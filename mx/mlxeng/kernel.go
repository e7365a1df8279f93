//go:build mlx

package mlxeng

/*
#include <stdlib.h>
#include <string.h>
#include "mlx/c/mlx.h"

// mlxeng_kernel_new makes an MLX custom CUDA kernel (fast.cuda_kernel) from source and
// header, with inputs named in[0..n) and outputs named out[0..nout). Nothing compiles
// until its first use; MLX without CUDA gives a kernel whose ctx is NULL.
mlx_fast_cuda_kernel mlxeng_kernel_new(const char* name, char** in, int n, char** out, int nout,
		const char* source, const char* header) {
	mlx_vector_string ins = mlx_vector_string_new(), outs = mlx_vector_string_new();
	for (int i = 0; i < n; i++) {
		mlx_vector_string_append_value(ins, in[i]);
	}
	for (int i = 0; i < nout; i++) {
		mlx_vector_string_append_value(outs, out[i]);
	}
	mlx_fast_cuda_kernel k = mlx_fast_cuda_kernel_new(name, ins, outs, source, header, true, 0);
	mlx_vector_string_free(ins);
	mlx_vector_string_free(outs);
	return k;
}

// mlxeng_kernel_run_n launches kernel k, configured by cfg (its outputs, grid and
// template constants), on the inputs in[0..n) and sets res[0..nres) to its outputs.
int mlxeng_kernel_run_n(mlx_array* res, int nres, mlx_fast_cuda_kernel k, mlx_fast_cuda_kernel_config cfg,
		const mlx_array* in, int n, mlx_stream s) {
	mlx_vector_array ins = mlx_vector_array_new(), outs = mlx_vector_array_new();
	int rc = 0;
	for (int i = 0; rc == 0 && i < n; i++) {
		rc = mlx_vector_array_append_value(ins, in[i]);
	}
	rc = rc || mlx_fast_cuda_kernel_apply(&outs, k, ins, cfg, s);
	for (int i = 0; rc == 0 && i < nres; i++) {
		rc = mlx_vector_array_get(&res[i], outs, i);
	}
	mlx_vector_array_free(ins);
	mlx_vector_array_free(outs);
	return rc;
}

// mlxeng_kernel_run is mlxeng_kernel_run_n for a kernel with one output.
int mlxeng_kernel_run(mlx_array* res, mlx_fast_cuda_kernel k, mlx_fast_cuda_kernel_config cfg,
		const mlx_array* in, int n, mlx_stream s) {
	return mlxeng_kernel_run_n(res, 1, k, cfg, in, n, s);
}

// mlxeng_cast_to makes *a of dtype dt (a kernel reads its inputs as one type: a
// cotangent may arrive in another), replacing it only when it differs.
int mlxeng_cast_to(mlx_array* a, mlx_dtype dt, mlx_stream s) {
	if (mlx_array_dtype(*a) == dt) {
		return 0;
	}
	mlx_array c = mlx_array_new();
	int rc = mlx_astype(&c, *a, dt, s) || mlx_array_set(a, c);
	mlx_array_free(c);
	return rc;
}

// mlxeng_custom_apply applies fwd to in with vjp as its VJP, writing the one output. Each
// closure owns a copy of the size bytes of payload, freed with the last copy of the
// closure (MLX keeps the VJP until the backward pass has used it).
int mlxeng_custom_apply(mlx_array* res, const mlx_vector_array in,
		int (*fwd)(mlx_vector_array*, const mlx_vector_array, void*),
		int (*vjp)(mlx_vector_array*, const mlx_vector_array, const mlx_vector_array, const mlx_vector_array, void*),
		const void* payload, size_t size) {
	void* pf = malloc(size);
	void* pv = malloc(size);
	if (pf == NULL || pv == NULL) {
		free(pf);
		free(pv);
		return 1;
	}
	memcpy(pf, payload, size);
	memcpy(pv, payload, size);
	mlx_closure cf = mlx_closure_new_func_payload(fwd, pf, free);
	mlx_closure_custom cv = mlx_closure_custom_new_func_payload(vjp, pv, free);
	mlx_closure f = mlx_closure_new();
	mlx_vector_array out = mlx_vector_array_new();
	int rc = mlx_custom_vjp(&f, cf, cv) || mlx_closure_apply(&out, f, in) || mlx_vector_array_get(res, out, 0);
	mlx_vector_array_free(out);
	mlx_closure_free(f);
	mlx_closure_custom_free(cv);
	mlx_closure_free(cf);
	return rc;
}
*/
import "C"

import "unsafe"

// The engine's custom kernels (experts.go, dequant_kernel.go, rows.go, lora.go) and
// custom-VJP ops (dequant.go, rows.go, lora.go) share these helpers; their C code
// declares them.

// newCUDAKernel makes the custom CUDA kernel name from source and header with the named
// inputs and outputs (ctx nil where MLX has no CUDA).
func newCUDAKernel(name string, inputs, outputs []string, source, header string) C.mlx_fast_cuda_kernel {
	n, src, hdr := C.CString(name), C.CString(source), C.CString(header)
	defer C.free(unsafe.Pointer(n))
	defer C.free(unsafe.Pointer(src))
	defer C.free(unsafe.Pointer(hdr))
	in, freeIn := cStrings(inputs)
	defer freeIn()
	out, freeOut := cStrings(outputs)
	defer freeOut()
	return C.mlxeng_kernel_new(n, in, C.int(len(inputs)), out, C.int(len(outputs)), src, hdr)
}

// cStrings copies ss into a C array of C strings, freed by the function returned.
func cStrings(ss []string) (**C.char, func()) {
	arr := (**C.char)(C.malloc(C.size_t(len(ss)) * C.size_t(unsafe.Sizeof((*C.char)(nil)))))
	ptrs := unsafe.Slice(arr, len(ss))
	for i, s := range ss {
		ptrs[i] = C.CString(s)
	}
	return arr, func() {
		for _, p := range ptrs {
			C.free(unsafe.Pointer(p))
		}
		C.free(unsafe.Pointer(arr))
	}
}
