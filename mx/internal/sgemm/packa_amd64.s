//go:build amd64 && !purego

#include "textflag.h"

// func packA6AVX2(dst, src *float32, lda, blocks int)
// One untransposed A micro-panel, 8 k steps per block: dst[p·6 + i] = src[i·lda + p] for
// i < 6, p < 8·blocks. Each block loads the six rows' next 8 values, transposes them with
// unpack/shuffle (rows a–d as quads, e–f as pairs) and stores the 48 floats in k order.
TEXT ·packA6AVX2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ lda+16(FP), R8
	MOVQ blocks+24(FP), CX
	SHLQ $2, R8               // row stride in bytes
	LEAQ (R8)(R8*2), R9       // 3 rows
	LEAQ (R8)(R8*4), R10      // 5 rows

pack6loop:
	VMOVUPS (SI), Y0          // a0..a7
	VMOVUPS (SI)(R8*1), Y1    // b
	VMOVUPS (SI)(R8*2), Y2    // c
	VMOVUPS (SI)(R9*1), Y3    // d
	VMOVUPS (SI)(R8*4), Y4    // e
	VMOVUPS (SI)(R10*1), Y5   // f
	VUNPCKLPS Y1, Y0, Y6      // a0 b0 a1 b1 | a4 b4 a5 b5
	VUNPCKHPS Y1, Y0, Y7      // a2 b2 a3 b3 | a6 b6 a7 b7
	VUNPCKLPS Y3, Y2, Y8      // c0 d0 c1 d1 | c4 d4 c5 d5
	VUNPCKHPS Y3, Y2, Y9      // c2 d2 c3 d3 | c6 d6 c7 d7
	VUNPCKLPS Y5, Y4, Y10     // e0 f0 e1 f1 | e4 f4 e5 f5
	VUNPCKHPS Y5, Y4, Y11     // e2 f2 e3 f3 | e6 f6 e7 f7
	VSHUFPS $0x44, Y8, Y6, Y12 // a0 b0 c0 d0 | a4 b4 c4 d4
	VSHUFPS $0xEE, Y8, Y6, Y13 // a1 b1 c1 d1 | a5 b5 c5 d5
	VSHUFPS $0x44, Y9, Y7, Y14 // a2 b2 c2 d2 | a6 b6 c6 d6
	VSHUFPS $0xEE, Y9, Y7, Y15 // a3 b3 c3 d3 | a7 b7 c7 d7
	// k step p takes 24 bytes at 24·p: its quad, then its pair.
	VMOVUPS X12, (DI)
	VMOVLPS X10, 16(DI)
	VMOVUPS X13, 24(DI)
	VMOVHPS X10, 40(DI)
	VMOVUPS X14, 48(DI)
	VMOVLPS X11, 64(DI)
	VMOVUPS X15, 72(DI)
	VMOVHPS X11, 88(DI)
	VEXTRACTF128 $1, Y12, X0
	VEXTRACTF128 $1, Y13, X1
	VEXTRACTF128 $1, Y14, X2
	VEXTRACTF128 $1, Y15, X3
	VEXTRACTF128 $1, Y10, X4
	VEXTRACTF128 $1, Y11, X5
	VMOVUPS X0, 96(DI)
	VMOVLPS X4, 112(DI)
	VMOVUPS X1, 120(DI)
	VMOVHPS X4, 136(DI)
	VMOVUPS X2, 144(DI)
	VMOVLPS X5, 160(DI)
	VMOVUPS X3, 168(DI)
	VMOVHPS X5, 184(DI)
	ADDQ $32, SI
	ADDQ $192, DI
	DECQ CX
	JNZ  pack6loop
	VZEROUPPER
	RET
