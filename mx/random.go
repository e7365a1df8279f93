package mx

import "fmt"

// Key makes a PRNG key (uint32 [2]) from a seed, as mlx.core.random.key.
func Key(e Engine, seed uint64) *Array { return Wrap(e, e.Key(seed)) }

// SplitKey splits a key into num new keys, returned as separate arrays.
func SplitKey(key *Array, num int) []*Array {
	if num <= 0 {
		panic(fmt.Sprintf("mx: split: num %d", num))
	}
	ks := Wrap(key.e, key.e.SplitKey(key.h, num))
	out := make([]*Array, num)
	for i := range out {
		out[i] = Reshape(SliceAxis(ks, 0, i, i+1), 2)
	}
	return out
}

// RandomBits draws uint32 bits of the given shape.
func RandomBits(key *Array, shape ...int) *Array { return Wrap(key.e, key.e.RandomBits(key.h, shape)) }

// Uniform draws from U[low, high).
func Uniform(key *Array, shape []int, low, high float64, dt DType) *Array {
	return Wrap(key.e, key.e.Uniform(key.h, shape, low, high, dt))
}

// Randint draws integers in [low, high).
func Randint(key *Array, shape []int, low, high int64, dt DType) *Array {
	if high <= low {
		panic(fmt.Sprintf("mx: randint: empty range [%d, %d)", low, high))
	}
	return Wrap(key.e, key.e.Randint(key.h, shape, low, high, dt))
}

// Normal draws standard normal values.
func Normal(key *Array, shape []int, dt DType) *Array {
	return Wrap(key.e, key.e.Normal(key.h, shape, dt))
}

// Categorical samples int32 indices along axis from unnormalised log-probabilities.
func Categorical(key, logits *Array, axis int) *Array {
	sameEngine("categorical", key, logits)
	axis = normAxis("categorical", axis, logits.Ndim())
	return Wrap(key.e, key.e.Categorical(key.h, logits.h, axis))
}
