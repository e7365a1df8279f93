//go:build amd64 && !purego

#include "textflag.h"

// Nibble shifts of one word's eight 4-bit codes, lowest first.
DATA shifts4<>+0(SB)/4, $0
DATA shifts4<>+4(SB)/4, $4
DATA shifts4<>+8(SB)/4, $8
DATA shifts4<>+12(SB)/4, $12
DATA shifts4<>+16(SB)/4, $16
DATA shifts4<>+20(SB)/4, $20
DATA shifts4<>+24(SB)/4, $24
DATA shifts4<>+28(SB)/4, $28
GLOBL shifts4<>(SB), RODATA|NOPTR, $32

DATA mask4<>+0(SB)/4, $15
GLOBL mask4<>(SB), RODATA|NOPTR, $4

// DEQ scales the eight codes (int32) of row i in Y(i) by sc[i] and adds bi[i], as a
// multiply then an add (two roundings, as the Go decoder computes s·q + b).
#define DEQ(i, y) \
	VCVTDQ2PS    y, y;          \
	VBROADCASTSS (4*i)(R8), Y10; \
	VMULPS       Y10, y, y;     \
	VBROADCASTSS (4*i)(R9), Y11; \
	VADDPS       Y11, y, y

// TRANSPOSE_STORE writes the transpose of rows Y0..Y7 to DI with row stride BX bytes.
#define TRANSPOSE_STORE \
	VUNPCKLPS  Y1, Y0, Y8;        \
	VUNPCKHPS  Y1, Y0, Y9;        \
	VUNPCKLPS  Y3, Y2, Y10;       \
	VUNPCKHPS  Y3, Y2, Y11;       \
	VUNPCKLPS  Y5, Y4, Y12;       \
	VUNPCKHPS  Y5, Y4, Y13;       \
	VUNPCKLPS  Y7, Y6, Y14;       \
	VUNPCKHPS  Y7, Y6, Y15;       \
	VSHUFPS    $0x44, Y10, Y8, Y0; \
	VSHUFPS    $0xEE, Y10, Y8, Y1; \
	VSHUFPS    $0x44, Y11, Y9, Y2; \
	VSHUFPS    $0xEE, Y11, Y9, Y3; \
	VSHUFPS    $0x44, Y14, Y12, Y4; \
	VSHUFPS    $0xEE, Y14, Y12, Y5; \
	VSHUFPS    $0x44, Y15, Y13, Y6; \
	VSHUFPS    $0xEE, Y15, Y13, Y7; \
	VPERM2F128 $0x20, Y4, Y0, Y8; \
	VPERM2F128 $0x20, Y5, Y1, Y9; \
	VPERM2F128 $0x20, Y6, Y2, Y10; \
	VPERM2F128 $0x20, Y7, Y3, Y11; \
	VPERM2F128 $0x31, Y4, Y0, Y12; \
	VPERM2F128 $0x31, Y5, Y1, Y13; \
	VPERM2F128 $0x31, Y6, Y2, Y14; \
	VPERM2F128 $0x31, Y7, Y3, Y15; \
	VMOVUPS    Y8, (DI);          \
	VMOVUPS    Y9, (DI)(BX*1);    \
	LEAQ       (DI)(BX*2), DI;    \
	VMOVUPS    Y10, (DI);         \
	VMOVUPS    Y11, (DI)(BX*1);   \
	LEAQ       (DI)(BX*2), DI;    \
	VMOVUPS    Y12, (DI);         \
	VMOVUPS    Y13, (DI)(BX*1);   \
	LEAQ       (DI)(BX*2), DI;    \
	VMOVUPS    Y14, (DI);         \
	VMOVUPS    Y15, (DI)(BX*1)

// func decodeT4AVX2(words *uint32, wstride int, sc, bi *float32, dst *float32, ldd, n int)
//
// n consecutive 8×8 blocks along k (one group's scales): in block b, row i (i < 8) holds
// one word at words[i·wstride + b]; its eight 4-bit codes are dequantized with sc[i],
// bi[i] and written down column i of dst: dst[(8b + q)·ldd + i] = sc[i]·code_q + bi[i].
TEXT ·decodeT4AVX2(SB), NOSPLIT, $0-56
	MOVQ words+0(FP), R10
	MOVQ wstride+8(FP), AX
	SHLQ $2, AX
	MOVQ sc+16(FP), R8
	MOVQ bi+24(FP), R9
	MOVQ dst+32(FP), R11
	MOVQ ldd+40(FP), BX
	SHLQ $2, BX
	MOVQ n+48(FP), CX
	VMOVDQU      shifts4<>(SB), Y8
	VPBROADCASTD mask4<>(SB), Y9

