package diffusiongemma

import (
	"github.com/dgtune/dgtune/imageproc"
	"github.com/dgtune/dgtune/mx"
)

// The encoder as a causal language model. Generation and the reference objective use the
// encoder only for the keys and values it caches; NeMo AutoModel's DiffusionGemma recipe
// also trains it as a causal LM, with next-token cross-entropy over the clean sequence
// scored through the final norm and the tied head (transformers exposes the same hidden
// states as encoder_last_hidden_state).

// EncodeHidden is EncodeWithImages (images only in a first prefill; nil for text) that
// also returns the encoder's final-normed hidden states [B, S, H] — decoder.norm applied
// to the last layer's output — or nil when ids is empty.
func (m *Model) EncodeHidden(ids *mx.Array, images []*imageproc.Image, c *Cache) (*mx.Array, error) {
	h, err := m.encodeWithImages(ids, images, c)
	if err != nil || h == nil {
		return nil, err
	}
	return mx.RMSNorm(h, m.Norm, m.eps()), nil
}

// Logits applies the tied head and the float32 softcap to final-normed hidden states
// [.., H] (the decoder's or EncodeHidden's) → [.., V].
func (m *Model) Logits(hidden *mx.Array) *mx.Array { return m.head(hidden) }

// Clone returns a cache holding the same keys and values that later encoder passes can
// extend without changing c (arrays are immutable; only the per-layer bookkeeping is
// copied).
func (c *Cache) Clone() *Cache {
	out := &Cache{Layers: make([]*LayerCache, len(c.Layers)), Offset: c.Offset}
	for i, lc := range c.Layers {
		cp := *lc
		out.Layers[i] = &cp
	}
	return out
}
