package threefry

import (
	"fmt"
	"math"
)

const (
	// belowOne is nextafter(1, 0) in float32, 1 - 2^-24: uniform's clamp.
	belowOne = float32(1 - 1.0/(1<<24))
	// maxU32 is float32(2^32 - 1), which rounds to 2^32, MLX's divisor.
	maxU32 = float32(math.MaxUint32)
	// sqrt2 is array(sqrt(2.0), float32): the double rounded to float32.
	sqrt2 = float32(math.Sqrt2)
)

// unit maps 32 random bits to [0, 1) as MLX's uniform does.
func unit(b uint32) float32 {
	f := float32(b) / maxU32
	return min(f, belowOne)
}

// affine is range*f + low with two float32 roundings, as MLX's separate
// multiply and add kernels round; the conversion forbids fusing them.
func affine(rng, f, low float32) float32 {
	return float32(rng*f) + low
}

func checkRange(what string, low, high float64) error {
	if math.IsNaN(low) || math.IsNaN(high) || math.IsInf(low, 0) || math.IsInf(high, 0) {
		return fmt.Errorf("%s: bounds [%v, %v) must be finite", what, low, high)
	}
	if !(low < high) {
		return fmt.Errorf("%s: empty range [%v, %v)", what, low, high)
	}
	return nil
}

// Uniform mirrors mlx.core.random.uniform(low, high, shape, float32, key).
func Uniform(k Key, n int, low, high float32) ([]float32, error) {
	if err := checkRange("threefry: uniform", float64(low), float64(high)); err != nil {
		return nil, err
	}
	b, err := Bits(k, n)
	if err != nil {
		return nil, fmt.Errorf("threefry: uniform: %w", err)
	}
	return uniformFrom(b, low, high), nil
}

func uniformFrom(b []uint32, low, high float32) []float32 {
	rng := high - low
	out := make([]float32, len(b))
	for i, v := range b {
		out[i] = affine(rng, unit(v), low)
	}
	return out
}

// Randint mirrors mlx.core.random.randint(low, high, shape, int32, key) as of
// MLX v0.32.1: a float32 uniform on [float32(low), float32(high)), floored,
// converted and clamped to [low, high-1].
func Randint(k Key, n int, low, high int32) ([]int32, error) {
	if low >= high {
		return nil, fmt.Errorf("threefry: randint: empty range [%d, %d)", low, high)
	}
	b, err := Bits(k, n)
	if err != nil {
		return nil, fmt.Errorf("threefry: randint: %w", err)
	}
	lo, hi := float32(low), float32(high)
	rng := hi - lo
	out := make([]int32, len(b))
	for i, v := range b {
		out[i] = randintFrom(affine(rng, unit(v), lo), low, high)
	}
	return out, nil
}

// RandintTrunc mirrors mlx.core.random.randint(low, high, shape, int32, key) before MLX
// v0.32.1: the same float32 uniform, then int32(max(u, float32(low))), truncated toward
// zero. Negative draws that are not whole numbers therefore round up (-1.7 gives -1), and
// a u that rounds up to float32(high) comes out as high.
func RandintTrunc(k Key, n int, low, high int32) ([]int32, error) {
	if low >= high {
		return nil, fmt.Errorf("threefry: randint: empty range [%d, %d)", low, high)
	}
	b, err := Bits(k, n)
	if err != nil {
		return nil, fmt.Errorf("threefry: randint: %w", err)
	}
	lo, hi := float32(low), float32(high)
	rng := hi - lo
	out := make([]int32, len(b))
	for i, v := range b {
		out[i] = toInt32(max(affine(rng, unit(v), lo), lo))
	}
	return out, nil
}

// randintFrom is randint's tail for one uniform sample u.
func randintFrom(u float32, low, high int32) int32 {
	return max(min(toInt32(float32(math.Floor(float64(u)))), high-1), low)
}

// toInt32 converts like Apple silicon's fcvtzs, which MLX's astype compiles to
// on its main platform: saturating, NaN to 0. Float32 values at the top of
// int32's range (2^31 and up) arise when high is near MaxInt32 and float32
// rounds up; the clamp that follows brings them back into range.
func toInt32(f float32) int32 {
	switch {
	case f != f:
		return 0
	case f >= 1<<31:
		return math.MaxInt32
	case f <= -(1 << 31):
		return math.MinInt32
	}
	return int32(f)
}

// Normal mirrors mlx.core.random.normal(shape, float32, loc, scale, key):
// sqrt(2)*scale*erfinv(u) + loc with u uniform on [nextafter(-1, 0), 1).
// With loc 0 and scale 1 it equals MLX's call without loc and scale: the
// scale product is then exact and the sum cannot meet a negative zero,
// because u = 2f - (1 - 2^-24) is never -0.
func Normal(k Key, n int, loc, scale float32) ([]float32, error) {
	b, err := Bits(k, n)
	if err != nil {
		return nil, fmt.Errorf("threefry: normal: %w", err)
	}
	lo := float32(math.Nextafter32(-1, 0))
	u := uniformFrom(b, lo, 1)
	applied := sqrt2 * scale
	for i, v := range u {
		u[i] = loc + float32(applied*Erfinv(v))
	}
	return u, nil
}

// Gumbel mirrors mlx.core.random.gumbel(shape, float32, key):
// -log(-log(u)) with u uniform on [0, 1); u = 0 gives -Inf.
func Gumbel(k Key, n int) ([]float32, error) {
	b, err := Bits(k, n)
	if err != nil {
		return nil, fmt.Errorf("threefry: gumbel: %w", err)
	}
	out := make([]float32, len(b))
	for i, v := range b {
		out[i] = -log32(-log32(unit(v)))
	}
	return out, nil
}