t4block:
	MOVQ R10, SI
	MOVQ R11, DI
	VPBROADCASTD (SI), Y0
	VPBROADCASTD (SI)(AX*1), Y1
	LEAQ         (SI)(AX*2), SI
	VPBROADCASTD (SI), Y2
	VPBROADCASTD (SI)(AX*1), Y3
	LEAQ         (SI)(AX*2), SI
	VPBROADCASTD (SI), Y4
	VPBROADCASTD (SI)(AX*1), Y5
	LEAQ         (SI)(AX*2), SI
	VPBROADCASTD (SI), Y6
	VPBROADCASTD (SI)(AX*1), Y7
	VPSRLVD      Y8, Y0, Y0
	VPSRLVD      Y8, Y1, Y1
	VPSRLVD      Y8, Y2, Y2
	VPSRLVD      Y8, Y3, Y3
	VPSRLVD      Y8, Y4, Y4
	VPSRLVD      Y8, Y5, Y5
	VPSRLVD      Y8, Y6, Y6
	VPSRLVD      Y8, Y7, Y7
	VPAND        Y9, Y0, Y0
	VPAND        Y9, Y1, Y1
	VPAND        Y9, Y2, Y2
	VPAND        Y9, Y3, Y3
	VPAND        Y9, Y4, Y4
	VPAND        Y9, Y5, Y5
	VPAND        Y9, Y6, Y6
	VPAND        Y9, Y7, Y7
	DEQ(0, Y0)
	DEQ(1, Y1)
	DEQ(2, Y2)
	DEQ(3, Y3)
	DEQ(4, Y4)
	DEQ(5, Y5)
	DEQ(6, Y6)
	DEQ(7, Y7)
	TRANSPOSE_STORE
	VPBROADCASTD mask4<>(SB), Y9 // the transpose used Y8–Y15
	VMOVDQU      shifts4<>(SB), Y8
	ADDQ         $4, R10
	LEAQ         (R11)(BX*8), R11
	DECQ         CX
	JNZ          t4block
	VZEROUPPER
	RET

// func decodeT8AVX2(words *uint32, wstride int, sc, bi *float32, dst *float32, ldd, n int)
//
// decodeT4AVX2 for 8-bit codes: in block b, row i's eight codes are the eight bytes at
// words[i·wstride + 2b] (two words).
TEXT ·decodeT8AVX2(SB), NOSPLIT, $0-56
	MOVQ words+0(FP), R10
	MOVQ wstride+8(FP), AX
	SHLQ $2, AX
	MOVQ sc+16(FP), R8
	MOVQ bi+24(FP), R9
	MOVQ dst+32(FP), R11
	MOVQ ldd+40(FP), BX
	SHLQ $2, BX
	MOVQ n+48(FP), CX

t8block:
	MOVQ R10, SI
	MOVQ R11, DI
	VPMOVZXBD (SI), Y0
	VPMOVZXBD (SI)(AX*1), Y1
	LEAQ      (SI)(AX*2), SI
	VPMOVZXBD (SI), Y2
	VPMOVZXBD (SI)(AX*1), Y3
	LEAQ      (SI)(AX*2), SI
	VPMOVZXBD (SI), Y4
	VPMOVZXBD (SI)(AX*1), Y5
	LEAQ      (SI)(AX*2), SI
	VPMOVZXBD (SI), Y6
	VPMOVZXBD (SI)(AX*1), Y7
	DEQ(0, Y0)
	DEQ(1, Y1)
	DEQ(2, Y2)
	DEQ(3, Y3)
	DEQ(4, Y4)
	DEQ(5, Y5)
	DEQ(6, Y6)
	DEQ(7, Y7)
	TRANSPOSE_STORE
	ADDQ $8, R10
	LEAQ (R11)(BX*8), R11
	DECQ CX
	JNZ  t8block
	VZEROUPPER
	RET

