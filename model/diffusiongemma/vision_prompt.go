package diffusiongemma

import (
	"fmt"
	"slices"

	"github.com/dgtune/dgtune/imageproc"
	"github.com/dgtune/dgtune/mx"
)

// ExpandImageTokens replaces the i-th image_token_id of ids (the chat template's
// <|image|> placeholder) by boi, softTokens[i] image tokens and eoi (§3.9, §7.2). The
// number of placeholders must equal len(softTokens).
func ExpandImageTokens(ids []int32, cfg *Config, softTokens []int) ([]int32, error) {
	img := int32(cfg.ImageTokenID)
	n, extra := 0, 0
	for _, id := range ids {
		if id == img {
			n++
		}
	}
	if n != len(softTokens) {
		return nil, fmt.Errorf("diffusiongemma: prompt has %d image placeholder(s) (id %d) but %d image(s) were given", n, img, len(softTokens))
	}
	for i, k := range softTokens {
		if k <= 0 {
			return nil, fmt.Errorf("diffusiongemma: image %d has %d soft tokens, want at least 1", i, k)
		}
		extra += k + 1 // k image tokens + boi + eoi replace one placeholder
	}
	out := make([]int32, 0, len(ids)+extra)
	next := 0
	for _, id := range ids {
		if id != img {
			out = append(out, id)
			continue
		}
		out = append(out, int32(cfg.BOITokenID))
		for range softTokens[next] {
			out = append(out, img)
		}
		out = append(out, int32(cfg.EOITokenID))
		next++
	}
	return out, nil
}

// imageBlocks labels each position of ids with the index of the contiguous run of image
// tokens it belongs to, −1 for other tokens, and returns the run lengths.
func imageBlocks(ids []int32, imageID int32) (blocks []int, lengths []int) {
	blocks = make([]int, len(ids))
	for i, id := range ids {
		switch {
		case id != imageID:
			blocks[i] = -1
		case i > 0 && ids[i-1] == imageID:
			blocks[i] = blocks[i-1]
			lengths[len(lengths)-1]++
		default:
			blocks[i] = len(lengths)
			lengths = append(lengths, 1)
		}
	}
	return blocks, lengths
}

// Images preprocesses image files with the config's ImageOptions, in order.
func (m *Model) Images(srcs []*imageproc.Source) ([]*imageproc.Image, error) {
	if len(srcs) == 0 {
		return nil, nil
	}
	o, err := m.Config.ImageOptions()
	if err != nil {
		return nil, err
	}
	out := make([]*imageproc.Image, len(srcs))
	for i, s := range srcs {
		if out[i], err = s.Preprocess(o); err != nil {
			return nil, fmt.Errorf("diffusiongemma: image %d: %w", i, err)
		}
	}
	return out, nil
}

// SoftTokens returns each image's soft-token count under the config's ImageOptions (from
// the header sizes, without decoding), for ExpandImageTokens.
func (c *Config) SoftTokens(srcs []*imageproc.Source) ([]int, error) {
	if len(srcs) == 0 {
		return nil, nil
	}
	o, err := c.ImageOptions()
	if err != nil {
		return nil, err
	}
	out := make([]int, len(srcs))
	for i, s := range srcs {
		if out[i], err = s.SoftTokens(o); err != nil {
			return nil, fmt.Errorf("diffusiongemma: image %d: %w", i, err)
		}
	}
	return out, nil
}

// embedPrompt is the image prompt's encoder input (§3.9): image tokens embedded as the
// pad token times √H, then overwritten in order by the vision features (not scaled).
// feats [N, H] has one row per image token of ids [1, S].
func (m *Model) embedPrompt(ids []int32, feats *mx.Array) *mx.Array {
	e := m.Engine
	img := int32(m.Config.ImageTokenID)
	text := make([]int32, len(ids))
	gather := make([]int32, len(ids))
	isImage := make([]bool, len(ids))
	next := int32(0)
	for i, id := range ids {
		text[i], gather[i] = id, 0
		if id == img {
			text[i] = int32(m.Config.TextConfig.PadTokenID)
			gather[i], isImage[i] = next, true
			next++
		}
	}
	h := m.embedTokens(mx.FromInt32(e, text, 1, len(ids)))
	scattered := mx.ExpandDims(mx.Take(mx.AsType(feats, h.DType()), mx.FromInt32(e, gather, len(ids)), 0), 0)
	return mx.Where(mx.FromBool(e, isImage, 1, len(ids), 1), scattered, h)
}

// EncodeWithImages is Encode for a prompt holding image blocks (ExpandImageTokens): the
// k-th run of image tokens must be exactly as long as images[k]'s soft-token count. Image
// tokens take the vision features as embeddings, and within each block the encoder
// attends bidirectionally (§3.5.3). Images are only valid in the first prefill of a cache,
// and only for batch 1. Without images it is Encode.
func (m *Model) EncodeWithImages(ids *mx.Array, images []*imageproc.Image, c *Cache) error {
	_, err := m.encodeWithImages(ids, images, c)
	return err
}

