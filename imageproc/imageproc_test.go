package imageproc

import (
	"bytes"
	"errors"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// TestTargetSize checks the sizing rule with the default budget (2520 patches,
// targetPx = 2520·16² = 645120, sides multiples of 48, longest side 280·48 = 13440).
// For each size: factor = √(645120/(h·w)), side = ⌊factor·side/48⌋·48.
func TestTargetSize(t *testing.T) {
	cases := []struct {
		h, w           int
		wantH, wantW   int
		wantSoftTokens int
	}{
		// √(645120/589824) = 1.0458; 768·1.0458/48 = 16.73 → 16·48; 48·48 patches / 9 = 256.
		{768, 768, 768, 768, 256},
		// Every square lands on 768: factor·side = √645120 = 803.2 → 16.73 → 768.
		{100, 100, 768, 768, 256},
		{2, 2, 768, 768, 256},
		// factor √1.29024 = 1.13589: 1135.9/48 = 23.66 → 1104, 567.9/48 = 11.83 → 528;
		// 69·33 = 2277 patches → 253.
		{1000, 500, 1104, 528, 253},
		// factor √2.1 = 1.44914: 695.6/48 = 14.49 → 672, 927.4/48 = 19.32 → 912; 42·57 = 2394 → 266.
		{480, 640, 672, 912, 266},
		// factor √0.31111 = 0.55777: 602.4/48 = 12.55 → 576, 1070.9/48 = 22.31 → 1056; 36·66 → 264.
		{1080, 1920, 576, 1056, 264},
		// factor 5.6794: 56.8/48 → 48, 11358.9/48 = 236.6 → 11328; 3·708 = 2124 → 236.
		{10, 2000, 48, 11328, 236},
		// factor 11.359: 11.36/48 rounds to 0 → one side of 48; the other ⌊5000/1⌋·48
		// capped at 13440; 3·840 = 2520 → 280.
		{1, 5000, 48, 13440, 280},
		{5000, 1, 13440, 48, 280},
		// factor 46.373: 139.1/48 = 2.90 → 96, 4637.3/48 = 96.6 → 4608; 6·288 = 1728 → 192.
		{3, 100, 96, 4608, 192},
	}
	o := DefaultOptions()
	for _, c := range cases {
		h, w, err := targetSize(c.h, c.w, o)
		if err != nil {
			t.Fatalf("targetSize(%d, %d): %v", c.h, c.w, err)
		}
		if h != c.wantH || w != c.wantW {
			t.Errorf("targetSize(%d, %d) = %d×%d, want %d×%d", c.h, c.w, h, w, c.wantH, c.wantW)
		}
		if n := SoftTokens(h, w, o); n != c.wantSoftTokens {
			t.Errorf("SoftTokens(%d, %d) = %d, want %d", h, w, n, c.wantSoftTokens)
		}
		if p := (h / 16) * (w / 16); p > o.MaxPatches() {
			t.Errorf("%d×%d → %d×%d has %d patches > %d", c.h, c.w, h, w, p, o.MaxPatches())
		}
	}
}

// TestTargetSizeSmallBudget uses 16 soft tokens (144 patches, targetPx 36864 = 192²): a
// square is exactly 192×192, and 64×128 gets factor √4.5 = 2.1213 → 135.8/48 → 96,
// 271.5/48 → 240, i.e. 6·15 = 90 patches → 10 soft tokens.
func TestTargetSizeSmallBudget(t *testing.T) {
	o := Options{PatchSize: 16, PoolingKernel: 3, MaxSoftTokens: 16}
	for _, c := range []struct{ h, w, wantH, wantW, n int }{
		{192, 192, 192, 192, 16},
		{100, 100, 192, 192, 16},
		{64, 128, 96, 240, 10},
	} {
		h, w, err := targetSize(c.h, c.w, o)
		if err != nil {
			t.Fatal(err)
		}
		if h != c.wantH || w != c.wantW || SoftTokens(h, w, o) != c.n {
			t.Errorf("targetSize(%d, %d) = %d×%d (%d soft tokens), want %d×%d (%d)", c.h, c.w, h, w, SoftTokens(h, w, o), c.wantH, c.wantW, c.n)
		}
	}
}

func TestTargetSizeErrors(t *testing.T) {
	for _, c := range []struct {
		h, w int
		o    Options
	}{
		{0, 10, DefaultOptions()},
		{10, -1, DefaultOptions()},
		{10, 10, Options{PatchSize: 0, PoolingKernel: 3, MaxSoftTokens: 280}},
		{10, 10, Options{PatchSize: 16, PoolingKernel: 3, MaxSoftTokens: -2}},
		{10, 10, Options{PatchSize: 16, PoolingKernel: 3, MaxSoftTokens: 1 << 20}},
	} {
		if _, _, err := targetSize(c.h, c.w, c.o); err == nil {
			t.Errorf("targetSize(%d, %d, %+v) succeeded", c.h, c.w, c.o)
		}
	}
}

// gradient is a 192×192 test image: red = x, green = y, blue = (3x + y) mod 256.
func gradient(w, h int) *image.NRGBA {
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.SetNRGBA(x, y, color.NRGBA{R: uint8(x), G: uint8(y), B: uint8((3*x + y) % 256), A: 255})
		}
	}
	return img
}

