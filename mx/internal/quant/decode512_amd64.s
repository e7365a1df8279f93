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

DATA nibble<>+0(SB)/4, $15
GLOBL nibble<>(SB), RODATA|NOPTR, $4

// T16ROW dequantizes the low nibbles of the sixteen words in Z0 — code q of rows 0..15 —
// with the rows' scales Z10 and biases Z11 (a multiply, then an add: two roundings, as
// the Go decoder computes s·q + b), stores them as one panel row at DI, moves DI on a row
// and shifts the next code down.
#define T16ROW \
	VPANDD    Z9, Z0, Z1;  \
	VCVTDQ2PS Z1, Z1;      \
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
	VPBROADCASTD nibble<>(SB), Z9

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
