package diffusiongemma

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/color"
	pngenc "image/png"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/dgtune/dgtune/imageproc"
	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
)

// synthVisionModel is synthModel for the tiny preset with the synthetic vision tower.
func synthVisionModel(tb testing.TB, e mx.Engine, bits string, seed uint64) (*Model, map[string]*mx.Array) {
	tb.Helper()
	cfg, w := synthWeights(tb, e, PresetTiny, bits, seed, WithSyntheticVision)
	m, err := Build(e, cfg, w, LoadOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	if m.Vision == nil {
		tb.Fatal("model has no vision tower")
	}
	return m, w
}

// testImage is a w×h picture whose pixels depend on (x, y) and on variant.
func testImage(w, h, variant int) image.Image {
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.SetNRGBA(x, y, color.NRGBA{uint8(x*7 + variant*40), uint8(y*5 + variant*90), uint8((x + y + variant*13) * 3), 255})
		}
	}
	return img
}

// flatImage is a single-colour w×h picture.
func flatImage(w, h int, c color.NRGBA) image.Image {
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.SetNRGBA(x, y, c)
		}
	}
	return img
}

func preprocessed(tb testing.TB, m *Model, img image.Image) *imageproc.Image {
	tb.Helper()
	o, err := m.Config.ImageOptions()
	if err != nil {
		tb.Fatal(err)
	}
	var png bytes.Buffer
	if err := pngenc.Encode(&png, img); err != nil {
		tb.Fatal(err)
	}
	src, err := imageproc.NewSource("test.png", png.Bytes())
	if err != nil {
		tb.Fatal(err)
	}
	im, err := src.Preprocess(o)
	if err != nil {
		tb.Fatal(err)
	}
	return im
}

// TestVisionRopeInv: head_dim d splits into halves of d/2, each with d/4 pairs turning at
// θ^(−2i/(d/2)). For the real tower (d = 72, θ = 100): 18 pairs, pair 1 at 100^(−1/18).
func TestVisionRopeInv(t *testing.T) {
	inv := visionRopeInv(72, 100)
	if len(inv) != 18 || inv[0] != 1 || math.Abs(inv[1]-math.Pow(100, -2.0/36)) > 1e-15 {
		t.Errorf("visionRopeInv(72, 100) = %v, want 18 values starting 1, 100^(−1/18)", inv)
	}
	if got := visionRopeInv(8, 100); len(got) != 2 || got[0] != 1 || math.Abs(got[1]-0.1) > 1e-15 {
		t.Errorf("visionRopeInv(8, 100) = %v, want [1 0.1]", got)
	}
}

// TestRope2DIndices rotates the eight unit vectors of an 8-dim head at patch (x=2, y=5).
// Dims 0..3 are the x half (pairs (0,2) and (1,3), frequencies 1 and 100^(−2/4) = 0.1),
// dims 4..7 the y half (pairs (4,6) and (5,7)). So e0 → cos2·e0 + sin2·e2,
// e2 → −sin2·e0 + cos2·e2, e1 → cos0.2·e1 + sin0.2·e3, e4 → cos5·e4 + sin5·e6,
// e7 → −sin0.5·e5 + cos0.5·e7: no x-half vector ever leaks into the y half.
func TestRope2DIndices(t *testing.T) {
	e := mxtest.Go(t)
	cos, sin := ropeTables(e, []int32{2}, []int32{5}, visionRopeInv(8, 100), 8)
	x := mx.Reshape(handIdentity(e, 8), 1, 1, 8, 8) // head h holds e_h
	got := rope2D(x, cos, sin).Float32s()
	c, s := math.Cos, math.Sin
	want := map[int]map[int]float64{
		0: {0: c(2), 2: s(2)},
		2: {0: -s(2), 2: c(2)},
		1: {1: c(0.2), 3: s(0.2)},
		3: {1: -s(0.2), 3: c(0.2)},
		4: {4: c(5), 6: s(5)},
		6: {4: -s(5), 6: c(5)},
		5: {5: c(0.5), 7: s(0.5)},
		7: {5: -s(0.5), 7: c(0.5)},
	}
	for h, dims := range want {
		for d := range 8 {
			w := dims[d]
			if g := float64(got[h*8+d]); math.Abs(g-w) > 1e-6 {
				t.Errorf("rope2D(e%d)[%d] = %.6f, want %.6f", h, d, g, w)
			}
		}
	}
}

