package safetensors

import (
	"errors"
	"fmt"
)

// Errors reported for malformed files, bad arguments to Write and bad
// checkpoint directories. They are returned wrapped (see FormatError); test
// for them with errors.Is.
var (
	ErrShortFile    = errors.New("safetensors: file shorter than its 8-byte header length")
	ErrHeaderLength = errors.New("safetensors: header length out of range")
	ErrHeader       = errors.New("safetensors: malformed JSON header")
	ErrMetadata     = errors.New("safetensors: __metadata__ is not an object of strings")
	ErrName         = errors.New("safetensors: invalid tensor name")
	ErrDType        = errors.New("safetensors: unknown dtype")
	ErrShape        = errors.New("safetensors: invalid shape")
	ErrOffsets      = errors.New("safetensors: invalid data_offsets")
	ErrSize         = errors.New("safetensors: tensor size does not match shape and dtype")
	ErrOverlap      = errors.New("safetensors: tensors overlap")
	ErrCoverage     = errors.New("safetensors: tensors do not cover the data buffer")
	ErrDuplicate    = errors.New("safetensors: duplicate tensor name")
	ErrNotFound     = errors.New("safetensors: tensor not found")
	ErrClosed       = errors.New("safetensors: file already closed")
	ErrIndex        = errors.New("safetensors: invalid checkpoint index")
	ErrNoWeights    = errors.New("safetensors: no safetensors files in directory")
)

// FormatError is a problem with one file (and possibly one tensor in it).
// Err is the sentinel; Detail says what exactly was wrong, with the numbers.
type FormatError struct {
	File   string
	Tensor string // empty when the problem is not about one tensor
	Err    error
	Detail string
}

func (e *FormatError) Error() string {
	s := "safetensors: " + e.File
	if e.Tensor != "" {
		s += fmt.Sprintf(": tensor %q", e.Tensor)
	}
	return s + ": " + e.Detail
}

func (e *FormatError) Unwrap() error { return e.Err }

func formatErr(file, tensor string, sentinel error, format string, args ...any) error {
	return &FormatError{File: file, Tensor: tensor, Err: sentinel, Detail: fmt.Sprintf(format, args...)}
}
