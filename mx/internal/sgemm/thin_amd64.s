//go:build amd64 && !purego

#include "textflag.h"
#include "rows_amd64.h"

// func thin8x16(k int, a *float32, lda int, b *float32, chunks int, c *float32, ldc int, acc bool)
//
// Eight rows of C = A·B for a product whose K is at most a few k steps (a LoRA rank):
// rows i < 8 of A are read in place at a + i·lda, B comes as nr-column panels packed by
// packB (panel q at b + q·k·16, row p of it 16 floats at + p·16), and C's rows are at
// c + i·ldc for chunks·16 columns. Each element is Σ_p in order of p, one fused
// multiply-add per p starting from zero, then stored (acc false) or added to c — the
// operations of the tile kernels element for element.
TEXT ·thin8x16(SB), NOSPLIT, $0-57
	MOVQ a+8(FP), SI
	MOVQ lda+16(FP), R8
	SHLQ $2, R8
	LEAQ (R8)(R8*2), R11
	LEAQ (SI)(R8*4), R12
	MOVQ b+24(FP), DI
	MOVQ chunks+32(FP), BX
	MOVQ c+40(FP), DX
	MOVQ ldc+48(FP), R10
	SHLQ $2, R10

tchunk:
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	MOVQ   k+0(FP), CX
	MOVQ   SI, AX
	MOVQ   R12, R13

tstep:
	VMOVUPS          (DI), Z8
	VFMADD231PS.BCST (AX), Z8, Z0
	VFMADD231PS.BCST (AX)(R8*1), Z8, Z1
	VFMADD231PS.BCST (AX)(R8*2), Z8, Z2
	VFMADD231PS.BCST (AX)(R11*1), Z8, Z3
	VFMADD231PS.BCST (R13), Z8, Z4
	VFMADD231PS.BCST (R13)(R8*1), Z8, Z5
	VFMADD231PS.BCST (R13)(R8*2), Z8, Z6
	VFMADD231PS.BCST (R13)(R11*1), Z8, Z7
	ADDQ             $4, AX
	ADDQ             $4, R13
	ADDQ             $64, DI
	DECQ             CX
	JNZ              tstep

	// DI has moved k rows of 16 floats on: the next panel.
	MOVQ DX, AX
	CMPB acc+56(FP), $0
	JEQ  tset
	CROWADD(Z0, AX, R10)
	CROWADD(Z1, AX, R10)
	CROWADD(Z2, AX, R10)
	CROWADD(Z3, AX, R10)
	CROWADD(Z4, AX, R10)
	CROWADD(Z5, AX, R10)
	CROWADD(Z6, AX, R10)
	CROWADD(Z7, AX, R10)
	JMP  tnext

tset:
	CROWSET(Z0, AX, R10)
	CROWSET(Z1, AX, R10)
	CROWSET(Z2, AX, R10)
	CROWSET(Z3, AX, R10)
	CROWSET(Z4, AX, R10)
	CROWSET(Z5, AX, R10)
	CROWSET(Z6, AX, R10)
	CROWSET(Z7, AX, R10)

tnext:
	ADDQ $64, DX
	DECQ BX
	JNZ  tchunk
	VZEROUPPER
	RET
