//go:build amd64 && !purego

#include "textflag.h"

// STEP is one k step of the 6×16 tile: load the B row (b0, b1: two halves of 8),
// broadcast each of the six A values and fuse-multiply-add into Y0..Y11, where
// row i of the tile is Y(2i) (columns 0–7) and Y(2i+1) (columns 8–15).
#define STEP(b0, b1, a0, a1, a2, a3, a4, a5) \
	VMOVUPS      b0, Y12;          \
	VMOVUPS      b1, Y13;          \
	VBROADCASTSS a0, Y14;          \
	VFMADD231PS  Y12, Y14, Y0;     \
	VFMADD231PS  Y13, Y14, Y1;     \
	VBROADCASTSS a1, Y15;          \
	VFMADD231PS  Y12, Y15, Y2;     \
	VFMADD231PS  Y13, Y15, Y3;     \
	VBROADCASTSS a2, Y14;          \
	VFMADD231PS  Y12, Y14, Y4;     \
	VFMADD231PS  Y13, Y14, Y5;     \
	VBROADCASTSS a3, Y15;          \
	VFMADD231PS  Y12, Y15, Y6;     \
	VFMADD231PS  Y13, Y15, Y7;     \
	VBROADCASTSS a4, Y14;          \
	VFMADD231PS  Y12, Y14, Y8;     \
	VFMADD231PS  Y13, Y14, Y9;     \
	VBROADCASTSS a5, Y15;          \
	VFMADD231PS  Y12, Y15, Y10;    \
	VFMADD231PS  Y13, Y15, Y11

// ADDROW adds row registers lo, hi into C at DX (c + Σ), stores them and moves DX
// to the next row.
#define ADDROW(lo, hi) \
	VADDPS  (DX), lo, lo;   \
	VADDPS  32(DX), hi, hi; \
	VMOVUPS lo, (DX);       \
	VMOVUPS hi, 32(DX);     \
	ADDQ    R9, DX

// SETROW stores row registers lo, hi into C at DX and moves DX to the next row.
#define SETROW(lo, hi) \
	VMOVUPS lo, (DX);   \
	VMOVUPS hi, 32(DX); \
	ADDQ    R9, DX

// func kern6x16(kc int, a, b *float32, ldb int, c *float32, ldc int, acc bool)
//
// a is a packed 6-row micro-panel (a[p*6+i]); b has row stride ldb floats; each
// sum runs over p in order, starting from zero, and is then stored (acc false) or
// added to c (acc true).
TEXT ·kern6x16(SB), NOSPLIT, $0-49
	MOVQ kc+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DI
	MOVQ ldb+24(FP), R8
	SHLQ $2, R8
	LEAQ (R8)(R8*2), R11
	MOVQ c+32(FP), DX
	MOVQ ldc+40(FP), R9
	SHLQ $2, R9

	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11

	MOVQ CX, BX
	SHRQ $2, BX
	JZ   tail

loop4:
	STEP((DI), 32(DI), 0(SI), 4(SI), 8(SI), 12(SI), 16(SI), 20(SI))
	STEP((DI)(R8*1), 32(DI)(R8*1), 24(SI), 28(SI), 32(SI), 36(SI), 40(SI), 44(SI))
	STEP((DI)(R8*2), 32(DI)(R8*2), 48(SI), 52(SI), 56(SI), 60(SI), 64(SI), 68(SI))
	STEP((DI)(R11*1), 32(DI)(R11*1), 72(SI), 76(SI), 80(SI), 84(SI), 88(SI), 92(SI))
	ADDQ $96, SI
	LEAQ (DI)(R8*4), DI
	DECQ BX
	JNZ  loop4

tail:
	ANDQ $3, CX
	JZ   store

loop1:
	STEP((DI), 32(DI), 0(SI), 4(SI), 8(SI), 12(SI), 16(SI), 20(SI))
	ADDQ $24, SI
	ADDQ R8, DI
	DECQ CX
	JNZ  loop1