func encodePNG(t *testing.T, img image.Image) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestPixelValues: a 192×192 PNG with a 16-token budget needs no resize, so every value
// is its 8-bit level / 255, channel-first.
func TestPixelValues(t *testing.T) {
	o := Options{PatchSize: 16, PoolingKernel: 3, MaxSoftTokens: 16}
	src, err := NewSource("gradient.png", encodePNG(t, gradient(192, 192)))
	if err != nil {
		t.Fatal(err)
	}
	if src.Format != "png" || src.Width != 192 || src.Height != 192 {
		t.Fatalf("source %s %d×%d, want png 192×192", src.Format, src.Width, src.Height)
	}
	im, err := src.Preprocess(o)
	if err != nil {
		t.Fatal(err)
	}
	if im.Height != 192 || im.Width != 192 || len(im.Pixels) != 3*192*192 {
		t.Fatalf("image %d×%d with %d values, want 192×192 with %d", im.Height, im.Width, len(im.Pixels), 3*192*192)
	}
	for _, c := range []struct {
		ch, y, x int
		level    int
	}{
		{0, 0, 0, 0}, {0, 5, 7, 7}, {1, 5, 7, 5}, {2, 5, 7, 26}, // 3·7+5
		{0, 191, 190, 190}, {1, 191, 190, 191}, {2, 191, 190, (3*190 + 191) % 256}, // 761 mod 256 = 249
		{2, 100, 60, (3*60 + 100) % 256}, // 280 mod 256 = 24
	} {
		want := float32(c.level) / 255
		if got := im.At(c.ch, c.y, c.x); got != want {
			t.Errorf("At(%d, %d, %d) = %v, want %d/255 = %v", c.ch, c.y, c.x, got, c.level, want)
		}
	}
	// Pixels[(c·H + y)·W + x] is the channel-first layout At reads.
	if got := im.Pixels[(2*192+100)*192+60]; got != float32(24)/255 {
		t.Errorf("Pixels[(2·192+100)·192+60] = %v, want 24/255", got)
	}
}

// TestDefaultSizeUnchanged: a 768×768 image is already the default target (256 soft
// tokens), so its pixels pass through exactly.
func TestDefaultSizeUnchanged(t *testing.T) {
	im, err := preprocess(gradient(768, 768), DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if im.Height != 768 || im.Width != 768 || im.SoftTokens(DefaultOptions()) != 256 {
		t.Fatalf("768×768 → %d×%d, %d soft tokens; want 768×768, 256", im.Height, im.Width, im.SoftTokens(DefaultOptions()))
	}
	// x = 700 wraps to level 700 mod 256 = 188 in the red channel.
	if got := im.At(0, 3, 700); got != float32(188)/255 {
		t.Errorf("At(0, 3, 700) = %v, want 188/255", got)
	}
}

// TestCubic checks the kernel at hand-computed points (a = −0.5):
// k(0) = 1; k(0.25) = (1.5·0.25 − 2.5)·0.0625 + 1 = 0.8671875;
// k(1.25) = (((1.25−5)·1.25+8)·1.25 − 4)·(−0.5) = −0.0703125; k(1) = k(2) = 0.
func TestCubic(t *testing.T) {
	for _, c := range []struct{ x, want float64 }{
		{0, 1}, {0.25, 0.8671875}, {-0.25, 0.8671875}, {0.75, 0.2265625}, {1.25, -0.0703125}, {1, 0}, {2, 0}, {-3, 0},
	} {
		if got := cubic(c.x); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("cubic(%g) = %g, want %g", c.x, got, c.want)
		}
	}
}

