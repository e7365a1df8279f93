package quant

import (
	"errors"
	"fmt"
)

// Params selects a quantization format: code width and group length.
type Params struct {
	Bits      int // 2, 3, 4, 5, 6 or 8
	GroupSize int // 32, 64 or 128
}

// Errors returned by Quantize, wrapped with the offending sizes.
var (
	ErrBits      = errors.New("quant: unsupported bits (want 2, 3, 4, 5, 6 or 8)")
	ErrGroupSize = errors.New("quant: unsupported group size (want 32, 64 or 128)")
	ErrShape     = errors.New("quant: bad shape")
	ErrNonFinite = errors.New("quant: non-finite weight")
)

// Validate reports whether MLX supports p.
func (p Params) Validate() error {
	switch p.Bits {
	case 2, 3, 4, 5, 6, 8:
	default:
		return fmt.Errorf("%w: bits=%d", ErrBits, p.Bits)
	}
	switch p.GroupSize {
	case 32, 64, 128:
	default:
		return fmt.Errorf("%w: group_size=%d", ErrGroupSize, p.GroupSize)
	}
	return nil
}

// PackedCols is the number of uint32 words holding one row of cols codes of
// the given width. It is exact whenever cols is a multiple of a supported
// group size, because 32·bits is always a multiple of 32.
func PackedCols(cols, bits int) int { return cols * bits / 32 }

// String formats p the way error messages quote it.
func (p Params) String() string {
	return fmt.Sprintf("bits=%d group_size=%d", p.Bits, p.GroupSize)
}

// checkCols reports whether a quantized axis of length cols fits p.
func (p Params) checkCols(cols int) error {
	if cols <= 0 || cols%p.GroupSize != 0 {
		return fmt.Errorf("%w: quantized axis %d is not a positive multiple of group_size %d",
			ErrShape, cols, p.GroupSize)
	}
	return nil
}