// TestPatchify: a 32×48 (h×w) image has 2×3 patches numbered y·3 + x; feature
// (row r, column c, channel ch) of a patch is at (r·16 + c)·3 + ch and holds 2(x − 0.5).
func TestPatchify(t *testing.T) {
	img := &imageproc.Image{Height: 32, Width: 48, Pixels: make([]float32, 3*32*48)}
	for i := range img.Pixels {
		img.Pixels[i] = float32(i%251) / 251
	}
	feat, xs, ys := patchify(img, 16)
	if !slices.Equal(xs, []int32{0, 1, 2, 0, 1, 2}) || !slices.Equal(ys, []int32{0, 0, 0, 1, 1, 1}) {
		t.Fatalf("positions x %v y %v, want x 0,1,2,0,1,2 y 0,0,0,1,1,1", xs, ys)
	}
	const n = 3 * 16 * 16
	if len(feat) != 6*n {
		t.Fatalf("%d features, want %d", len(feat), 6*n)
	}
	for _, c := range []struct{ patch, r, col, ch, y, x int }{
		{4, 2, 3, 1, 16 + 2, 16 + 3}, // patch (x=1, y=1)
		{2, 15, 0, 2, 15, 32},        // patch (x=2, y=0)
		{0, 0, 0, 0, 0, 0},
	} {
		got := feat[c.patch*n+(c.r*16+c.col)*3+c.ch]
		if want := 2 * (img.At(c.ch, c.y, c.x) - 0.5); got != want {
			t.Errorf("patch %d feature (r %d, c %d, ch %d) = %v, want 2(pixel(%d,%d,%d) − 0.5) = %v", c.patch, c.r, c.col, c.ch, got, c.ch, c.y, c.x, want)
		}
	}
}

// TestPoolPatches: with row p of h equal to (p, 2p), each output row is the mean over its
// 3×3 window. A 3×6 grid (patch p = 6y + x) has windows x < 3 = {0,1,2,6,7,8,12,13,14}
// (mean 7) and x ≥ 3 (mean 10); a 6×3 grid has windows y < 3 = 0..8 (mean 4) and y ≥ 3 =
// 9..17 (mean 13).
func TestPoolPatches(t *testing.T) {
	e := mxtest.Go(t)
	h := make([]float32, 36)
	for p := range 18 {
		h[2*p], h[2*p+1] = float32(p), float32(2*p)
	}
	for _, c := range []struct {
		ph, pw int
		want   []float32
	}{{3, 6, []float32{7, 14, 10, 20}}, {6, 3, []float32{4, 8, 13, 26}}} {
		got := poolPatches(mx.FromFloat32(e, h, 1, 18, 2), c.ph, c.pw, 3).Float32s()
		wantClose(t, "pool", got, c.want, 1e-6)
	}
}

