package safetensors

// DType is an element type as spelled in a safetensors header.
type DType string

// The element types this package reads and writes. The reference format
// also defines F8 and sub-byte types; they are rejected as unknown, since
// nothing in dgtune produces or consumes them.
const (
	F64  DType = "F64"
	F32  DType = "F32"
	F16  DType = "F16"
	BF16 DType = "BF16"
	I64  DType = "I64"
	I32  DType = "I32"
	I16  DType = "I16"
	I8   DType = "I8"
	U64  DType = "U64"
	U32  DType = "U32"
	U16  DType = "U16"
	U8   DType = "U8"
	BOOL DType = "BOOL"
)

// Size returns the element size in bytes, or 0 for an unknown dtype.
func (d DType) Size() int {
	switch d {
	case F64, I64, U64:
		return 8
	case F32, I32, U32:
		return 4
	case F16, BF16, I16, U16:
		return 2
	case I8, U8, BOOL:
		return 1
	}
	return 0
}

// Valid reports whether d is one of the dtypes above.
func (d DType) Valid() bool { return d.Size() != 0 }

// TensorInfo describes one tensor of a file.
type TensorInfo struct {
	DType DType
	Shape []int // empty for a scalar
	// Offsets are [begin, end) in bytes, relative to the data buffer.
	Offsets [2]int
}

// Size returns the tensor's size in bytes.
func (t TensorInfo) Size() int { return t.Offsets[1] - t.Offsets[0] }

// NumElements returns prod(Shape), 1 for a scalar.
func (t TensorInfo) NumElements() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}
