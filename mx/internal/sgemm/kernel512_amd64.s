//go:build amd64 && !purego

#include "textflag.h"
#include "rows_amd64.h"

// ZSTEP is one k step of the 12×16 tile: load the B row (16 floats, one ZMM) and
// fuse-multiply-add each of the twelve A values, broadcast straight from memory, into
// Z0..Z11 (row i of the tile is Zi). Rows 0–5 come from the A micro-panel at SI, rows
// 6–11 from the next one at R10; off is the byte offset of this step in both.
#define ZSTEP(boff, off) \
	VMOVUPS          boff, Z12;          \
	VFMADD231PS.BCST off+0(SI), Z12, Z0;  \
	VFMADD231PS.BCST off+4(SI), Z12, Z1;  \
	VFMADD231PS.BCST off+8(SI), Z12, Z2;  \
	VFMADD231PS.BCST off+12(SI), Z12, Z3; \
	VFMADD231PS.BCST off+16(SI), Z12, Z4; \
	VFMADD231PS.BCST off+20(SI), Z12, Z5; \
	VFMADD231PS.BCST off+0(R10), Z12, Z6;  \
	VFMADD231PS.BCST off+4(R10), Z12, Z7;  \
	VFMADD231PS.BCST off+8(R10), Z12, Z8;  \
	VFMADD231PS.BCST off+12(R10), Z12, Z9; \
	VFMADD231PS.BCST off+16(R10), Z12, Z10; \
	VFMADD231PS.BCST off+20(R10), Z12, Z11

// func kern12x16(kc int, a0, a1, b *float32, ldb int, c *float32, ldc int, acc bool)
//
// a0 and a1 are two packed 6-row micro-panels (a[p*6+i]) — rows 0–5 and 6–11 of the
// tile; b has row stride ldb floats; each sum runs over p in order, starting from
// zero, one fused multiply-add per p, and is then stored (acc false) or added to c
// (acc true): element for element the same operations as kern6x16.
TEXT ·kern12x16(SB), NOSPLIT, $0-57
	MOVQ kc+0(FP), CX
	MOVQ a0+8(FP), SI
	MOVQ a1+16(FP), R10
	MOVQ b+24(FP), DI
	MOVQ ldb+32(FP), R8
	SHLQ $2, R8
	LEAQ (R8)(R8*2), R11
	MOVQ c+40(FP), DX
	MOVQ ldc+48(FP), R9
	SHLQ $2, R9

	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11

	MOVQ CX, BX
	SHRQ $2, BX
	JZ   ztail

zloop4:
	ZSTEP((DI), 0)
	ZSTEP((DI)(R8*1), 24)
	ZSTEP((DI)(R8*2), 48)
	ZSTEP((DI)(R11*1), 72)
	ADDQ $96, SI
	ADDQ $96, R10
	LEAQ (DI)(R8*4), DI
	DECQ BX
	JNZ  zloop4

ztail:
	ANDQ $3, CX
	JZ   zstore

zloop1:
	ZSTEP((DI), 0)
	ADDQ $24, SI
	ADDQ $24, R10
	ADDQ R8, DI
	DECQ CX
	JNZ  zloop1

zstore:
	CMPB acc+56(FP), $0
	JEQ  zoverwrite
	CROWADD(Z0, DX, R9)
	CROWADD(Z1, DX, R9)
	CROWADD(Z2, DX, R9)
	CROWADD(Z3, DX, R9)
	CROWADD(Z4, DX, R9)
	CROWADD(Z5, DX, R9)
	CROWADD(Z6, DX, R9)
	CROWADD(Z7, DX, R9)
	CROWADD(Z8, DX, R9)
	CROWADD(Z9, DX, R9)
	CROWADD(Z10, DX, R9)
	CROWADD(Z11, DX, R9)
	VZEROUPPER
	RET

zoverwrite:
	CROWSET(Z0, DX, R9)
	CROWSET(Z1, DX, R9)
	CROWSET(Z2, DX, R9)
	CROWSET(Z3, DX, R9)
	CROWSET(Z4, DX, R9)
	CROWSET(Z5, DX, R9)
	CROWSET(Z6, DX, R9)
	CROWSET(Z7, DX, R9)
	CROWSET(Z8, DX, R9)
	CROWSET(Z9, DX, R9)
	CROWSET(Z10, DX, R9)
	CROWSET(Z11, DX, R9)
	VZEROUPPER
	RET

// ZSTEP6 is one k step of the 6×16 tile in ZMM registers: Z0..Z5 are its rows.
#define ZSTEP6(boff, off) \
	VMOVUPS          boff, Z12;          \
	VFMADD231PS.BCST off+0(SI), Z12, Z0;  \
	VFMADD231PS.BCST off+4(SI), Z12, Z1;  \
	VFMADD231PS.BCST off+8(SI), Z12, Z2;  \
	VFMADD231PS.BCST off+12(SI), Z12, Z3; \
	VFMADD231PS.BCST off+16(SI), Z12, Z4; \
	VFMADD231PS.BCST off+20(SI), Z12, Z5

// func kern6x16Z(kc int, a, b *float32, ldb int, c *float32, ldc int, acc bool)
//
// kern6x16 with a ZMM register per row: the same operations element for element.
TEXT ·kern6x16Z(SB), NOSPLIT, $0-49
	MOVQ kc+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DI
	MOVQ ldb+24(FP), R8
	SHLQ $2, R8
	LEAQ (R8)(R8*2), R11
	MOVQ c+32(FP), DX
	MOVQ ldc+40(FP), R9
	SHLQ $2, R9

	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5

	MOVQ CX, BX
	SHRQ $2, BX
	JZ   z6tail

z6loop4:
	ZSTEP6((DI), 0)
	ZSTEP6((DI)(R8*1), 24)
	ZSTEP6((DI)(R8*2), 48)
	ZSTEP6((DI)(R11*1), 72)
	ADDQ $96, SI
	LEAQ (DI)(R8*4), DI
	DECQ BX
	JNZ  z6loop4

z6tail:
	ANDQ $3, CX
	JZ   z6store

z6loop1:
	ZSTEP6((DI), 0)
	ADDQ $24, SI
	ADDQ R8, DI
	DECQ CX
	JNZ  z6loop1

z6store:
	CMPB acc+48(FP), $0
	JEQ  z6overwrite
	CROWADD(Z0, DX, R9)
	CROWADD(Z1, DX, R9)
	CROWADD(Z2, DX, R9)
	CROWADD(Z3, DX, R9)
	CROWADD(Z4, DX, R9)
	CROWADD(Z5, DX, R9)
	VZEROUPPER
	RET

z6overwrite:
	CROWSET(Z0, DX, R9)
	CROWSET(Z1, DX, R9)
	CROWSET(Z2, DX, R9)
	CROWSET(Z3, DX, R9)
	CROWSET(Z4, DX, R9)
	CROWSET(Z5, DX, R9)
	VZEROUPPER
	RET