// TestEncoderMaskOverlay: prompt [t t I I I t J J t] (two image blocks). Text is causal;
// image tokens of one block see each other in both directions; nothing else changes.
// With a sliding window of 2 the window applies first (a token sees itself and one
// predecessor), then the overlay restores every same-block pair.
func TestEncoderMaskOverlay(t *testing.T) {
	e := mxtest.Go(t)
	blocks := []int{-1, -1, 0, 0, 0, -1, 1, 1, -1}
	for _, c := range []struct {
		name   string
		full   bool
		window int
		want   []string // row i: which keys query i may see
	}{
		{"full", true, 0, []string{
			"x........",
			"xx.......",
			"xxxxx....",
			"xxxxx....",
			"xxxxx....",
			"xxxxxx...",
			"xxxxxxxx.",
			"xxxxxxxx.",
			"xxxxxxxxx",
		}},
		{"sliding 2", false, 2, []string{
			"x........",
			"xx.......",
			".xxxx....",
			"..xxx....",
			"..xxx....",
			"....xx...",
			".....xxx.",
			"......xx.",
			".......xx",
		}},
	} {
		got := encoderMaskBlocks(e, 0, 9, 0, 9, c.full, c.window, blocks).Bools()
		for i, row := range c.want {
			var g strings.Builder
			for j := range 9 {
				if got[i*9+j] {
					g.WriteByte('x')
				} else {
					g.WriteByte('.')
				}
			}
			if g.String() != row {
				t.Errorf("%s: query %d sees %s, want %s", c.name, i, g.String(), row)
			}
		}
	}
}

func TestExpandImageTokens(t *testing.T) {
	cfg, err := Preset(PresetTiny)
	if err != nil {
		t.Fatal(err)
	}
	boi, img, eoi := int32(cfg.BOITokenID), int32(cfg.ImageTokenID), int32(cfg.EOITokenID)
	got, err := ExpandImageTokens([]int32{2, img, 7, img, 8}, cfg, []int{2, 3})
	if err != nil {
		t.Fatal(err)
	}
	want := []int32{2, boi, img, img, eoi, 7, boi, img, img, img, eoi, 8}
	if !slices.Equal(got, want) {
		t.Errorf("ExpandImageTokens = %v, want %v", got, want)
	}
	blocks, lengths := imageBlocks(got, img)
	if !slices.Equal(lengths, []int{2, 3}) || !slices.Equal(blocks, []int{-1, -1, 0, 0, -1, -1, -1, 1, 1, 1, -1, -1}) {
		t.Errorf("imageBlocks = %v, %v", blocks, lengths)
	}
	for _, c := range []struct {
		ids  []int32
		soft []int
	}{
		{[]int32{2, img}, nil},
		{[]int32{2, 7}, []int{4}},
		{[]int32{img}, []int{0}},
	} {
		if _, err := ExpandImageTokens(c.ids, cfg, c.soft); err == nil {
			t.Errorf("ExpandImageTokens(%v, %v) succeeded", c.ids, c.soft)
		}
	}
}

// TestEmbedPromptMerge: image positions carry the feature rows in order and unscaled;
// every other position is E[id]·√H.
func TestEmbedPromptMerge(t *testing.T) {
	e := mxtest.Go(t)
	m, _ := synthVisionModel(t, e, BitsNone, 3)
	img := int32(m.Config.ImageTokenID)
	ids := []int32{2, 9, img, img, img, 11}
	feats := make([]float32, 3*64)
	for i := range feats {
		feats[i] = float32(i) * 0.01
	}
	got := m.embedPrompt(ids, mx.FromFloat32(e, feats, 3, 64)).Float32s()
	scale := float32(math.Sqrt(64))
	table := m.Embed.Dense.Float32s()
	for pos, id := range ids {
		row := got[pos*64 : (pos+1)*64]
		var want []float32
		if id == img {
			k := pos - 2
			want = feats[k*64 : (k+1)*64]
		} else {
			for _, v := range table[int(id)*64 : int(id+1)*64] {
				want = append(want, v*scale)
			}
		}
		wantClose(t, "embedding row", row, want, 1e-6)
	}
}

