//go:build amd64 && !purego

#include "textflag.h"
#include "rows_amd64.h"

// ST16STEP is one k step of the 16×8 tile with a transposed A: Z8 holds the sixteen A
// values of the step (rows 0..15, consecutive in memory), and each of the eight B values
// of the step, broadcast from the panel row at DI, is fused-multiply-added into its
// column's accumulator Z0..Z7 (lane i of Zj is C[i, j]).
#define ST16STEP \
	VMOVUPS          (SI), Z8;        \
	VFMADD231PS.BCST 0(DI), Z8, Z0;   \
	VFMADD231PS.BCST 4(DI), Z8, Z1;   \
	VFMADD231PS.BCST 8(DI), Z8, Z2;   \
	VFMADD231PS.BCST 12(DI), Z8, Z3;  \
	VFMADD231PS.BCST 16(DI), Z8, Z4;  \
	VFMADD231PS.BCST 20(DI), Z8, Z5;  \
	VFMADD231PS.BCST 24(DI), Z8, Z6;  \
	VFMADD231PS.BCST 28(DI), Z8, Z7

// func skinnyT16(kc int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int, acc bool)
//
// skinnyT for sixteen rows: C[i, j] (+)= Σ_p A[i, p]·B[p, j] for i < 16, j < 8, with A[i, p]
// at a[p·lda + i] (a transposed A read in place: one ZMM load per k step) and B a panel
// with row stride ldb. Each sum starts from zero, takes one fused multiply-add per p in
// order of p and is then stored or added to c, as skinnyT does; the column accumulators
// are transposed into rows before the store.
TEXT ·skinnyT16(SB), NOSPLIT, $0-57
	MOVQ   kc+0(FP), CX
	MOVQ   a+8(FP), SI
	MOVQ   lda+16(FP), R12
	SHLQ   $2, R12
	MOVQ   b+24(FP), DI
	MOVQ   ldb+32(FP), R8
	SHLQ   $2, R8
	MOVQ   c+40(FP), DX
	MOVQ   ldc+48(FP), R9
	SHLQ   $2, R9
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7

t16loop:
	ST16STEP
	ADDQ R12, SI
	ADDQ R8, DI
	DECQ CX
	JNZ  t16loop

	// Rows 8..15 (the accumulators' high halves) wait in Y16..Y23.
	VEXTRACTF32X8 $1, Z0, Y16
	VEXTRACTF32X8 $1, Z1, Y17
	VEXTRACTF32X8 $1, Z2, Y18
	VEXTRACTF32X8 $1, Z3, Y19
	VEXTRACTF32X8 $1, Z4, Y20
	VEXTRACTF32X8 $1, Z5, Y21
	VEXTRACTF32X8 $1, Z6, Y22
	VEXTRACTF32X8 $1, Z7, Y23
	TRANSPOSE8
	CMPB acc+56(FP), $0
	JEQ  t16set1
	CROWADD(Y8, DX, R9)
	CROWADD(Y9, DX, R9)
	CROWADD(Y10, DX, R9)
	CROWADD(Y11, DX, R9)
	CROWADD(Y12, DX, R9)
	CROWADD(Y13, DX, R9)
	CROWADD(Y14, DX, R9)
	CROWADD(Y15, DX, R9)
	JMP  t16half2

t16set1:
	CROWSET(Y8, DX, R9)
	CROWSET(Y9, DX, R9)
	CROWSET(Y10, DX, R9)
	CROWSET(Y11, DX, R9)
	CROWSET(Y12, DX, R9)
	CROWSET(Y13, DX, R9)
	CROWSET(Y14, DX, R9)
	CROWSET(Y15, DX, R9)

t16half2:
	VMOVAPS Y16, Y0
	VMOVAPS Y17, Y1
	VMOVAPS Y18, Y2
	VMOVAPS Y19, Y3
	VMOVAPS Y20, Y4
	VMOVAPS Y21, Y5
	VMOVAPS Y22, Y6
	VMOVAPS Y23, Y7
	TRANSPOSE8
	CMPB acc+56(FP), $0
	JEQ  t16set2
	CROWADD(Y8, DX, R9)
	CROWADD(Y9, DX, R9)
	CROWADD(Y10, DX, R9)
	CROWADD(Y11, DX, R9)
	CROWADD(Y12, DX, R9)
	CROWADD(Y13, DX, R9)
	CROWADD(Y14, DX, R9)
	CROWADD(Y15, DX, R9)
	VZEROUPPER
	RET

t16set2:
	CROWSET(Y8, DX, R9)
	CROWSET(Y9, DX, R9)
	CROWSET(Y10, DX, R9)
	CROWSET(Y11, DX, R9)
	CROWSET(Y12, DX, R9)
	CROWSET(Y13, DX, R9)
	CROWSET(Y14, DX, R9)
	CROWSET(Y15, DX, R9)
	VZEROUPPER
	RET