store:
	CMPB acc+48(FP), $0
	JEQ  overwrite
	ADDROW(Y0, Y1)
	ADDROW(Y2, Y3)
	ADDROW(Y4, Y5)
	ADDROW(Y6, Y7)
	ADDROW(Y8, Y9)
	ADDROW(Y10, Y11)
	VZEROUPPER
	RET

overwrite:
	SETROW(Y0, Y1)
	SETROW(Y2, Y3)
	SETROW(Y4, Y5)
	SETROW(Y6, Y7)
	SETROW(Y8, Y9)
	SETROW(Y10, Y11)
	VZEROUPPER
	RET

// ROWSTEP4 updates 8 columns at offset off: t = c[off]; t += a0·B[p][off] … a3·B[p+3][off]
// (fused, in order of p); c[off] = t. B rows p..p+3 are at DI, DI+R8, DI+2·R8, DI+R11.
#define ROWSTEP4(off, t) \
	VMOVUPS     off(DX)(AX*4), t;            \
	VFMADD231PS off(DI)(AX*4), Y12, t;       \
	VFMADD231PS off(R12)(AX*4), Y13, t;      \
	VFMADD231PS off(R13)(AX*4), Y14, t;      \
	VFMADD231PS off(R14)(AX*4), Y15, t;      \
	VMOVUPS     t, off(DX)(AX*4)

// ROWSTEP1 is ROWSTEP4 for a single row of B at DI (a in Y12).
#define ROWSTEP1(off, t) \
	VMOVUPS     off(DX)(AX*4), t;      \
	VFMADD231PS off(DI)(AX*4), Y12, t; \
	VMOVUPS     t, off(DX)(AX*4)

// func rowFMA(kc int, a *float32, astride int, b *float32, ldb int, c *float32, n int)
//
// c[j] += Σ_p a[p·astride]·b[p·ldb + j] for j < n (n a positive multiple of 32), each
// c[j] updated by one fused multiply-add per p in order of p. B is read a row at a
// time, left to right, so it streams from memory in long sequential runs.
TEXT ·rowFMA(SB), NOSPLIT, $0-56
	MOVQ kc+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ astride+16(FP), R9
	SHLQ $2, R9
	MOVQ b+24(FP), DI
	MOVQ ldb+32(FP), R8
	SHLQ $2, R8
	LEAQ (R8)(R8*2), R11
	MOVQ c+40(FP), DX
	MOVQ n+48(FP), R10

	MOVQ CX, BX
	SHRQ $2, BX
	JZ   rtail

rloop4:
	VBROADCASTSS (SI), Y12
	ADDQ         R9, SI
	VBROADCASTSS (SI), Y13
	ADDQ         R9, SI
	VBROADCASTSS (SI), Y14
	ADDQ         R9, SI
	VBROADCASTSS (SI), Y15
	ADDQ         R9, SI
	LEAQ         (DI)(R8*1), R12
	LEAQ         (DI)(R8*2), R13
	LEAQ         (DI)(R11*1), R14
	XORQ         AX, AX

rcols4:
	ROWSTEP4(0, Y0)
	ROWSTEP4(32, Y1)
	ROWSTEP4(64, Y2)
	ROWSTEP4(96, Y3)
	ADDQ $32, AX
	CMPQ AX, R10
	JLT  rcols4

	LEAQ (DI)(R8*4), DI
	DECQ BX
	JNZ  rloop4

rtail:
	ANDQ $3, CX
	JZ   rdone

rloop1:
	VBROADCASTSS (SI), Y12
	ADDQ         R9, SI
	XORQ         AX, AX

rcols1:
	ROWSTEP1(0, Y0)
	ROWSTEP1(32, Y1)
	ROWSTEP1(64, Y2)
	ROWSTEP1(96, Y3)
	ADDQ $32, AX
	CMPQ AX, R10
	JLT  rcols1

	ADDQ R8, DI
	DECQ CX
	JNZ  rloop1

rdone:
	VZEROUPPER
	RET
