package imageproc

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	_ "image/gif" // registers the GIF decoder with image.Decode
	_ "image/jpeg"
	_ "image/png"
	"os"
)

// Source is an image file's bytes that decoded successfully once, with what the header
// says about it. Preprocessing it again therefore only fails on a programming error.
type Source struct {
	Name          string // where it came from (a path, or a row and column), for messages
	Data          []byte
	Format        string // "png", "jpeg" or "gif"
	Width, Height int
}

// Open reads and checks the image file at path.
func Open(path string) (*Source, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("imageproc: %w", err)
	}
	return NewSource(path, b)
}

// NewSource checks that data is a complete PNG, JPEG or GIF of sensible size by decoding
// it in full, and keeps the bytes. name only labels errors and the result.
func NewSource(name string, data []byte) (*Source, error) {
	if len(data) == 0 {
		return nil, fmt.Errorf("imageproc: %s: %w", name, ErrEmpty)
	}
	cfg, format, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		if errors.Is(err, image.ErrFormat) {
			return nil, fmt.Errorf("imageproc: %s: %w", name, ErrUnsupported)
		}
		return nil, fmt.Errorf("imageproc: %s: %w: %v", name, ErrCorrupt, err)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 {
		return nil, fmt.Errorf("imageproc: %s: %w (%d×%d)", name, ErrZeroSize, cfg.Width, cfg.Height)
	}
	if int64(cfg.Width)*int64(cfg.Height) > MaxPixels {
		return nil, fmt.Errorf("imageproc: %s: %w: %d×%d pixels exceeds %d", name, ErrTooLarge, cfg.Width, cfg.Height, MaxPixels)
	}
	s := &Source{Name: name, Data: data, Format: format, Width: cfg.Width, Height: cfg.Height}
	img, err := s.decode()
	if err != nil {
		return nil, err
	}
	if b := img.Bounds(); b.Dx() != cfg.Width || b.Dy() != cfg.Height {
		return nil, fmt.Errorf("imageproc: %s: %w: header says %d×%d, pixels are %d×%d", name, ErrCorrupt, cfg.Width, cfg.Height, b.Dx(), b.Dy())
	}
	return s, nil
}

func (s *Source) decode() (image.Image, error) {
	img, _, err := image.Decode(bytes.NewReader(s.Data))
	if err != nil {
		return nil, fmt.Errorf("imageproc: %s: %w (%s): %v", s.Name, ErrCorrupt, s.Format, err)
	}
	return img, nil
}

// Size returns the size the image is resized to under o.
func (s *Source) Size(o Options) (h, w int, err error) {
	h, w, err = targetSize(s.Height, s.Width, o)
	if err != nil {
		return 0, 0, fmt.Errorf("imageproc: %s: %w", s.Name, err)
	}
	return h, w, nil
}

// SoftTokens is the number of soft tokens the image stands for under o, from its header
// size alone.
func (s *Source) SoftTokens(o Options) (int, error) {
	h, w, err := s.Size(o)
	if err != nil {
		return 0, err
	}
	return SoftTokens(h, w, o), nil
}

// Preprocess decodes the image, resizes it to the largest multiples of o.Side() that keep
// its aspect ratio within o.MaxPatches() patches, and returns its pixels. Transparent
// pixels are composited over white, as the reference processor's RGB conversion does.
func (s *Source) Preprocess(o Options) (*Image, error) {
	img, err := s.decode()
	if err != nil {
		return nil, err
	}
	im, err := preprocess(img, o)
	if err != nil {
		return nil, fmt.Errorf("imageproc: %s: %w", s.Name, err)
	}
	return im, nil
}
