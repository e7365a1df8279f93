package session

// DeriveSeed mixes parts into one 64-bit seed with SplitMix64's finaliser, so that
// neighbouring (step, example) pairs get unrelated keys. Each random stream of a run
// passes its own purpose as the second part (train's and evaluate's purposes differ).
func DeriveSeed(parts ...uint64) uint64 {
	h := uint64(0x9e3779b97f4a7c15)
	for _, p := range parts {
		h ^= p + 0x9e3779b97f4a7c15 + (h << 6) + (h >> 2)
		h = mix64(h)
	}
	return h
}

func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}
