// Package quant implements MLX's affine quantization on plain float32 and
// uint32 slices: mx.quantize / mx.dequantize, quantized_matmul (both
// transpose modes) and gather_qmm, bit-compatible with the tensors that
// mlx-lm writes to safetensors.
//
// A quantized weight is logically W[rows, cols], quantized along cols in
// groups of GroupSize consecutive values. Each group g of row r has a scale
// and a bias, and element (r, c) dequantizes to
//
//	W[r, c] = scales[r, c/GroupSize] · q[r, c] + biases[r, c/GroupSize]
//
// The codes q ∈ [0, 2^Bits−1] of a row form one little-endian bit stream:
// code c occupies stream bits [c·Bits, (c+1)·Bits), and stream bit i is bit
// i%32 of uint32 word i/32. For 2, 4 and 8 bits this is "element j in word
// j/(32/Bits) at bit Bits·(j mod 32/Bits)"; for 3, 5 and 6 bits codes
// straddle bytes and words exactly as MLX packs them (8 codes per 3 bytes
// for 3 bits, 8 per 5 bytes for 5 bits, 4 per 3 bytes for 6 bits). A row
// therefore takes cols·Bits/32 words and every group starts on a word.
//
// The matmul kernels never materialise the dequantized matrix. With at least
// a few rows of x (gemmMinRows) a product goes through the dense SGEMM
// (mx/internal/sgemm.GemmPacked): the weight is decoded, group by group,
// straight into the micro-kernel's packed B panels (a k-block × 16 slab at a
// time), so each decoded value feeds a whole block of rows from registers;
// gather_qmm makes one such product per expert from that expert's rows. With
// fewer rows, kernels decode codes inside their inner loops (or a few rows at
// a time into a small per-goroutine tile) and use the affine identity
// Σ x·(s·q + b) = s·Σ x·q + b·Σ x so the bias costs one multiply per group.
// Both run on up to runtime.GOMAXPROCS goroutines once the work is large
// enough to pay for them. Scales and biases are float32 here; the caller
// converts bf16/f16 tensors at load time (dequantization is exact either way,
// since a bf16 value is exactly representable in float32).
package quant
