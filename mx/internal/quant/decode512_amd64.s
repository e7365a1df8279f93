//go:build amd64 && !purego

#include "textflag.h"

// Lane i of iota16 is i: the gather's row index before it is scaled by the row stride.
DATA iota16<>+0(SB)/4, $0
DATA iota16<>+4(SB)/4, $1
DATA iota16<>+8(SB)/4, $2
DATA iota16<>+12(SB)/4, $3
DATA iota16<>+16(SB)/4, $4
DATA iota16<>+20(SB)/4, $5
DATA iota16<>+24(SB)/4, $6
DATA iota16<>+28(SB)/4, $7
DATA iota16<>+32(SB)/4, $8
DATA iota16<>+36(SB)/4, $9
DATA iota16<>+40(SB)/4, $10
DATA iota16<>+44(SB)/4, $11
DATA iota16<>+48(SB)/4, $12
DATA iota16<>+52(SB)/4, $13
DATA iota16<>+56(SB)/4, $14
DATA iota16<>+60(SB)/4, $15
GLOBL iota16<>(SB), RODATA|NOPTR, $64

// Lane i of codes16 is float32(i): the value of 4-bit code i, looked up by VPERMPS (which
// reads only an index's low four bits) in place of a mask and a conversion.
DATA codes16<>+0(SB)/4, $0.0
DATA codes16<>+4(SB)/4, $1.0
DATA codes16<>+8(SB)/4, $2.0
DATA codes16<>+12(SB)/4, $3.0
DATA codes16<>+16(SB)/4, $4.0
DATA codes16<>+20(SB)/4, $5.0
DATA codes16<>+24(SB)/4, $6.0
DATA codes16<>+28(SB)/4, $7.0
DATA codes16<>+32(SB)/4, $8.0
DATA codes16<>+36(SB)/4, $9.0
DATA codes16<>+40(SB)/4, $10.0
DATA codes16<>+44(SB)/4, $11.0
DATA codes16<>+48(SB)/4, $12.0
DATA codes16<>+52(SB)/4, $13.0
DATA codes16<>+56(SB)/4, $14.0
DATA codes16<>+60(SB)/4, $15.0
GLOBL codes16<>(SB), RODATA|NOPTR, $64

// Lane j of nshifts16 shifts code j of a panel row down to the bottom of its word: codes
// 0–7 are in the row's first word, 8–15 in its second, lowest first.
DATA nshifts16<>+0(SB)/4, $0
DATA nshifts16<>+4(SB)/4, $4
DATA nshifts16<>+8(SB)/4, $8
DATA nshifts16<>+12(SB)/4, $12
DATA nshifts16<>+16(SB)/4, $16
DATA nshifts16<>+20(SB)/4, $20
DATA nshifts16<>+24(SB)/4, $24
DATA nshifts16<>+28(SB)/4, $28
DATA nshifts16<>+32(SB)/4, $0
DATA nshifts16<>+36(SB)/4, $4
DATA nshifts16<>+40(SB)/4, $8
DATA nshifts16<>+44(SB)/4, $12
DATA nshifts16<>+48(SB)/4, $16
DATA nshifts16<>+52(SB)/4, $20
DATA nshifts16<>+56(SB)/4, $24
DATA nshifts16<>+60(SB)/4, $28
GLOBL nshifts16<>(SB), RODATA|NOPTR, $64

// T16ROW dequantizes the low nibbles of the sixteen words in Z0 — code q of rows 0..15 —
// with the rows' scales Z10 and biases Z11 (a multiply, then an add: two roundings, as
// the Go decoder computes s·q + b), stores them as one panel row at DI, moves DI on a row
// and shifts the next code down. The codes become floats by lookup in Z9 (codes16), one
// permute in place of a mask and a conversion: the same values.
#define T16ROW \
	VPERMPS   Z9, Z0, Z1;  \
	VMULPS    Z10, Z1, Z1; \
	VADDPS    Z11, Z1, Z1; \
	VMOVUPS   Z1, (DI);    \
	ADDQ      BX, DI;      \
	VPSRLD    $4, Z0, Z0

