//go:build mlx

package mlxeng

// #include "mlx/c/mlx.h"
import "C"

import (
	"sync"

	"github.com/dgtune/dgtune/mx"
)

// Version is the version of the MLX library this binary runs on, as MLX reports it
// (mlx::core::version() through mlx-c's mlx_version): "0.32.1", or a development build's
// "0.32.1.dev…". It needs no engine, so --help can show it.
func Version() string { return version() }

var version = sync.OnceValue(func() string {
	s := C.mlx_string_new()
	defer func() { C.mlx_string_free(s) }()
	if C.mlx_version(&s) != 0 {
		return "unknown"
	}
	return C.GoString(C.mlx_string_data(s))
})

// MLXVersion is Version, for callers holding the engine.
func (e *Engine) MLXVersion() string { return Version() }

func init() { mx.RegisterLibrary("mlx", "MLX", Version) }
