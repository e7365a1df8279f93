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

// WSTEP is one k step of the 12×32 tile: the B rows of two adjacent panels (16 floats
// each, Z24 and Z25) times each of the twelve A values, broadcast into a register once
// and used for both: row i of the tile is Zi (columns 0–15) and Z(12+i) (16–31). Rows
// 0–5 come from the A micro-panel at SI, rows 6–11 from the next one at R10; off is the
// byte offset of this step in both.
#define WSTEP(b0, b1, off) \
	VMOVUPS b0, Z24; \
	VMOVUPS b1, Z25; \
	VBROADCASTSS off+0(SI), Z26; \
	VFMADD231PS Z26, Z24, Z0; \
	VFMADD231PS Z26, Z25, Z12; \
	VBROADCASTSS off+4(SI), Z27; \
	VFMADD231PS Z27, Z24, Z1; \
	VFMADD231PS Z27, Z25, Z13; \
	VBROADCASTSS off+8(SI), Z28; \
	VFMADD231PS Z28, Z24, Z2; \
	VFMADD231PS Z28, Z25, Z14; \
	VBROADCASTSS off+12(SI), Z29; \
	VFMADD231PS Z29, Z24, Z3; \
	VFMADD231PS Z29, Z25, Z15; \
	VBROADCASTSS off+16(SI), Z30; \
	VFMADD231PS Z30, Z24, Z4; \
	VFMADD231PS Z30, Z25, Z16; \
	VBROADCASTSS off+20(SI), Z31; \
	VFMADD231PS Z31, Z24, Z5; \
	VFMADD231PS Z31, Z25, Z17; \
	VBROADCASTSS off+0(R10), Z26; \
	VFMADD231PS Z26, Z24, Z6; \
	VFMADD231PS Z26, Z25, Z18; \
	VBROADCASTSS off+4(R10), Z27; \
	VFMADD231PS Z27, Z24, Z7; \
	VFMADD231PS Z27, Z25, Z19; \
	VBROADCASTSS off+8(R10), Z28; \
	VFMADD231PS Z28, Z24, Z8; \
	VFMADD231PS Z28, Z25, Z20; \
	VBROADCASTSS off+12(R10), Z29; \
	VFMADD231PS Z29, Z24, Z9; \
	VFMADD231PS Z29, Z25, Z21; \
	VBROADCASTSS off+16(R10), Z30; \
	VFMADD231PS Z30, Z24, Z10; \
	VFMADD231PS Z30, Z25, Z22; \
	VBROADCASTSS off+20(R10), Z31; \
	VFMADD231PS Z31, Z24, Z11; \
	VFMADD231PS Z31, Z25, Z23;

// func kern12x32(kc int, a0, a1, b0, b1 *float32, ldb int, c *float32, ldc int, acc bool)
//
// kern12x16 on two adjacent B panels at once (b0: columns 0–15, b1: 16–31, both with row
// stride ldb floats): twice the columns share each broadcast of A, so a k step issues
// fourteen loads for twenty-four fused multiply-adds instead of thirteen for twelve.
// Every element is formed as kern12x16 forms it (one fused multiply-add per p, in order,
// from zero, then stored or added to c), so the bits are two kern12x16 calls'.
TEXT ·kern12x32(SB), NOSPLIT, $0-65
	MOVQ kc+0(FP), CX
	MOVQ a0+8(FP), SI
	MOVQ a1+16(FP), R10
	MOVQ b0+24(FP), DI
	MOVQ b1+32(FP), R12
	MOVQ ldb+40(FP), R8
	SHLQ $2, R8
	MOVQ c+48(FP), DX
	MOVQ ldc+56(FP), R9
	SHLQ $2, R9

	// Hint the tile of C into L1 while the k loop runs: the first k-block of a product
	// stores into a fresh (cold) array.
	MOVQ DX, BX
	PREFETCHT0 (BX)
	PREFETCHT0 64(BX)
	ADDQ R9, BX
	PREFETCHT0 (BX)
	PREFETCHT0 64(BX)
	ADDQ R9, BX
	PREFETCHT0 (BX)
	PREFETCHT0 64(BX)
	ADDQ R9, BX
	PREFETCHT0 (BX)
	PREFETCHT0 64(BX)
	ADDQ R9, BX
	PREFETCHT0 (BX)
	PREFETCHT0 64(BX)
	ADDQ R9, BX
	PREFETCHT0 (BX)
	PREFETCHT0 64(BX)
	ADDQ R9, BX
	PREFETCHT0 (BX)
	PREFETCHT0 64(BX)
	ADDQ R9, BX
	PREFETCHT0 (BX)
	PREFETCHT0 64(BX)
	ADDQ R9, BX
	PREFETCHT0 (BX)
	PREFETCHT0 64(BX)
	ADDQ R9, BX
	PREFETCHT0 (BX)
	PREFETCHT0 64(BX)
	ADDQ R9, BX
	PREFETCHT0 (BX)
	PREFETCHT0 64(BX)
	ADDQ R9, BX
	PREFETCHT0 (BX)
	PREFETCHT0 64(BX)
	ADDQ R9, BX

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
	VPXORD Z12, Z12, Z12
	VPXORD Z13, Z13, Z13
	VPXORD Z14, Z14, Z14
	VPXORD Z15, Z15, Z15
	VPXORD Z16, Z16, Z16
	VPXORD Z17, Z17, Z17
	VPXORD Z18, Z18, Z18
	VPXORD Z19, Z19, Z19
	VPXORD Z20, Z20, Z20
	VPXORD Z21, Z21, Z21
	VPXORD Z22, Z22, Z22
	VPXORD Z23, Z23, Z23

	MOVQ CX, BX
	SHRQ $1, BX
	JZ   wtail

wloop2:
	WSTEP((DI), (R12), 0)
	WSTEP((DI)(R8*1), (R12)(R8*1), 24)
	ADDQ $48, SI
	ADDQ $48, R10
	LEAQ (DI)(R8*2), DI
	LEAQ (R12)(R8*2), R12
	DECQ BX
	JNZ  wloop2

wtail:
	ANDQ $1, CX
	JZ   wstore
	WSTEP((DI), (R12), 0)

wstore:
	LEAQ 64(DX), BX
	CMPB acc+64(FP), $0
	JEQ  woverwrite
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
	CROWADD(Z12, BX, R9)
	CROWADD(Z13, BX, R9)
	CROWADD(Z14, BX, R9)
	CROWADD(Z15, BX, R9)
	CROWADD(Z16, BX, R9)
	CROWADD(Z17, BX, R9)
	CROWADD(Z18, BX, R9)
	CROWADD(Z19, BX, R9)
	CROWADD(Z20, BX, R9)
	CROWADD(Z21, BX, R9)
	CROWADD(Z22, BX, R9)
	CROWADD(Z23, BX, R9)
	VZEROUPPER
	RET

woverwrite:
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
	CROWSET(Z12, BX, R9)
	CROWSET(Z13, BX, R9)
	CROWSET(Z14, BX, R9)
	CROWSET(Z15, BX, R9)
	CROWSET(Z16, BX, R9)
	CROWSET(Z17, BX, R9)
	CROWSET(Z18, BX, R9)
	CROWSET(Z19, BX, R9)
	CROWSET(Z20, BX, R9)
	CROWSET(Z21, BX, R9)
	CROWSET(Z22, BX, R9)
	CROWSET(Z23, BX, R9)
	VZEROUPPER
	RET
