package mx

import "fmt"

// MemoryStats are an engine allocator's own counters, in bytes.
type MemoryStats struct {
	Active int64 // handed out and not yet freed
	Peak   int64 // the high-water mark of Active
	Cache  int64 // freed by arrays but kept by the allocator for reuse
}

// MemoryReporter is implemented by engines whose allocator keeps its own counters — memory
// that Go's runtime does not account for and the process's resident size reports late or
// not at all (MLX's buffers, in particular Apple silicon's unified memory). The go engine
// allocates on Go's heap and does not implement it.
type MemoryReporter interface {
	MemoryStats() (MemoryStats, error)
}

// Memory returns e's allocator counters, and false when e keeps none (or cannot read
// them).
func Memory(e Engine) (MemoryStats, bool) {
	r, ok := e.(MemoryReporter)
	if !ok {
		return MemoryStats{}, false
	}
	s, err := r.MemoryStats()
	return s, err == nil
}

// DeviceInfo describes where an engine computes: "cpu" or "gpu", the device's name and
// its memory in bytes (0 when the engine cannot tell).
type DeviceInfo struct {
	Kind        string
	Name        string
	TotalMemory int64
	FreeMemory  int64
}

// MemoryLimiter is implemented by engines whose allocator takes a memory limit (MLX's
// mlx_set_memory_limit). It is a brake, not a cap: past it MLX returns its cached buffers
// before allocating, and its evaluation waits for running work instead of queueing
// more, but an allocation the graph needs still goes through. On CUDA it matters: MLX
// allocates managed memory there, and asking for more than the card has free can stall
// every process on it, so the engine starts with a limit well inside the card.
type MemoryLimiter interface {
	DeviceInfo() (DeviceInfo, error)
	MemoryLimit() (int64, error)
	SetMemoryLimit(bytes int64) (previous int64, err error)
}

// SetMemoryLimit sets e's allocator limit to bytes. It reports false when e has no
// limit to set (the go engine: Go's runtime owns its memory).
func SetMemoryLimit(e Engine, bytes int64) (bool, error) {
	l, ok := e.(MemoryLimiter)
	if !ok {
		return false, nil
	}
	if bytes <= 0 {
		return true, fmt.Errorf("mx: memory limit must be positive, not %d bytes", bytes)
	}
	if _, err := l.SetMemoryLimit(bytes); err != nil {
		return true, err
	}
	return true, nil
}

// Device returns where e computes, and false when e does not say (the go engine, which
// always computes on the CPU).
func Device(e Engine) (DeviceInfo, bool) {
	l, ok := e.(MemoryLimiter)
	if !ok {
		return DeviceInfo{Kind: "cpu"}, false
	}
	d, err := l.DeviceInfo()
	return d, err == nil
}
