//go:build mlx

package mlxeng

/*
#include <stdio.h>
#include <stdlib.h>
#include "mlx/c/mlx.h"

static int mlxeng_export_dot(const char* path, const mlx_vector_array outs) {
	FILE* f = fopen(path, "w");
	if (f == NULL) {
		return 1;
	}
	mlx_node_namer namer = mlx_node_namer_new();
	int rc = mlx_export_to_dot(f, namer, outs);
	mlx_node_namer_free(namer);
	if (fclose(f) != 0) {
		rc = 1;
	}
	return rc;
}
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/dgtune/dgtune/mx"
)

// WriteDOT writes the unevaluated graph behind the arrays to path in Graphviz DOT
// (MLX's export_to_dot: one node per array, labelled with its primitive), for seeing
// what a step asks MLX to run — every node is at least one kernel launch on a GPU
// unless compile fuses it into an elementwise chain.
func (e *Engine) WriteDOT(path string, hs ...mx.Handle) error {
	v := vector(hs)
	defer C.mlx_vector_array_free(v)
	p := C.CString(path)
	defer C.free(unsafe.Pointer(p))
	if err := e.try("export_to_dot", func() C.int { return C.mlxeng_export_dot(p, v) }); err != nil {
		return fmt.Errorf("mlx: write %s: %w", path, err)
	}
	return nil
}