// func decodeN4AVX2(words *uint32, wpr int, sc, bi *float32, ng int, dst *float32, stride, n, rows int)
//
// rows rows of W (row r's words at words + r·wpr, its scale and bias at sc[r·ng], bi[r·ng]),
// each n panel rows of 16 consecutive 4-bit codes (two words each, consecutive in words) of
// one group: dst[r·16 + i·stride + j] = sc·code_{16i+j} + bi, a multiply then an add.
TEXT ·decodeN4AVX2(SB), NOSPLIT, $0-72
	MOVQ         words+0(FP), R10
	MOVQ         wpr+8(FP), R12
	SHLQ         $2, R12
	MOVQ         sc+16(FP), R8
	MOVQ         bi+24(FP), R9
	MOVQ         ng+32(FP), R13
	SHLQ         $2, R13
	MOVQ         dst+40(FP), R11
	MOVQ         stride+48(FP), BX
	SHLQ         $2, BX
	MOVQ         rows+64(FP), DX
	VMOVDQU      shifts4<>(SB), Y8
	VPBROADCASTD mask4<>(SB), Y9

n4row:
	VBROADCASTSS (R8), Y10
	VBROADCASTSS (R9), Y11
	MOVQ         R10, SI
	MOVQ         R11, DI
	MOVQ         n+56(FP), CX

n4loop:
	VPBROADCASTD (SI), Y0
	VPBROADCASTD 4(SI), Y1
	VPSRLVD      Y8, Y0, Y0
	VPSRLVD      Y8, Y1, Y1
	VPAND        Y9, Y0, Y0
	VPAND        Y9, Y1, Y1
	VCVTDQ2PS    Y0, Y0
	VCVTDQ2PS    Y1, Y1
	VMULPS       Y10, Y0, Y0
	VMULPS       Y10, Y1, Y1
	VADDPS       Y11, Y0, Y0
	VADDPS       Y11, Y1, Y1
	VMOVUPS      Y0, (DI)
	VMOVUPS      Y1, 32(DI)
	ADDQ         $8, SI
	ADDQ         BX, DI
	DECQ         CX
	JNZ          n4loop
	ADDQ         R12, R10
	ADDQ         R13, R8
	ADDQ         R13, R9
	ADDQ         $64, R11
	DECQ         DX
	JNZ          n4row
	VZEROUPPER
	RET

// func decodeN8AVX2(words *uint32, wpr int, sc, bi *float32, ng int, dst *float32, stride, n, rows int)
//
// decodeN4AVX2 for 8-bit codes: a panel row's 16 codes are 16 consecutive bytes.
TEXT ·decodeN8AVX2(SB), NOSPLIT, $0-72
	MOVQ words+0(FP), R10
	MOVQ wpr+8(FP), R12
	SHLQ $2, R12
	MOVQ sc+16(FP), R8
	MOVQ bi+24(FP), R9
	MOVQ ng+32(FP), R13
	SHLQ $2, R13
	MOVQ dst+40(FP), R11
	MOVQ stride+48(FP), BX
	SHLQ $2, BX
	MOVQ rows+64(FP), DX

n8row:
	VBROADCASTSS (R8), Y10
	VBROADCASTSS (R9), Y11
	MOVQ         R10, SI
	MOVQ         R11, DI
	MOVQ         n+56(FP), CX

n8loop:
	VPMOVZXBD (SI), Y0
	VPMOVZXBD 8(SI), Y1
	VCVTDQ2PS Y0, Y0
	VCVTDQ2PS Y1, Y1
	VMULPS    Y10, Y0, Y0
	VMULPS    Y10, Y1, Y1
	VADDPS    Y11, Y0, Y0
	VADDPS    Y11, Y1, Y1
	VMOVUPS   Y0, (DI)
	VMOVUPS   Y1, 32(DI)
	ADDQ      $16, SI
	ADDQ      BX, DI
	DECQ      CX
	JNZ       n8loop
	ADDQ      R12, R10
	ADDQ      R13, R8
	ADDQ      R13, R9
	ADDQ      $64, R11
	DECQ      DX
	JNZ       n8row
	VZEROUPPER
	RET

// func prefetchRows(p *float32, stride, n int)
// Hints the line holding p[i·stride] into L1 for i < n (PREFETCHT0): one element of each
// of n rows, such as the scales of the next panel's rows. A hint never faults and changes
// no value.
TEXT ·prefetchRows(SB), NOSPLIT, $0-24
	MOVQ p+0(FP), AX
	MOVQ stride+8(FP), BX
	SHLQ $2, BX
	MOVQ n+16(FP), CX
	TESTQ CX, CX
	JLE  prdone

prloop:
	PREFETCHT0 (AX)
	ADDQ BX, AX
	DECQ CX
	JNZ  prloop

prdone:
	RET
