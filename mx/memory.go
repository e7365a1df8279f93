package mx

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
