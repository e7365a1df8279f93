package diffusiongemma

import "github.com/dgtune/dgtune/mx"

// Cache holds the encoder's keys and values per layer. Full layers keep every encoded
// position; sliding layers keep the last sliding_window (enough for any later query).
type Cache struct {
	Layers []*LayerCache
	// Offset is the number of tokens encoded so far: the next encoder token's position
	// and the canvas's first position.
	Offset int
}

// LayerCache is one layer's keys and values [B, kv heads, T, head dim], covering
// absolute positions Start .. Start+T−1.
type LayerCache struct {
	K, V  *mx.Array
	Start int
}

// NewCache returns an empty cache for m.
func (m *Model) NewCache() *Cache {
	c := &Cache{Layers: make([]*LayerCache, len(m.Layers))}
	for i := range c.Layers {
		c.Layers[i] = &LayerCache{}
	}
	return c
}

func (lc *LayerCache) append(k, v *mx.Array) {
	if lc.K == nil {
		lc.K, lc.V = k, v
		return
	}
	lc.K = mx.Concatenate([]*mx.Array{lc.K, k}, 2)
	lc.V = mx.Concatenate([]*mx.Array{lc.V, v}, 2)
}

func (lc *LayerCache) trim(window int) {
	if n := lc.K.Dim(2); n > window {
		drop := n - window
		lc.K = mx.SliceAxis(lc.K, 2, drop, n)
		lc.V = mx.SliceAxis(lc.V, 2, drop, n)
		lc.Start += drop
	}
}

// decoderKeyStart is the first of the encoded positions 0..encoded−1 that the decoder
// attends to (§3.6.2): all of them on full layers; on sliding layers only the last
// window−1, the same run for every canvas token. The decoding paths (DecodeHidden,
// fusedAttention) read the rule from here, and the memory estimate runs them. A
// non-positive window (which Validate rejects) reads as no window.
func (t *TextConfig) decoderKeyStart(full bool, encoded int) int {
	if full || t.SlidingWindow <= 0 {
		return 0
	}
	return max(0, encoded-(t.SlidingWindow-1))
}
