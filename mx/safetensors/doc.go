// Package safetensors reads and writes the safetensors checkpoint format
// used by Hugging Face and MLX, on plain bytes.
//
// A file is an 8-byte little-endian header length N, N bytes of JSON
//
//	{"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...,
//	 "__metadata__": {"key": "value"}}
//
// and then the data buffer, with offsets relative to its start. Data is
// little-endian and row-major.
//
// Reading memory-maps the file and hands out zero-copy views of each tensor.
// The header is checked in full before any tensor is used and before any
// allocation is sized from a number in it, following the rules of the
// reference implementation (github.com/huggingface/safetensors): offsets
// must tile the buffer exactly, with no gap, overlap or trailing byte, and
// each tensor's byte size must equal prod(shape) × element size. Every
// violation is reported as one of the Err* sentinels, wrapped in a
// *FormatError that names the file and tensor.
//
// Writing is atomic (temp file, fsync, rename, fsync of the directory), so a
// crash never leaves a torn checkpoint. A Checkpoint opens a model directory:
// sharded with model.safetensors.index.json, a single model.safetensors, or
// any set of *.safetensors files.
//
// Converting bytes to typed arrays is the array layer's job; see
// mx/internal/half for the 16-bit float conversions.
package safetensors