// TestVisionFeatures: identical images give bit-identical features, different images
// (pattern vs pattern, flat vs flat) give different ones; the shape is [n_soft, text H].
func TestVisionFeatures(t *testing.T) {
	e := mxtest.Go(t)
	m, _ := synthVisionModel(t, e, BitsNone, 5)
	feat := func(img image.Image) []float32 {
		f, err := m.Vision.Features(preprocessed(t, m, img))
		if err != nil {
			t.Fatal(err)
		}
		if s := f.Shape(); !slices.Equal(s, []int{16, 64}) {
			t.Fatalf("features %v, want [16 64]", s)
		}
		return f.Float32s()
	}
	a1, a2 := feat(testImage(100, 100, 0)), feat(testImage(100, 100, 0))
	wantIdentical(t, "same image", a1, a2)
	for name, other := range map[string][]float32{
		"other pattern": feat(testImage(100, 100, 1)),
		"red":           feat(flatImage(60, 60, color.NRGBA{220, 20, 20, 255})),
	} {
		if d := maxAbsDiff(a1, other); d < 1e-2 {
			t.Errorf("%s: features differ by only %g", name, d)
		}
	}
	red, blue := feat(flatImage(60, 60, color.NRGBA{220, 20, 20, 255})), feat(flatImage(60, 60, color.NRGBA{20, 20, 220, 255}))
	if d := maxAbsDiff(red, blue); d < 1e-2 {
		t.Errorf("red vs blue features differ by only %g", d)
	}
	// 64 wide, 128 high: factor √(36864/8192) = 2.121 under the 16-token budget, height
	// 271.5/48 → 240, width 135.8/48 → 96; 15·6 patches → 10 soft tokens.
	f, err := m.Vision.Features(preprocessed(t, m, testImage(64, 128, 2)))
	if err != nil {
		t.Fatal(err)
	}
	if f.Dim(0) != 10 {
		t.Errorf("64×128 image gives %d soft tokens, want 10", f.Dim(0))
	}
}

