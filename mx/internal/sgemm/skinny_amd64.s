//go:build amd64 && !purego

#include "textflag.h"
#include "rows_amd64.h"

// SKSTEP is one k step of the 8×8 skinny tile: Y8 holds the B row, each of the eight A
// values is broadcast and fused-multiply-added into its row's accumulator Y0..Y7.
#define SKSTEP(a0, a1, a2, a3, a4, a5, a6, a7) \
	VMOVUPS      (DI), Y8;      \
	VBROADCASTSS a0, Y9;        \
	VFMADD231PS  Y8, Y9, Y0;    \
	VBROADCASTSS a1, Y10;       \
	VFMADD231PS  Y8, Y10, Y1;   \
	VBROADCASTSS a2, Y11;       \
	VFMADD231PS  Y8, Y11, Y2;   \
	VBROADCASTSS a3, Y12;       \
	VFMADD231PS  Y8, Y12, Y3;   \
	VBROADCASTSS a4, Y13;       \
	VFMADD231PS  Y8, Y13, Y4;   \
	VBROADCASTSS a5, Y14;       \
	VFMADD231PS  Y8, Y14, Y5;   \
	VBROADCASTSS a6, Y15;       \
	VFMADD231PS  Y8, Y15, Y6;   \
	VBROADCASTSS a7, Y9;        \
	VFMADD231PS  Y8, Y9, Y7

#define SKZERO \
	VXORPS Y0, Y0, Y0; \
	VXORPS Y1, Y1, Y1; \
	VXORPS Y2, Y2, Y2; \
	VXORPS Y3, Y3, Y3; \
	VXORPS Y4, Y4, Y4; \
	VXORPS Y5, Y5, Y5; \
	VXORPS Y6, Y6, Y6; \
	VXORPS Y7, Y7, Y7

#define SKSTORE(label) \
	CMPB acc+56(FP), $0;    \
	JEQ  label;             \
	CROWADD(Y0, DX, R9);    \
	CROWADD(Y1, DX, R9);    \
	CROWADD(Y2, DX, R9);    \
	CROWADD(Y3, DX, R9);    \
	CROWADD(Y4, DX, R9);    \
	CROWADD(Y5, DX, R9);    \
	CROWADD(Y6, DX, R9);    \
	CROWADD(Y7, DX, R9);    \
	VZEROUPPER;             \
	RET;                    \
label:;                 \
	CROWSET(Y0, DX, R9);    \
	CROWSET(Y1, DX, R9);    \
	CROWSET(Y2, DX, R9);    \
	CROWSET(Y3, DX, R9);    \
	CROWSET(Y4, DX, R9);    \
	CROWSET(Y5, DX, R9);    \
	CROWSET(Y6, DX, R9);    \
	CROWSET(Y7, DX, R9);    \
	VZEROUPPER;             \
	RET

// func skinnyN(kc int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int, acc bool)
//
// The 8×8 tile C[i, j] (+)= Σ_p A[i, p]·B[p, j] with A read in place, row i at
// a + i·lda (no packing), and B a panel with row stride ldb. Each sum starts from zero,
// takes one fused multiply-add per p in order of p and is then stored or added to c:
// the same operations, element for element, as the 6×16 tile kernel.
TEXT ·skinnyN(SB), NOSPLIT, $0-57
	MOVQ kc+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ lda+16(FP), R12
	SHLQ $2, R12
	LEAQ (R12)(R12*2), R13 // 3·lda
	LEAQ (R12)(R12*4), R14 // 5·lda
	LEAQ (R13)(R12*4), R11 // 7·lda
	MOVQ b+24(FP), DI
	MOVQ ldb+32(FP), R8
	SHLQ $2, R8
	MOVQ c+40(FP), DX
	MOVQ ldc+48(FP), R9
	SHLQ $2, R9
	SKZERO

nloop:
	SKSTEP((SI), (SI)(R12*1), (SI)(R12*2), (SI)(R13*1), (SI)(R12*4), (SI)(R14*1), (SI)(R13*2), (SI)(R11*1))
	ADDQ $4, SI
	ADDQ R8, DI
	DECQ CX
	JNZ  nloop
	SKSTORE(nset)

// func skinnyT(kc int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int, acc bool)
//
// skinnyN for a transposed A: A[i, p] is a[p·lda + i], so the eight values of a k step
// are consecutive.
TEXT ·skinnyT(SB), NOSPLIT, $0-57
	MOVQ kc+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ lda+16(FP), R12
	SHLQ $2, R12
	MOVQ b+24(FP), DI
	MOVQ ldb+32(FP), R8
	SHLQ $2, R8
	MOVQ c+40(FP), DX
	MOVQ ldc+48(FP), R9
	SHLQ $2, R9
	SKZERO

tloop:
	SKSTEP(0(SI), 4(SI), 8(SI), 12(SI), 16(SI), 20(SI), 24(SI), 28(SI))
	ADDQ R12, SI
	ADDQ R8, DI
	DECQ CX
	JNZ  tloop
	SKSTORE(tset)