// encodeWithImages is EncodeWithImages returning the encoder's last hidden states before
// the final norm (nil for an empty chunk).
func (m *Model) encodeWithImages(ids *mx.Array, images []*imageproc.Image, c *Cache) (*mx.Array, error) {
	if len(images) == 0 {
		if err := m.checkNoImages(ids, c); err != nil {
			return nil, err
		}
		if ids.Dim(1) == 0 {
			return nil, nil
		}
		return m.encode(m.embedTokens(ids), c, nil), nil
	}
	if ids.Ndim() != 2 || ids.Dim(0) != 1 {
		return nil, fmt.Errorf("diffusiongemma: image prompts need ids of shape [1, S], got %v", ids.Shape())
	}
	if c.Offset != 0 {
		return nil, fmt.Errorf("diffusiongemma: images are only allowed in the first prefill (the cache already holds %d tokens)", c.Offset)
	}
	host := ids.Int32s()
	blocks, err := m.checkImagePrompt(host, images)
	if err != nil {
		return nil, err
	}
	feats := make([]*mx.Array, len(images))
	for i, img := range images {
		if feats[i], err = m.Vision.Features(img); err != nil {
			return nil, fmt.Errorf("image %d: %w", i, err)
		}
	}
	if m.Config.TextConfig.UseBidirectionalAttention != "vision" {
		blocks = nil // a purely causal encoder has no image overlay
	}
	return m.encode(m.embedPrompt(host, mx.Concatenate(feats, 0)), c, blocks), nil
}

// ForwardWithImages is Forward for an image prompt: fresh caches, EncodeWithImages over
// prompt [1, N], decoder over canvas [1, L] without self-conditioning → logits [1, L, V].
func (m *Model) ForwardWithImages(prompt, canvas *mx.Array, images []*imageproc.Image) (*mx.Array, error) {
	c := m.NewCache()
	if err := m.EncodeWithImages(prompt, images, c); err != nil {
		return nil, err
	}
	return m.Decode(canvas, c, nil), nil
}

// checkImagePrompt checks that the model has a tower and that the image blocks of ids
// match the images one for one, block length = soft-token count, and returns the blocks.
func (m *Model) checkImagePrompt(ids []int32, images []*imageproc.Image) ([]int, error) {
	if m.Vision == nil {
		return nil, fmt.Errorf("diffusiongemma: %d image(s) given but the checkpoint has no vision tower", len(images))
	}
	blocks, lengths := imageBlocks(ids, int32(m.Config.ImageTokenID))
	if len(lengths) != len(images) {
		return nil, fmt.Errorf("diffusiongemma: prompt has %d image block(s) but %d image(s) were given", len(lengths), len(images))
	}
	v := m.Vision.Config
	for i, img := range images {
		if err := m.Vision.checkImage(img); err != nil {
			return nil, fmt.Errorf("image %d: %w", i, err)
		}
		n := imageproc.SoftTokens(img.Height, img.Width, imageproc.Options{PatchSize: v.PatchSize, PoolingKernel: v.PoolingKernelSize})
		if n != lengths[i] {
			return nil, fmt.Errorf("diffusiongemma: image %d (%d×%d) gives %d soft tokens but its block in the prompt has %d image tokens",
				i, img.Height, img.Width, n, lengths[i])
		}
	}
	return blocks, nil
}

// GenerateWithImages is Generate for a prompt holding image blocks (see
// EncodeWithImages): the images enter the first prefill only; later blocks re-encode
// generated text as usual.
func (m *Model) GenerateWithImages(prompt []int32, images []*imageproc.Image, opt GenerateOptions) (*GenerateResult, error) {
	var err error
	if len(images) > 0 {
		_, err = m.checkImagePrompt(prompt, images)
	} else if m.Vision != nil && slices.Contains(prompt, int32(m.Config.ImageTokenID)) {
		err = m.checkNoImages(mx.FromInt32(m.Engine, prompt, 1, len(prompt)), &Cache{})
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadGenerateOptions, err)
	}
	return m.generate(prompt, images, opt)
}

// checkNoImages reports a first prefill that holds image tokens while no images were given,
// on a model with a vision tower: such a prompt was expanded for images that got lost on
// the way, and encoding it as text would give quietly wrong results. Later passes (block
// continuation over generated text) are not checked: a model may generate any id.
func (m *Model) checkNoImages(ids *mx.Array, c *Cache) error {
	if m.Vision == nil || c.Offset != 0 {
		return nil
	}
	img := int32(m.Config.ImageTokenID)
	n := 0
	for _, id := range ids.Int32s() {
		if id == img {
			n++
		}
	}
	if n > 0 {
		return fmt.Errorf("diffusiongemma: the prompt holds %d image tokens (id %d) but no images were given: pass them to EncodeWithImages, ForwardWithImages or GenerateWithImages", n, img)
	}
	return nil
}