// TestVisionQuantizedTwin compares a quantized tower (and the full image forward) with
// its dequantized float32 twin: same weight values, so only summation order differs.
func TestVisionQuantizedTwin(t *testing.T) {
	e := mxtest.Go(t)
	for _, bits := range []string{Bits4, Bits8} {
		t.Run(bits, func(t *testing.T) {
			m, w := synthVisionModel(t, e, bits, 9)
			if _, ok := m.Vision.InputProj.(*Quantized); !ok {
				t.Fatal("input_proj is not quantized")
			}
			if _, ok := m.Vision.Layers[0].Q.(*Quantized); !ok {
				t.Fatal("vision q_proj is not quantized")
			}
			twinCfg, dense := dequantizedTwin(t, m.Config, w)
			twin, err := Build(e, twinCfg, dense, LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := twin.Vision.InputProj.(*Dense); !ok {
				t.Fatal("twin input_proj is not dense")
			}
			img := preprocessed(t, m, testImage(100, 80, 3))
			fq, err := m.Vision.Features(img)
			if err != nil {
				t.Fatal(err)
			}
			fd, err := twin.Vision.Features(img)
			if err != nil {
				t.Fatal(err)
			}
			wantClose(t, "features", fq.Float32s(), fd.Float32s(), 2e-4)
			prompt, canvas := imagePrompt(t, m, []*imageproc.Image{img}), mx.FromInt32(e, []int32{5, 9, 300, 4}, 1, 4)
			lq, err := m.ForwardWithImages(prompt, canvas, []*imageproc.Image{img})
			if err != nil {
				t.Fatal(err)
			}
			ld, err := twin.ForwardWithImages(prompt, canvas, []*imageproc.Image{img})
			if err != nil {
				t.Fatal(err)
			}
			wantClose(t, "logits", lq.Float32s(), ld.Float32s(), 2e-4)
		})
	}
}

// imagePrompt is a chat-like prompt with one placeholder per image, expanded.
func imagePrompt(tb testing.TB, m *Model, images []*imageproc.Image) *mx.Array {
	tb.Helper()
	o, err := m.Config.ImageOptions()
	if err != nil {
		tb.Fatal(err)
	}
	ids := []int32{2, 105, 30, 31}
	var soft []int
	for _, im := range images {
		ids = append(ids, int32(m.Config.ImageTokenID))
		soft = append(soft, im.SoftTokens(o))
	}
	ids = append(ids, 40, 41, 106, 107, 105, 50, 107)
	full, err := ExpandImageTokens(ids, m.Config, soft)
	if err != nil {
		tb.Fatal(err)
	}
	return mx.FromInt32(m.Engine, full, 1, len(full))
}

// TestImagePrefill checks the image prefill through the encoder caches:
//   - text before the image block never sees it: its keys are identical for two images;
//   - text after it does: its keys differ;
//   - the overlay acts inside the block only: turning use_bidirectional_attention off
//     leaves the keys of the text before the block unchanged but changes the first image
//     token's, which with the overlay also attends to the 15 image tokens after it.
func TestImagePrefill(t *testing.T) {
	e := mxtest.Go(t)
	m, _ := synthVisionModel(t, e, BitsNone, 11)
	a, b := preprocessed(t, m, testImage(90, 90, 0)), preprocessed(t, m, testImage(90, 90, 4))
	prompt := imagePrompt(t, m, []*imageproc.Image{a})
	const before, first = 5, 5 // ids 0..4 are text and boi; the block starts at 5
	keys := func(m *Model, img *imageproc.Image) []float32 {
		c := m.NewCache()
		if err := m.EncodeWithImages(prompt, []*imageproc.Image{img}, c); err != nil {
			t.Fatal(err)
		}
		return c.Layers[1].K.Float32s() // full layer: every position is kept
	}
	ka, kb := keys(m, a), keys(m, b)
	kvHeads, hd := m.Layers[1].KVHeads, m.Layers[1].HeadDim
	s := prompt.Dim(1)
	at := func(k []float32, pos int) []float32 {
		var out []float32
		for h := range kvHeads {
			out = append(out, k[(h*s+pos)*hd:(h*s+pos+1)*hd]...)
		}
		return out
	}
	for p := range before {
		wantIdentical(t, "text key before the image", at(ka, p), at(kb, p))
	}
	// Position first+16 is eoi, the first text token after the block; layer 0 slides
	// over 8 positions, so it still sees image tokens there.
	if d := maxAbsDiff(at(ka, first+16), at(kb, first+16)); d < 1e-4 {
		t.Errorf("key after the image block differs by only %g between images", d)
	}
	causal := *m
	cc := *m.Config
	cc.TextConfig.UseBidirectionalAttention = ""
	causal.Config = &cc
	kc := keys(&causal, a)
	for p := range before {
		wantIdentical(t, "text key without overlay", at(kc, p), at(ka, p))
	}
	// Layer 1's keys at the first image token come from layer 0's output there, which
	// with the overlay attends to the whole 16-token block.
	if d := maxAbsDiff(at(kc, first), at(ka, first)); d < 1e-5 {
		t.Errorf("overlay changed the first image token's key by only %g", d)
	}
}

// TestTextUnchangedByTower: the tower's tensors come from their own random stream, so a
// model with a tower has the same text weights, and text-only prompts give the same
// logits through Forward and through ForwardWithImages without images.
func TestTextUnchangedByTower(t *testing.T) {
	e := mxtest.Go(t)
	plain, _ := synthModel(t, e, PresetTiny, BitsNone, 13)
	vis, _ := synthVisionModel(t, e, BitsNone, 13)
	prompt := mx.FromInt32(e, []int32{2, 105, 7, 8, 9, 106, 107}, 1, 7)
	canvas := mx.FromInt32(e, []int32{5, 9, 300, 4}, 1, 4)
	want := plain.Forward(prompt, canvas).Float32s()
	wantIdentical(t, "Forward with a tower", vis.Forward(prompt, canvas).Float32s(), want)
	got, err := vis.ForwardWithImages(prompt, canvas, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantIdentical(t, "ForwardWithImages without images", got.Float32s(), want)
}

func TestEncodeWithImagesErrors(t *testing.T) {
	e := mxtest.Go(t)
	m, _ := synthVisionModel(t, e, BitsNone, 15)
	plain, _ := synthModel(t, e, PresetTiny, BitsNone, 15)
	img := preprocessed(t, m, testImage(50, 50, 0))
	small := preprocessed(t, m, testImage(64, 128, 0)) // 10 soft tokens
	prompt := imagePrompt(t, m, []*imageproc.Image{img})
	odd := &imageproc.Image{Height: 50, Width: 48, Pixels: make([]float32, 3*50*48)}
	for _, c := range []struct {
		name   string
		m      *Model
		prompt *mx.Array
		images []*imageproc.Image
		prep   bool
		want   string
	}{
		{"no tower", plain, prompt, []*imageproc.Image{img}, false, "no vision tower"},
		{"two images, one block", m, prompt, []*imageproc.Image{img, img}, false, "1 image block(s) but 2 image(s)"},
		{"wrong block length", m, prompt, []*imageproc.Image{small}, false, "gives 10 soft tokens but its block in the prompt has 16"},
		{"odd size", m, prompt, []*imageproc.Image{odd}, false, "multiples of patch_size·pooling_kernel_size = 48"},
		{"batch 2", m, mx.FromInt32(e, make([]int32, 4), 2, 2), []*imageproc.Image{img}, false, "shape [1, S]"},
		{"continuation", m, prompt, []*imageproc.Image{img}, true, "first prefill"},
	} {
		cache := c.m.NewCache()
		if c.prep {
			c.m.Encode(mx.FromInt32(e, []int32{2, 3}, 1, 2), cache)
		}
		err := c.m.EncodeWithImages(c.prompt, c.images, cache)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: EncodeWithImages = %v, want an error containing %q", c.name, err, c.want)
		}
	}
	// Image tokens without images: an error from EncodeWithImages, a panic from Encode.
	if err := m.EncodeWithImages(prompt, nil, m.NewCache()); err == nil || !strings.Contains(err.Error(), "holds 16 image tokens") {
		t.Errorf("EncodeWithImages(image prompt, no images) = %v, want an error about 16 image tokens", err)
	}
	func() {
		defer func() {
			if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "no images were given") {
				t.Errorf("Encode(image prompt) recovered %v, want a panic about missing images", r)
			}
		}()
		m.Encode(prompt, m.NewCache())
	}()
	if _, err := m.Generate(prompt.Int32s(), DefaultGenerateOptions(m.Config)); !errors.Is(err, ErrBadGenerateOptions) || !strings.Contains(err.Error(), "no images were given") {
		t.Errorf("Generate(image prompt) = %v, want ErrBadGenerateOptions about missing images", err)
	}
	if _, err := m.GenerateWithImages(prompt.Int32s(), []*imageproc.Image{small}, DefaultGenerateOptions(m.Config)); !errors.Is(err, ErrBadGenerateOptions) {
		t.Errorf("GenerateWithImages with a wrong block = %v, want ErrBadGenerateOptions", err)
	}
}

