package mx

import "fmt"

// DType is an array element type.
type DType int

// The element types. Float16 and BFloat16 are storage types: engines compute with them
// in float32 and round results back, as MLX's CPU backend does.
const (
	Float32 DType = iota
	Float16
	BFloat16
	Float64
	Int32
	Int64
	Uint32
	Uint8
	Bool
)

var dtypeNames = [...]string{"float32", "float16", "bfloat16", "float64", "int32", "int64", "uint32", "uint8", "bool"}

func (d DType) String() string {
	if int(d) >= 0 && int(d) < len(dtypeNames) {
		return dtypeNames[d]
	}
	return fmt.Sprintf("DType(%d)", int(d))
}

// Size is the number of bytes per element.
func (d DType) Size() int {
	switch d {
	case Float32, Int32, Uint32:
		return 4
	case Float16, BFloat16:
		return 2
	case Float64, Int64:
		return 8
	case Uint8, Bool:
		return 1
	}
	panic(fmt.Sprintf("mx: unknown dtype %d", int(d)))
}

// IsFloat reports whether d is a floating-point type.
func (d DType) IsFloat() bool {
	return d == Float32 || d == Float16 || d == BFloat16 || d == Float64
}

// IsInteger reports whether d is an integer type (bool excluded).
func (d DType) IsInteger() bool {
	return d == Int32 || d == Int64 || d == Uint32 || d == Uint8
}

// PromoteTypes returns the dtype of a binary op between a and b, following MLX:
// equal types stay, float beats integer beats bool, and mixing float16 with bfloat16
// (or either with float32) gives float32.
func PromoteTypes(a, b DType) DType {
	if a == b {
		return a
	}
	rank := func(d DType) int {
		switch d {
		case Bool:
			return 0
		case Uint8:
			return 1
		case Int32, Uint32:
			return 2
		case Int64:
			return 3
		case Float16, BFloat16:
			return 4
		case Float32:
			return 5
		case Float64:
			return 6
		}
		return -1
	}
	ra, rb := rank(a), rank(b)
	switch {
	case ra == 4 && rb == 4:
		return Float32
	case ra == 2 && rb == 2: // int32 with uint32
		return Int64
	case ra > rb:
		return a
	default:
		return b
	}
}
