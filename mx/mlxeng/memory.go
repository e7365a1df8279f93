//go:build mlx

package mlxeng

/*
#include <string.h>
#include "mlx/c/mlx.h"

// mlxeng_device_info copies the default device's name (into name, cap bytes) and
// memory sizes (0 where the backend reports none: MLX's CPU device has no
// "total_memory").
static int mlxeng_device_info(int gpu, char* name, size_t cap, size_t* total, size_t* free_mem) {
	mlx_device d = mlx_device_new_type(gpu ? MLX_GPU : MLX_CPU, 0);
	mlx_device_info info = mlx_device_info_new();
	int rc = mlx_device_info_get(&info, d);
	name[0] = 0;
	*total = 0;
	*free_mem = 0;
	if (rc == 0) {
		const char* s = NULL;
		if (mlx_device_info_get_string(&s, info, "device_name") == 0 && s != NULL) {
			strncpy(name, s, cap - 1);
			name[cap - 1] = 0;
		}
		size_t v = 0;
		if (mlx_device_info_get_size(&v, info, "total_memory") == 0) {
			*total = v;
		} else if (mlx_device_info_get_size(&v, info, "memory_size") == 0) {
			*total = v;
		}
		if (mlx_device_info_get_size(&v, info, "free_memory") == 0) {
			*free_mem = v;
		}
	}
	mlx_device_info_free(info);
	mlx_device_free(d);
	return rc;
}
*/
import "C"

import (
	"fmt"

	"github.com/dgtune/dgtune/mx"
)

// MaxDefaultMemoryLimit caps the limit the engine sets on a GPU by itself. MLX-CUDA
// allocates managed memory, and a shared card must keep room for others.
const MaxDefaultMemoryLimit = 100 << 30

// defaultLimitFraction of the card's memory is the engine's own limit on a GPU.
const defaultLimitFraction = 0.7

// DeviceInfo implements mx.MemoryLimiter.
func (e *Engine) DeviceInfo() (mx.DeviceInfo, error) {
	var g C.int
	if e.device == "gpu" {
		g = 1
	}
	var info mx.DeviceInfo
	err := e.try("device info", func() C.int {
		var name [256]C.char
		var total, free C.size_t
		rc := C.mlxeng_device_info(g, &name[0], C.size_t(len(name)), &total, &free)
		if rc == 0 {
			info = mx.DeviceInfo{Kind: e.device, Name: C.GoString(&name[0]), TotalMemory: int64(total), FreeMemory: int64(free)}
		}
		return rc
	})
	return info, err
}

// MemoryLimit implements mx.MemoryLimiter (mlx_get_memory_limit).
func (e *Engine) MemoryLimit() (int64, error) {
	var n C.size_t
	err := e.try("memory limit", func() C.int { return C.mlx_get_memory_limit(&n) })
	return int64(n), err
}

// SetMemoryLimit implements mx.MemoryLimiter (mlx_set_memory_limit).
func (e *Engine) SetMemoryLimit(bytes int64) (int64, error) {
	if bytes <= 0 {
		return 0, fmt.Errorf("mlx: memory limit must be positive, not %d", bytes)
	}
	var prev C.size_t
	err := e.try("set memory limit", func() C.int { return C.mlx_set_memory_limit(&prev, C.size_t(bytes)) })
	return int64(prev), err
}

// defaultMemoryLimit is the limit a GPU engine starts with: 70 % of the card, at most
// MaxDefaultMemoryLimit. MLX's own default (95 % of the card) assumes the card is
// ours alone.
func defaultMemoryLimit(total int64) int64 {
	l := int64(float64(total) * defaultLimitFraction)
	if l > MaxDefaultMemoryLimit {
		l = MaxDefaultMemoryLimit
	}
	return l
}

// ResetPeakMemory starts MLX's peak counter again from the memory now active
// (mlx_reset_peak_memory), to measure one part of a run.
func (e *Engine) ResetPeakMemory() error {
	return e.try("reset peak memory", func() C.int { return C.mlx_reset_peak_memory() })
}
