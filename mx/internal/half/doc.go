// Package half converts between float32 and the two 16-bit float formats
// that checkpoints use: bfloat16 (the top half of a float32) and IEEE 754
// binary16 ("float16").
//
// Every conversion is exact where the value fits and rounds to nearest,
// ties to even, where it does not, so that a tensor saved by dgtune reads
// back bit-for-bit the way PyTorch, NumPy and MLX would produce it. Values
// are carried as raw uint16 bit patterns: the package never needs a float16
// Go type, and callers decode bytes little-endian themselves.
//
// NaN handling: narrowing a NaN always yields a quiet NaN of the same sign
// (payload bits that fit are kept), so a NaN can never round to infinity.
// Widening keeps the bits as they are, so every 16-bit pattern survives a
// round trip through float32 except signalling NaNs, which come back quiet.
package half