// TestBuildVisionErrors: with a vision_config, a partial tower is reported tensor by
// tensor; a config without vision_config ignores the same tensors; an unsupported
// clipped-linear tower is refused by name.
func TestBuildVisionErrors(t *testing.T) {
	e := mxtest.Go(t)
	fresh := func() (*Config, map[string]*mx.Array) {
		return synthWeights(t, e, PresetTiny, BitsNone, 17, WithSyntheticVision)
	}
	l1 := VisionLayerPrefix(1) + "."
	for _, c := range []struct {
		name string
		edit func(*Config, map[string]*mx.Array)
		want []string
	}{
		{"missing", func(_ *Config, w map[string]*mx.Array) {
			delete(w, l1+"mlp.down_proj.linear.weight")
			delete(w, VisionTowerPrefix+".std_scale")
		}, []string{"missing tensor " + l1 + "mlp.down_proj.linear.weight", "missing tensor " + VisionTowerPrefix + ".std_scale"}},
		{"shape", func(_ *Config, w map[string]*mx.Array) {
			w[VisionTowerPrefix+".patch_embedder.position_embedding_table"] = mx.Zeros(e, []int{2, 32, 32}, mx.Float32)
		}, []string{"position_embedding_table has shape [2 32 32], want [2 64 32]"}},
		{"unexpected", func(_ *Config, w map[string]*mx.Array) {
			w[VisionTowerPrefix+".encoder.layers.2.input_layernorm.weight"] = mx.Zeros(e, []int{32}, mx.Float32)
		}, []string{"unexpected tensor model.encoder.vision_tower.encoder.layers.2.input_layernorm.weight"}},
		{"clipped", func(cfg *Config, _ map[string]*mx.Array) {
			v := *cfg.VisionConfig
			v.UseClippedLinears = true
			cfg.VisionConfig = &v
		}, []string{"use_clipped_linears true is not supported"}},
	} {
		cfg, w := fresh()
		c.edit(cfg, w)
		_, err := Build(e, cfg, w, LoadOptions{})
		if err == nil {
			t.Errorf("%s: Build succeeded", c.name)
			continue
		}
		for _, want := range c.want {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: error %q does not contain %q", c.name, err, want)
			}
		}
	}
	// No vision_config: the tower's tensors are ignored and the model is text-only.
	cfg, w := fresh()
	cfg.VisionConfig = nil
	m, err := Build(e, cfg, w, LoadOptions{})
	if err != nil || m.Vision != nil {
		t.Errorf("Build without vision_config = %v (vision %v), want a text-only model", err, m != nil && m.Vision != nil)
	}
	// SkipVision ignores even a broken tower.
	cfg, w = fresh()
	delete(w, VisionTowerPrefix+".std_scale")
	if m, err := Build(e, cfg, w, LoadOptions{SkipVision: true}); err != nil || m.Vision != nil {
		t.Errorf("Build with SkipVision = %v, want a text-only model", err)
	}
	// A vision_config but no vision tensor: text-only as well.
	cfg, w = fresh()
	for n := range w {
		if IsVisionTensor(n) {
			delete(w, n)
		}
	}
	if m, err := Build(e, cfg, w, LoadOptions{}); err != nil || m.Vision != nil {
		t.Errorf("Build without vision tensors = %v, want a text-only model", err)
	}
	if len(VisionTensors(cfg)) != 2+2*(7+2+4)+2+1 {
		t.Errorf("VisionTensors has %d entries, want 2 + 2·13 + 2 + 1 = 31", len(VisionTensors(cfg)))
	}
}

