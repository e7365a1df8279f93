//go:build purego

package uninit

// Float32s returns a slice of n float32s (zeroed in this build).
func Float32s(n int) []float32 { return make([]float32, n) }