// TestResizeHand checks one row resized by hand.
//
// Shrinking 4 → 2 (scale 2): the kernel is stretched to support 4. Output 0 is centred
// at 1.0 and covers inputs 0..3 with weights k((x − 1 + 0.5)/2) = k(−0.25), k(0.25),
// k(0.75), k(1.25) = 0.8671875, 0.8671875, 0.2265625, −0.0703125 (sum 1.890625). On the
// row [0, 100, 200, 255]: (86.71875 + 45.3125 − 17.9296875)/1.890625 = 60.35 → 60.
// Output 1 (centre 3.0) has the mirrored weights: (22.65625 + 173.4375 + 221.1328125)/1.890625
// = 220.68 → 221.
//
// Growing 2 → 4 (scale 0.5, support 2): output 0 is centred at 0.25 and covers inputs 0..1
// with k(0.25) = 0.8671875 and k(1.25) = −0.0703125 (sum 0.796875). On [100, 200]:
// (86.71875 − 14.0625)/0.796875 = 91.18 → 91. On [0, 255] the sum is negative and clamps to 0.
func TestResizeHand(t *testing.T) {
	row := func(vals ...float64) *planes {
		p := &planes{h: 1, w: len(vals), v: make([]float64, 3*len(vals))}
		for c := range 3 {
			copy(p.v[c*len(vals):], vals)
		}
		return p
	}
	for _, c := range []struct {
		in   []float64
		w    int
		want []float64
	}{
		{[]float64{0, 100, 200, 255}, 2, []float64{60, 221}},
		{[]float64{100, 200}, 4, []float64{91}},
		{[]float64{0, 255}, 4, []float64{0}},
	} {
		got := row(c.in...).resize(1, c.w)
		for i, want := range c.want {
			for ch := range 3 {
				if g := got.v[ch*c.w+i]; g != want {
					t.Errorf("resize %v to %d: channel %d sample %d = %g, want %g", c.in, c.w, ch, i, g, want)
				}
			}
		}
	}
}

