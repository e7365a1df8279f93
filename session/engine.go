package session

import (
	"fmt"

	"github.com/dgtune/dgtune/mx"
)

// ComputeDType maps the compute_dtype key to the dtype the base model is loaded in.
func ComputeDType(name string) (mx.DType, error) {
	switch name {
	case "", "float32":
		return mx.Float32, nil
	case "bfloat16":
		return mx.BFloat16, nil
	}
	return 0, fmt.Errorf("compute_dtype %q: want float32 or bfloat16", name)
}

// OpenEngine opens the engine named by backend for a model computed in computeDType,
// with the allocator limit memoryLimitGB (0 keeps the engine's default). bfloat16
// compute needs an engine that computes in it: the go engine stores bfloat16 exactly
// but computes in float32, so it refuses the key instead of silently ignoring it.
func OpenEngine(backend, computeDType string, memoryLimitGB float64) (mx.Engine, error) {
	dt, err := ComputeDType(computeDType)
	if err != nil {
		return nil, err
	}
	e, err := mx.Open(backend)
	if err != nil {
		return nil, err
	}
	if dt != mx.Float32 && e.Name() == "go" {
		return nil, fmt.Errorf("compute_dtype %s needs the mlx engine (the go engine computes in float32); use backend: mlx or compute_dtype: float32", computeDType)
	}
	if memoryLimitGB > 0 {
		ok, err := mx.SetMemoryLimit(e, int64(memoryLimitGB*(1<<30)))
		if err != nil {
			return nil, fmt.Errorf("memory_limit_gb %g: %w", memoryLimitGB, err)
		}
		if !ok {
			return nil, fmt.Errorf("memory_limit_gb %g: the %s engine has no allocator limit (Go's runtime owns its memory; see GOMEMLIMIT)", memoryLimitGB, e.Name())
		}
	}
	return e, nil
}
