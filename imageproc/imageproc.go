package imageproc

import (
	"errors"
	"fmt"
	"image"
	"image/draw"
	"math"
)

// Problems with an image file. Errors returned by this package wrap one of them (or an
// os error for a file that cannot be read) and name the file.
var (
	ErrEmpty       = errors.New("empty file")
	ErrUnsupported = errors.New("unsupported image format (want PNG, JPEG or GIF)")
	ErrZeroSize    = errors.New("image has zero width or height")
	ErrTooLarge    = errors.New("image too large")
	ErrCorrupt     = errors.New("truncated or corrupt image")
)

// MaxPixels bounds width·height of a decoded image, checked from the header before any
// pixel buffer is allocated (PIL's decompression-bomb guard is of the same order).
const MaxPixels = 1 << 26

// Options are the vision tower's geometry and token budget.
type Options struct {
	PatchSize     int // pixels per patch side (16)
	PoolingKernel int // patches per side pooled into one soft token (3)
	MaxSoftTokens int // soft tokens per image at most (280); max patches = MaxSoftTokens·PoolingKernel²
}

// Validate checks that the options describe a usable geometry.
func (o Options) Validate() error {
	if err := o.validate(); err != nil {
		return fmt.Errorf("imageproc: %w", err)
	}
	return nil
}

func (o Options) validate() error {
	if o.PatchSize <= 0 || o.PoolingKernel <= 0 || o.MaxSoftTokens <= 0 {
		return fmt.Errorf("options: patch size %d, pooling kernel %d and max soft tokens %d must be positive",
			o.PatchSize, o.PoolingKernel, o.MaxSoftTokens)
	}
	if o.PatchSize > 1<<10 || o.PoolingKernel > 1<<6 || o.MaxSoftTokens > 1<<16 {
		return fmt.Errorf("options: patch size %d, pooling kernel %d or max soft tokens %d exceeds the sanity limits 1024, 64, 65536",
			o.PatchSize, o.PoolingKernel, o.MaxSoftTokens)
	}
	return nil
}

// MaxPatches is the patch budget MaxSoftTokens·PoolingKernel².
func (o Options) MaxPatches() int { return o.MaxSoftTokens * o.PoolingKernel * o.PoolingKernel }

// Side is the granularity of both image sides, PatchSize·PoolingKernel pixels.
func (o Options) Side() int { return o.PatchSize * o.PoolingKernel }

// targetSize returns the size an image of height×width is resized to: the largest
// multiples of Side() keeping the aspect ratio within MaxPatches patches. A side that
// would round to zero (a very thin image) becomes one Side(), and the other side is then
// ⌊long/short⌋·Side() capped at the longest side the budget allows. Its errors do not
// name the package: callers add a file name first.
func targetSize(height, width int, o Options) (h, w int, err error) {
	if err := o.validate(); err != nil {
		return 0, 0, err
	}
	if height <= 0 || width <= 0 {
		return 0, 0, fmt.Errorf("size %d×%d: %w", height, width, ErrZeroSize)
	}
	side := o.Side()
	targetPx := float64(o.MaxPatches() * o.PatchSize * o.PatchSize)
	// Same float64 operations in the same order as the reference processor, so that a
	// size on a rounding edge lands on the same side of it.
	factor := math.Sqrt(targetPx / (float64(height) * float64(width)))
	h = int(math.Floor(factor*float64(height)/float64(side))) * side
	w = int(math.Floor(factor*float64(width)/float64(side))) * side
	maxSide := o.MaxSoftTokens * side
	switch {
	case h == 0 && w == 0:
		return 0, 0, fmt.Errorf("size %d×%d: budget of %d patches is below one %d×%d pooling window",
			height, width, o.MaxPatches(), o.PoolingKernel, o.PoolingKernel)
	case h == 0:
		h = side
		w = min(width/height*side, maxSide)
	case w == 0:
		w = side
		h = min(height/width*side, maxSide)
	}
	return h, w, nil
}

// SoftTokens is the number of soft tokens an image of (already resized) height×width
// stands for: (height/PatchSize)·(width/PatchSize)/PoolingKernel².
func SoftTokens(height, width int, o Options) int {
	k := o.PoolingKernel
	return (height / o.PatchSize) * (width / o.PatchSize) / (k * k)
}

// Image is a preprocessed image: channel-first float32 [3, Height, Width], values in
// [0, 1] (8-bit levels divided by 255).
type Image struct {
	Height, Width int
	Pixels        []float32
}

// At returns channel c (0 red, 1 green, 2 blue) of the pixel at row y, column x.
func (im *Image) At(c, y, x int) float32 { return im.Pixels[(c*im.Height+y)*im.Width+x] }

// SoftTokens is the image's soft-token count under o.
func (im *Image) SoftTokens(o Options) int { return SoftTokens(im.Height, im.Width, o) }

// preprocess resizes img to targetSize and returns its pixels. Transparent pixels are
// composited over white, as the reference processor's RGB conversion does.
func preprocess(img image.Image, o Options) (*Image, error) {
	b := img.Bounds()
	if b.Dx() <= 0 || b.Dy() <= 0 {
		return nil, fmt.Errorf("%w (%d×%d)", ErrZeroSize, b.Dx(), b.Dy())
	}
	if int64(b.Dx())*int64(b.Dy()) > MaxPixels {
		return nil, fmt.Errorf("%w: %d×%d pixels exceeds %d", ErrTooLarge, b.Dx(), b.Dy(), MaxPixels)
	}
	th, tw, err := targetSize(b.Dy(), b.Dx(), o)
	if err != nil {
		return nil, err
	}
	src := toPlanes(img)
	if th != src.h || tw != src.w {
		src = src.resize(th, tw)
	}
	out := &Image{Height: th, Width: tw, Pixels: make([]float32, len(src.v))}
	for i, v := range src.v {
		out.Pixels[i] = float32(v) / 255
	}
	return out, nil
}

// planes is an RGB image, channel-first, holding 8-bit levels as float64.
type planes struct {
	h, w int
	v    []float64 // [3, h, w]
}

// toPlanes draws img over an opaque white canvas and splits the channels. image/draw
// has fast paths for the decoders' image types, so this avoids a per-pixel interface call.
func toPlanes(img image.Image) *planes {
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	canvas := image.NewRGBA(image.Rect(0, 0, w, h))
	draw.Draw(canvas, canvas.Bounds(), image.White, image.Point{}, draw.Src)
	draw.Draw(canvas, canvas.Bounds(), img, b.Min, draw.Over)
	p := &planes{h: h, w: w, v: make([]float64, 3*h*w)}
	for y := range h {
		row := canvas.Pix[y*canvas.Stride:]
		for x := range w {
			for c := range 3 {
				p.v[(c*h+y)*w+x] = float64(row[4*x+c])
			}
		}
	}
	return p
}
