package threefry

import (
	"errors"
	"fmt"
	"math/bits"
)

// Key is an MLX PRNG key: the uint32[2] array mlx.core.random.key returns.
type Key [2]uint32

// ErrNegativeCount is returned when a sample or key count is below zero.
var ErrNegativeCount = errors.New("threefry: negative count")

// NewKey mirrors mlx.core.random.key: the high half of the seed is the first
// word, so seeds below 2^32 give (0, seed).
func NewKey(seed uint64) Key {
	return Key{uint32(seed >> 32), uint32(seed)}
}

// rotations are Threefry-2x32's rotation constants, alternating between the
// two sets every four rounds.
var rotations = [2][4]uint32{{13, 15, 26, 6}, {17, 29, 16, 24}}

// Hash is the Threefry-2x32 block function with 20 rounds, keyed by k and
// applied to the counter (c0, c1). 0x1BD11BDA is Threefish's key-schedule
// parity constant: the third schedule word makes the XOR of all three
// equal to it.
func Hash(k Key, c0, c1 uint32) (uint32, uint32) {
	ks := [3]uint32{k[0], k[1], k[0] ^ k[1] ^ 0x1BD11BDA}
	x0, x1 := c0+ks[0], c1+ks[1]
	for i := 0; i < 5; i++ {
		for _, r := range rotations[i%2] {
			x0 += x1
			x1 = bits.RotateLeft32(x1, int(r))
			x1 ^= x0
		}
		x0 += ks[(i+1)%3]
		x1 += ks[(i+2)%3] + uint32(i) + 1
	}
	return x0, x1
}

// words fills w with the uint32 stream MLX's RandomBits kernel writes for a
// single key: the two outputs of counter (i, i+h+odd) land h+odd words apart,
// and an odd count takes its middle word from counter (h, 0).
func words(k Key, w []uint32) {
	h := len(w) / 2
	odd := len(w) % 2
	for i := 0; i < h; i++ {
		w[i], w[h+odd+i] = Hash(k, uint32(i), uint32(i+h+odd))
	}
	if odd == 1 {
		w[h], _ = Hash(k, uint32(h), 0)
	}
}

func checkCount(what string, n int) error {
	if n < 0 {
		return fmt.Errorf("%s: count %d: %w", what, n, ErrNegativeCount)
	}
	return nil
}

// Bits mirrors mlx.core.random.bits(shape, width=4, key) for any shape with
// n elements, flattened in row-major order.
func Bits(k Key, n int) ([]uint32, error) {
	if err := checkCount("threefry: bits", n); err != nil {
		return nil, err
	}
	w := make([]uint32, n)
	words(k, w)
	return w, nil
}

// Split mirrors mlx.core.random.split(key, num): num keys taken row by row
// from bits((num, 2), key).
func Split(k Key, num int) ([]Key, error) {
	if err := checkCount("threefry: split", num); err != nil {
		return nil, err
	}
	w := make([]uint32, 2*num)
	words(k, w)
	out := make([]Key, num)
	for j := range out {
		out[j] = Key{w[2*j], w[2*j+1]}
	}
	return out, nil
}
