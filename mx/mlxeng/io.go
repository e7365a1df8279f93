//go:build mlx

package mlxeng

/*
#include <stdlib.h>
#include "mlx/c/mlx.h"

static int mlxeng_metal(void) {
	bool ok = false;
	if (mlx_metal_is_available(&ok) != 0) {
		return 0;
	}
	return ok ? 1 : 0;
}
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"unsafe"

	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/safetensors"
)

// loadEnv chooses who reads checkpoints: unset (or "mlx"), MLX itself; "go", the
// checkpoint is read through Go's memory map and copied into MLX arrays, as before
// mlx_load_safetensors was used (for comparing the two).
const loadEnv = "MLXENG_LOAD"

// mlxReads lists the safetensors dtypes MLX's reader accepts (mlx/io/safetensors.cpp,
// v0.31.2 and v0.32.1) among those this repository's parser accepts: all but F64. A file
// holding any other fails as a whole in MLX, so such a file is declined before MLX sees
// it.
var mlxReads = map[safetensors.DType]bool{
	safetensors.F32: true, safetensors.F16: true, safetensors.BF16: true,
	safetensors.I64: true, safetensors.I32: true, safetensors.I16: true, safetensors.I8: true,
	safetensors.U64: true, safetensors.U32: true, safetensors.U16: true, safetensors.U8: true,
	safetensors.BOOL: true,
}

// LoadSafetensorsFile implements mx.FileLoader with mlx_load_safetensors: MLX parses
// the header and makes one lazy array per tensor, and evaluating the named ones reads
// their bytes from the file (pread, on MLX's I/O threads) straight into MLX's buffers;
// the tensors not asked for are never read. On CUDA the read lands in a transient host
// buffer and is copied to the device, as MLX does for its own loads; Metal has no GPU
// reader, so there the tensors are read on the CPU stream.
func (e *Engine) LoadSafetensorsFile(path string, names []string) (map[string]mx.Handle, error) {
	switch v := os.Getenv(loadEnv); v {
	case "", "mlx":
	case "go":
		return nil, fmt.Errorf("mlx: %s=go: %w", loadEnv, errors.ErrUnsupported)
	default:
		return nil, fmt.Errorf("mlx: %s=%q: want mlx or go", loadEnv, v)
	}
	if err := checkReadable(path); err != nil {
		return nil, err
	}
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	stream := e.stream
	if e.device == "gpu" && C.mlxeng_metal() == 1 {
		stream = C.mlx_default_cpu_stream_new()
		defer C.mlx_stream_free(stream)
	}
	tensors, meta := C.mlx_map_string_to_array_new(), C.mlx_map_string_to_string_new()
	defer C.mlx_map_string_to_array_free(tensors)
	defer C.mlx_map_string_to_string_free(meta)
	if err := e.try("load_safetensors", func() C.int {
		return C.mlx_load_safetensors(&tensors, &meta, cpath, stream)
	}); err != nil {
		return nil, err
	}
	out := make(map[string]mx.Handle, len(names))
	hs := make([]mx.Handle, 0, len(names))
	for _, n := range names {
		cn := C.CString(n)
		res := C.mlx_array_new()
		err := e.try("load_safetensors", func() C.int { return C.mlx_map_string_to_array_get(&res, tensors, cn) })
		C.free(unsafe.Pointer(cn))
		if err != nil {
			C.mlx_array_free(res)
			for _, h := range hs {
				e.Free(h)
			}
			return nil, fmt.Errorf("tensor %q: %w", n, err)
		}
		a := e.wrap(res)
		out[n] = a
		hs = append(hs, a)
	}
	if err := e.evalErr("load_safetensors", hs); err != nil {
		for _, h := range hs {
			e.Free(h)
		}
		return nil, err
	}
	return out, nil
}

// checkReadable declines (errors.ErrUnsupported) a file holding a dtype MLX's reader
// lacks, reading only its header.
func checkReadable(path string) error {
	f, err := safetensors.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	for _, n := range f.Names() {
		info, _ := f.Info(n)
		if !mlxReads[info.DType] {
			return fmt.Errorf("mlx: tensor %q has dtype %s, which MLX does not read: %w", n, info.DType, errors.ErrUnsupported)
		}
	}
	return nil
}

// evalErr evaluates hs on the home thread and returns MLX's failure (a read error) as an
// error instead of panicking: it comes from the world, not from misuse.
func (e *Engine) evalErr(op string, hs []mx.Handle) error {
	v := vector(hs)
	defer C.mlx_vector_array_free(v)
	var err error
	e.atHome(func() { err = e.try(op, func() C.int { return C.mlx_eval(v) }) })
	return err
}

// The engine reads checkpoints itself.
var _ mx.FileLoader = (*Engine)(nil)
