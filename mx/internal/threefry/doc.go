// Package threefry reproduces MLX's random number generation bit for bit on
// plain Go slices, so the pure-Go engine draws the same numbers as
// mlx.core.random for the same key. The reference goldens (canvas ids from
// seed(0) then randint, categorical draws in the sampler) can only be matched
// this way.
//
// # What MLX does (read from ml-explore/mlx v0.32.1: mlx/random.cpp,
// mlx/backend/cpu/threefry.cpp, mlx/backend/cpu/primitives.cpp
// RandomBits::eval_cpu, mlx/backend/metal/kernels/random.metal,
// python/src/random.cpp)
//
//   - key(seed) = (uint32(seed>>32), uint32(seed)): the high word comes first.
//   - The block function is Threefry-2x32 with 20 rounds (5 groups of 4
//     rotations, key injection after each group), the same as Random123 and
//     JAX.
//   - bits(shape, width=4, key) depends only on the byte count of the output,
//     never on how it is split into dimensions. With W = ceil(bytes/4) words,
//     h = W/2 and odd = W%2, counter pair (i, i+h+odd) for i < h fills word i
//     with the first output and word h+odd+i with the second. An odd W fills
//     word h from counter (h, 0), first output only. CPU and Metal agree.
//     Narrower widths (uint16, uint8) truncate the little-endian byte stream;
//     nothing here needs them, so only width 4 is implemented.
//   - split(key, num) = bits((num, 2), key): key j is words (2j, 2j+1).
//   - uniform(low, high): f = min(float32(bits) / float32(2^32-1),
//     nextafter(1, 0)); out = float32(high-low)*f + low, all in float32. The
//     divisor rounds to 2^32 in float32, so the division is an exact scaling;
//     the clamp keeps results strictly below 1 when float32(bits) rounds up to
//     2^32.
//   - randint(low, high) = clamp(int32(floor(uniform(float32(low),
//     float32(high)))), low, high-1). Before v0.32.1 MLX returned
//     int32(max(u, low)), truncated toward zero and without the clamp to
//     high-1 (RandintTrunc): the two differ for negative draws that are not
//     whole numbers (-1.7 is -2 now, -1 before) and when u rounds up to
//     exactly high, which the older code let through.
//   - normal = sqrt(2)*scale*erfinv(uniform(nextafter(-1, 0), 1)) + loc with
//     MLX's float32 erfinv polynomial (fma steps, float32 log).
//   - gumbel = -log(-log(uniform(0, 1))).
//   - categorical(logits, axis) = argmax(logits + gumbel(logits shape)) along
//     axis, first index on ties. Since v0.32.1, when logits hold a single
//     distribution (every other dimension is 1) and the output is not a
//     scalar, MLX instead inverts the CDF of softmax(logits) with one uniform
//     per sample; Categorical follows that rule.
//   - The global key: seed(s) sets state = key(s); every call without a key
//     splits state into (a, b), keeps a as the new state and uses b. dgtune
//     always passes keys; the tests emulate the global key to check vectors
//     MLX produced with it.
//
// # Exactness
//
// Bits, Split, Uniform and Randint are exact: they use only
// integer arithmetic and correctly rounded float32 operations. Normal and
// Gumbel also use log, which this package computes correctly rounded (from
// float64); MLX's CPU backend calls logf, which glibc and Apple's libm round
// correctly in practice, while Metal's log may differ in the last bit for
// some inputs. The inverse-CDF path of Categorical adds exp and float32 sums
// whose rounding depends on MLX's backend and reduction order; a sample can
// only change when its uniform lands within an ulp of a CDF boundary.
//
// Everything here is float32 and int32, the MLX defaults; half-precision
// dtypes of uniform and normal are not reproduced.
//
// # API
//
//	type Key [2]uint32
//	func NewKey(seed uint64) Key
//	func Hash(k Key, c0, c1 uint32) (uint32, uint32)
//	func Split(k Key, num int) ([]Key, error)
//	func Bits(k Key, n int) ([]uint32, error)
//	func Uniform(k Key, n int, low, high float32) ([]float32, error)
//	func Randint(k Key, n int, low, high int32) ([]int32, error)
//	func RandintTrunc(k Key, n int, low, high int32) ([]int32, error)
//	func Normal(k Key, n int, loc, scale float32) ([]float32, error)
//	func Gumbel(k Key, n int) ([]float32, error)
//	func Categorical(k Key, logits []float32, shape []int, axis int) ([]uint32, error)
//	func Erfinv(x float32) float32
//
// A flat count n stands for any shape with n elements, because MLX's layout
// only depends on the element count. Bad arguments (negative counts, empty
// or inverted ranges, shape/length mismatches) return errors rather than
// mimicking MLX's behaviour on them.
package threefry