// TestLoadVisionRoundTrip writes an image-capable checkpoint and loads it back: image
// logits must be bit-identical.
func TestLoadVisionRoundTrip(t *testing.T) {
	e := mxtest.Go(t)
	for _, bits := range []string{BitsNone, BitsMixed} {
		m, w := synthVisionModel(t, e, bits, 19)
		dir := t.TempDir()
		if err := WriteCheckpoint(dir, m.Config, w, nil); err != nil {
			t.Fatal(err)
		}
		loaded, err := Load(e, dir, LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if loaded.Vision == nil || loaded.Config.VisionSoftTokensPerImage != SyntheticSoftTokens {
			t.Fatalf("bits %s: loaded model has no tower or lost its soft-token budget", bits)
		}
		img := preprocessed(t, m, testImage(70, 70, 5))
		prompt, canvas := imagePrompt(t, m, []*imageproc.Image{img}), mx.FromInt32(e, []int32{5, 9, 3}, 1, 3)
		want, err := m.ForwardWithImages(prompt, canvas, []*imageproc.Image{img})
		if err != nil {
			t.Fatal(err)
		}
		got, err := loaded.ForwardWithImages(prompt, canvas, []*imageproc.Image{img})
		if err != nil {
			t.Fatal(err)
		}
		wantIdentical(t, "bits "+bits+" image logits", got.Float32s(), want.Float32s())
	}
}

// TestGenerateWithImages: generation from an image prompt is deterministic for a seed
// and depends on the image.
func TestGenerateWithImages(t *testing.T) {
	e := mxtest.Go(t)
	m, _ := synthVisionModel(t, e, BitsNone, 21)
	a, b := preprocessed(t, m, testImage(80, 80, 0)), preprocessed(t, m, flatImage(80, 80, color.NRGBA{0, 0, 0, 255}))
	prompt := imagePrompt(t, m, []*imageproc.Image{a}).Int32s()
	opt := DefaultGenerateOptions(m.Config)
	opt.MaxTokens, opt.Steps, opt.MinCanvas, opt.EOS, opt.StopRule = 24, 4, 8, nil, nil
	run := func(img *imageproc.Image) []int32 {
		r, err := m.GenerateWithImages(prompt, []*imageproc.Image{img}, opt)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Tokens) != 24 || r.Blocks < 2 {
			t.Fatalf("%d tokens in %d blocks, want 24 tokens over several blocks", len(r.Tokens), r.Blocks)
		}
		return r.Tokens
	}
	ta := run(a)
	if !slices.Equal(ta, run(a)) {
		t.Error("same image and seed gave different tokens")
	}
	if slices.Equal(ta, run(b)) {
		t.Error("different images gave the same 24 tokens")
	}
}