// func decodeT4x16AVX512(words *uint32, wstride int, sc, bi *float32, dst *float32, ldd, n int)
//
// decodeT4AVX2 for sixteen rows at once: in block b (b < n), row i (i < 16) holds one
// word at words[i·wstride + b], and its eight 4-bit codes are written down column i of
// dst: dst[(8b + q)·ldd + i] = sc[i]·code_q + bi[i]. One gather brings a block's sixteen
// words; each code step is then one panel row of sixteen values, with no transpose.
TEXT ·decodeT4x16AVX512(SB), NOSPLIT, $0-56
	MOVQ         words+0(FP), SI
	MOVQ         wstride+8(FP), AX
	MOVQ         sc+16(FP), R8
	MOVQ         bi+24(FP), R9
	MOVQ         dst+32(FP), DI
	MOVQ         ldd+40(FP), BX
	SHLQ         $2, BX
	MOVQ         n+48(FP), CX
	VPBROADCASTD AX, Z3
	VMOVDQU32    iota16<>(SB), Z2
	VPMULLD      Z3, Z2, Z2 // lane i: i·wstride
	VMOVUPS      (R8), Z10
	VMOVUPS      (R9), Z11
	VMOVUPS      codes16<>(SB), Z9

t16block:
	KXNORW     K1, K1, K1
	VPGATHERDD (SI)(Z2*4), K1, Z0
	T16ROW
	T16ROW
	T16ROW
	T16ROW
	T16ROW
	T16ROW
	T16ROW
	T16ROW
	ADDQ       $4, SI
	DECQ       CX
	JNZ        t16block
	VZEROUPPER
	RET

// func decodeN4AVX512(words *uint32, wpr int, sc, bi *float32, ng int, dst *float32, stride, n, rows int)
//
// decodeN4AVX2 with sixteen lanes: rows rows of W (row r's words at words + r·wpr, its
// scale and bias at sc[r·ng], bi[r·ng]), each n panel rows of 16 consecutive 4-bit codes
// (two words each, consecutive in words) of one group:
// dst[r·16 + i·stride + j] = sc·code_{16i+j} + bi. A row's sixteen possible values are
// formed once, as a multiply then an add (two roundings, as the Go decoder computes
// s·q + b), and each panel row is then one permute of that table by its codes.
TEXT ·decodeN4AVX512(SB), NOSPLIT, $0-72
	MOVQ      words+0(FP), R10
	MOVQ      wpr+8(FP), R12
	SHLQ      $2, R12
	MOVQ      sc+16(FP), R8
	MOVQ      bi+24(FP), R9
	MOVQ      ng+32(FP), R13
	SHLQ      $2, R13
	MOVQ      dst+40(FP), R11
	MOVQ      stride+48(FP), BX
	SHLQ      $2, BX
	MOVQ      rows+64(FP), DX
	VMOVUPS   codes16<>(SB), Z8
	VMOVDQU32 nshifts16<>(SB), Z9
	MOVL      $0xff00, AX
	KMOVW     AX, K1 // lanes 8–15: a panel row's second word

n16row:
	VBROADCASTSS (R8), Z10
	VBROADCASTSS (R9), Z11
	VMULPS       Z10, Z8, Z12
	VADDPS       Z11, Z12, Z12 // Z12[c] = sc·c + bi
	MOVQ         R10, SI
	MOVQ         R11, DI
	MOVQ         n+56(FP), CX

n16loop:
	VPBROADCASTD (SI), Z0
	VPBROADCASTD 4(SI), K1, Z0
	VPSRLVD      Z9, Z0, Z0
	VPERMPS      Z12, Z0, Z1
	VMOVUPS      Z1, (DI)
	ADDQ         $8, SI
	ADDQ         BX, DI
	DECQ         CX
	JNZ          n16loop
	ADDQ         R12, R10
	ADDQ         R13, R8
	ADDQ         R13, R9
	ADDQ         $64, R11
	DECQ         DX
	JNZ          n16row
	VZEROUPPER
	RET
