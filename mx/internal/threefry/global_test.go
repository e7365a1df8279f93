package threefry

// Global emulates MLX's default key sequence, the state behind every
// mlx.core.random call made without a key: the tests use it to reproduce
// vectors that MLX made with its global state (mx.random.seed then a keyless
// call). MLX keeps one per thread; a Global
// is a plain value owned by its caller and is not safe for concurrent use.
type Global struct {
	state Key
}

// NewGlobal is the state right after mlx.core.random.seed(seed).
func NewGlobal(seed uint64) *Global {
	return &Global{state: NewKey(seed)}
}

// Seed mirrors mlx.core.random.seed.
func (g *Global) Seed(seed uint64) { g.state = NewKey(seed) }

// Next returns the key one keyless MLX call consumes: the state is split in
// two, the first half becomes the new state and the second half is used.
func (g *Global) Next() Key {
	keep, use := split2(g.state)
	g.state = keep
	return use
}

// State is the current key, what mlx.core.random.state[0] holds.
func (g *Global) State() Key { return g.state }

// SetState replaces the current key, like assigning mlx.core.random.state[0].
func (g *Global) SetState(k Key) { g.state = k }

// split2 is split(key) with num 2, the pair form MLX's key sequence uses.
func split2(k Key) (Key, Key) {
	var w [4]uint32
	words(k, w[:])
	return Key{w[0], w[1]}, Key{w[2], w[3]}
}