// TestVisionTensorsReal checks the real tower's table against §2.3. Parameters:
// input_proj 1152·768 = 884736; position table 2·10240·1152 = 23592960; per layer
// q/k/v/o 4·1152² = 5308416, gate/up 2·1152·4304 = 9916416, down 4304·1152 = 4958208,
// q/k norms 2·72, four norms 4·1152 → 20187792, ×27 = 545070384; std 2·1152 = 2304;
// projection 2816·1152 = 3244032. Total 572794416.
func TestVisionTensorsReal(t *testing.T) {
	cfg, err := Preset(PresetReal)
	if err != nil {
		t.Fatal(err)
	}
	shapes := map[string][]int{}
	for _, ts := range VisionTensors(cfg) {
		shapes[ts.Name] = ts.Shape
	}
	for name, want := range map[string][]int{
		VisionTowerPrefix + ".patch_embedder.input_proj.weight":        {1152, 768},
		VisionTowerPrefix + ".patch_embedder.position_embedding_table": {2, 10240, 1152},
		VisionLayerPrefix(26) + ".self_attn.q_proj.linear.weight":      {1152, 1152},
		VisionLayerPrefix(0) + ".self_attn.k_norm.weight":              {72},
		VisionLayerPrefix(3) + ".mlp.gate_proj.linear.weight":          {4304, 1152},
		VisionLayerPrefix(3) + ".mlp.down_proj.linear.weight":          {1152, 4304},
		VisionLayerPrefix(3) + ".post_feedforward_layernorm.weight":    {1152},
		VisionTowerPrefix + ".std_scale":                               {1152},
		EmbedVisionPrefix + ".embedding_projection.weight":             {2816, 1152},
	} {
		if !slices.Equal(shapes[name], want) {
			t.Errorf("%s: %v, want %v", name, shapes[name], want)
		}
	}
	if n := CountVisionParams(cfg); n != 572794416 {
		t.Errorf("CountVisionParams(real) = %d, want 572794416", n)
	}
	o, err := cfg.ImageOptions()
	if err != nil || o != (imageproc.Options{PatchSize: 16, PoolingKernel: 3, MaxSoftTokens: 280}) {
		t.Errorf("real ImageOptions = %+v, %v; want 16/3/280", o, err)
	}
}