// TestResizeConstant: the weights are normalised, so a flat colour survives any resize
// exactly. Here a 500-wide, 300-high image gets factor √(645120/150000) = 2.0738: height
// 622.2/48 = 12.96 → 576, width 1036.9/48 = 21.6 → 1008.
func TestResizeConstant(t *testing.T) {
	img := image.NewNRGBA(image.Rect(0, 0, 500, 300))
	for i := 0; i < len(img.Pix); i += 4 {
		copy(img.Pix[i:], []uint8{10, 20, 30, 255})
	}
	im, err := preprocess(img, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if im.Height != 576 || im.Width != 1008 {
		t.Fatalf("500×300 (w×h) → %d×%d (h×w), want 576×1008", im.Height, im.Width)
	}
	for c, level := range []float32{10, 20, 30} {
		for _, yx := range [][2]int{{0, 0}, {575, 1007}, {300, 17}} {
			if got := im.At(c, yx[0], yx[1]); got != level/255 {
				t.Fatalf("At(%d, %d, %d) = %v, want %v/255", c, yx[0], yx[1], got, level)
			}
		}
	}
}

// TestTransparencyOverWhite: a pixel of colour c with alpha a becomes c·a/255 + 255·(1 − a/255);
// for (100, 50, 0) at a = 128: 50.2 + 127 = 177.2, 25.1 + 127 = 152.1, 127.
func TestTransparencyOverWhite(t *testing.T) {
	img := image.NewNRGBA(image.Rect(0, 0, 192, 192))
	for i := 0; i < len(img.Pix); i += 4 {
		copy(img.Pix[i:], []uint8{100, 50, 0, 128})
	}
	im, err := preprocess(img, Options{PatchSize: 16, PoolingKernel: 3, MaxSoftTokens: 16})
	if err != nil {
		t.Fatal(err)
	}
	for c, want := range []float64{177.2, 152.1, 127} {
		if got := float64(im.At(c, 9, 9)) * 255; math.Abs(got-want) > 1 {
			t.Errorf("channel %d = %.1f/255, want %.1f ± 1", c, got, want)
		}
	}
}

// TestFormats: GIF and JPEG decode; JPEG is lossy, so a flat colour is only close.
func TestFormats(t *testing.T) {
	flat := image.NewNRGBA(image.Rect(0, 0, 96, 64))
	for i := 0; i < len(flat.Pix); i += 4 {
		copy(flat.Pix[i:], []uint8{200, 40, 90, 255})
	}
	var g, j bytes.Buffer
	pal := image.NewPaletted(flat.Bounds(), color.Palette{color.NRGBA{200, 40, 90, 255}, color.Black})
	if err := gif.Encode(&g, pal, nil); err != nil {
		t.Fatal(err)
	}
	if err := jpeg.Encode(&j, flat, &jpeg.Options{Quality: 95}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, format string
		data         []byte
		tol          float64
	}{{"flat.gif", "gif", g.Bytes(), 1e-3}, {"flat.jpg", "jpeg", j.Bytes(), 3}} {
		src, err := NewSource(c.name, c.data)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if src.Format != c.format || src.Width != 96 || src.Height != 64 {
			t.Fatalf("%s: %s %d×%d, want %s 96×64", c.name, src.Format, src.Width, src.Height, c.format)
		}
		im, err := src.Preprocess(DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		for ch, want := range []float64{200, 40, 90} {
			if got := float64(im.At(ch, im.Height/2, im.Width/2)) * 255; math.Abs(got-want) > c.tol {
				t.Errorf("%s channel %d = %.1f, want %g ± %g", c.name, ch, got, want, c.tol)
			}
		}
	}
}

// gifHeader is a GIF whose logical screen is w×h followed by the trailer: enough for the
// header check, which runs before any pixel is decoded.
func gifHeader(w, h int) []byte {
	return []byte{'G', 'I', 'F', '8', '9', 'a', byte(w), byte(w >> 8), byte(h), byte(h >> 8), 0, 0, 0, 0x3b}
}

func TestBadImages(t *testing.T) {
	good := encodePNG(t, gradient(64, 64))
	var j bytes.Buffer
	if err := jpeg.Encode(&j, gradient(64, 64), nil); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		data []byte
		want error
	}{
		{"empty.png", nil, ErrEmpty},
		{"notes.txt", []byte("just some text, not an image"), ErrUnsupported},
		{"pic.bmp", []byte("BM\x36\x00\x00\x00\x00\x00\x00\x00\x36\x00\x00\x00"), ErrUnsupported},
		{"cut.png", good[:len(good)/2], ErrCorrupt},
		{"cut.jpg", j.Bytes()[:j.Len()/2], ErrCorrupt},
		{"header-only.png", good[:40], ErrCorrupt},
		{"zero.gif", gifHeader(0, 0), ErrZeroSize},
		{"huge.gif", gifHeader(65535, 65535), ErrTooLarge},
	} {
		_, err := NewSource(c.name, c.data)
		if !errors.Is(err, c.want) {
			t.Errorf("NewSource(%s) = %v, want %v", c.name, err, c.want)
			continue
		}
		if !bytes.Contains([]byte(err.Error()), []byte(c.name)) {
			t.Errorf("NewSource(%s) error %q does not name the file", c.name, err)
		}
	}
	if _, err := preprocess(image.NewRGBA(image.Rect(0, 0, 0, 5)), DefaultOptions()); !errors.Is(err, ErrZeroSize) {
		t.Errorf("Preprocess(0×5) = %v, want ErrZeroSize", err)
	}
	if _, err := preprocess(gradient(4, 4), Options{}); err == nil {
		t.Error("Preprocess with zero options succeeded")
	}
}

func TestOpenAndPreprocess(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "g.png")
	if err := os.WriteFile(path, encodePNG(t, gradient(192, 192)), 0o644); err != nil {
		t.Fatal(err)
	}
	loaded, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	im, err := loaded.Preprocess(Options{PatchSize: 16, PoolingKernel: 3, MaxSoftTokens: 16})
	if err != nil {
		t.Fatal(err)
	}
	if got := im.At(1, 42, 3); got != float32(42)/255 {
		t.Errorf("At(1, 42, 3) = %v, want 42/255", got)
	}
	src, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := src.SoftTokens(DefaultOptions()); err != nil || n != 256 {
		t.Errorf("SoftTokens = %d, %v; want 256 (192×192 → 768×768)", n, err)
	}
	_, err = Open(filepath.Join(dir, "missing.png"))
	if !errors.Is(err, fs.ErrNotExist) || !bytes.Contains([]byte(err.Error()), []byte("missing.png")) {
		t.Errorf("Open(missing) = %v, want a not-exist error naming the file", err)
	}
}

// DefaultOptions are DiffusionGemma's: 16-pixel patches, 3×3 pooling, 280 soft tokens
// (the model reads them from its vision config).
func DefaultOptions() Options { return Options{PatchSize: 16, PoolingKernel: 3, MaxSoftTokens: 280} }
