//go:build amd64 && !purego

#include "textflag.h"
#include "rows_amd64.h"

// func transpose8RunAVX(src *float32, ld int, dst *float32, ldd int, n int)
// dst[q·ldd + i] = src[i·ld + q] (i, q < 8) on n consecutive 8×8 blocks along src's rows:
// block b reads 8 values of each row from src + 8b and writes its 8 columns from
// dst + 8b·ldd — one block (Transpose8), or a transposed operand's k-block in one call.
// TRANSPOSE8 (rows_amd64.h) transposes each block in registers.
TEXT ·transpose8RunAVX(SB), NOSPLIT, $0-40
	MOVQ src+0(FP), R10
	MOVQ ld+8(FP), AX
	SHLQ $2, AX
	MOVQ dst+16(FP), R11
	MOVQ ldd+24(FP), BX
	SHLQ $2, BX
	MOVQ n+32(FP), CX

t8run:
	MOVQ    R10, SI
	MOVQ    R11, DI
	VMOVUPS (SI), Y0
	VMOVUPS (SI)(AX*1), Y1
	LEAQ    (SI)(AX*2), SI
	VMOVUPS (SI), Y2
	VMOVUPS (SI)(AX*1), Y3
	LEAQ    (SI)(AX*2), SI
	VMOVUPS (SI), Y4
	VMOVUPS (SI)(AX*1), Y5
	LEAQ    (SI)(AX*2), SI
	VMOVUPS (SI), Y6
	VMOVUPS (SI)(AX*1), Y7
	TRANSPOSE8
	VMOVUPS Y8, (DI)
	VMOVUPS Y9, (DI)(BX*1)
	LEAQ    (DI)(BX*2), DI
	VMOVUPS Y10, (DI)
	VMOVUPS Y11, (DI)(BX*1)
	LEAQ    (DI)(BX*2), DI
	VMOVUPS Y12, (DI)
	VMOVUPS Y13, (DI)(BX*1)
	LEAQ    (DI)(BX*2), DI
	VMOVUPS Y14, (DI)
	VMOVUPS Y15, (DI)(BX*1)
	ADDQ    $32, R10
	LEAQ    (R11)(BX*8), R11
	DECQ    CX
	JNZ     t8run
	VZEROUPPER
	RET

// func packRows8AVX(src *float32, ld int, dst *float32, panels int, pstride int)
//
// One group of eight rows of an untransposed B into its panels: for each of panels
// panels q, the 16 floats at src + 16q of rows 0..7 (row stride ld floats) go to
// dst + q·pstride + 16i (i < 8), 64 bytes at a time in one YMM pair per row.
TEXT ·packRows8AVX(SB), NOSPLIT, $0-40
	MOVQ src+0(FP), R10
	MOVQ ld+8(FP), AX
	SHLQ $2, AX
	MOVQ dst+16(FP), R11
	MOVQ panels+24(FP), CX
	MOVQ pstride+32(FP), BX
	SHLQ $2, BX
	LEAQ (AX)(AX*2), DX // 3·ld bytes

prow8:
	MOVQ    R10, SI
	VMOVUPS (SI), Y0
	VMOVUPS 32(SI), Y1
	VMOVUPS (SI)(AX*1), Y2
	VMOVUPS 32(SI)(AX*1), Y3
	VMOVUPS (SI)(AX*2), Y4
	VMOVUPS 32(SI)(AX*2), Y5
	VMOVUPS (SI)(DX*1), Y6
	VMOVUPS 32(SI)(DX*1), Y7
	LEAQ    (SI)(AX*4), SI
	VMOVUPS (SI), Y8
	VMOVUPS 32(SI), Y9
	VMOVUPS (SI)(AX*1), Y10
	VMOVUPS 32(SI)(AX*1), Y11
	VMOVUPS (SI)(AX*2), Y12
	VMOVUPS 32(SI)(AX*2), Y13
	VMOVUPS (SI)(DX*1), Y14
	VMOVUPS 32(SI)(DX*1), Y15
	VMOVUPS Y0, (R11)
	VMOVUPS Y1, 32(R11)
	VMOVUPS Y2, 64(R11)
	VMOVUPS Y3, 96(R11)
	VMOVUPS Y4, 128(R11)
	VMOVUPS Y5, 160(R11)
	VMOVUPS Y6, 192(R11)
	VMOVUPS Y7, 224(R11)
	VMOVUPS Y8, 256(R11)
	VMOVUPS Y9, 288(R11)
	VMOVUPS Y10, 320(R11)
	VMOVUPS Y11, 352(R11)
	VMOVUPS Y12, 384(R11)
	VMOVUPS Y13, 416(R11)
	VMOVUPS Y14, 448(R11)
	VMOVUPS Y15, 480(R11)
	ADDQ    $64, R10
	ADDQ    BX, R11
	DECQ    CX
	JNZ     prow8
	VZEROUPPER
	RET
