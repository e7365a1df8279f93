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

// T16STEP dequantizes the low nibbles of the sixteen words in zs — code q of rows 0..15 —
// with the rows' scales Z10 and biases Z11 (a multiply, then an add: two roundings, as
// the Go decoder computes s·q + b), stores them as one panel row at DI through zt, moves
// DI on a row and shifts the next code down. The codes become floats by lookup in Z9
// (codes16), one permute in place of a mask and a conversion: the same values.
#define T16STEP(zs, zt) \
	VPERMPS Z9, zs, zt;   \
	VMULPS  Z10, zt, zt;  \
	VADDPS  Z11, zt, zt;  \
	VMOVUPS zt, (DI);     \
	ADDQ    BX, DI;       \
	VPSRLD  $4, zs, zs

// T16WORD is T16STEP eight times: the eight codes of the sixteen words in zs (one
// block), lowest first, as eight panel rows, with Z28 as the scratch register.
#define T16WORD(zs) \
	T16STEP(zs, Z28); \
	T16STEP(zs, Z28); \
	T16STEP(zs, Z28); \
	T16STEP(zs, Z28); \
	T16STEP(zs, Z28); \
	T16STEP(zs, Z28); \
	T16STEP(zs, Z28); \
	T16STEP(zs, Z28)

// Qword indices for VPERMI2Q (0–7: the first table, 8–15: the second) that join the
// 128-bit lanes 0 and 2 (qperm0) or 1 and 3 (qperm1) of two registers pairwise: the last
// step of the sixteen-row transpose in decodeT4x16AVX512.
DATA qperm0<>+0(SB)/8, $0
DATA qperm0<>+8(SB)/8, $1
DATA qperm0<>+16(SB)/8, $8
DATA qperm0<>+24(SB)/8, $9
DATA qperm0<>+32(SB)/8, $4
DATA qperm0<>+40(SB)/8, $5
DATA qperm0<>+48(SB)/8, $12
DATA qperm0<>+56(SB)/8, $13
GLOBL qperm0<>(SB), RODATA|NOPTR, $64
DATA qperm1<>+0(SB)/8, $2
DATA qperm1<>+8(SB)/8, $3
DATA qperm1<>+16(SB)/8, $10
DATA qperm1<>+24(SB)/8, $11
DATA qperm1<>+32(SB)/8, $6
DATA qperm1<>+40(SB)/8, $7
DATA qperm1<>+48(SB)/8, $14
DATA qperm1<>+56(SB)/8, $15
GLOBL qperm1<>(SB), RODATA|NOPTR, $64

// T16HINT hints the next sixteen rows' words at this k into L1 (rows 16–31 from SI, R11
// being row 8, AX a row's bytes and DX three rows'): packT decodes the next panel after
// this one's groups, and a weight's words stream from memory (in a training step this
// decoder spent about half its time waiting for them).
#define T16HINT \
	LEAQ       (R11)(AX*8), R14; \
	PREFETCHT0 (R14);            \
	PREFETCHT0 (R14)(AX*1);      \
	PREFETCHT0 (R14)(AX*2);      \
	PREFETCHT0 (R14)(DX*1);      \
	LEAQ       (R14)(AX*4), R14; \
	PREFETCHT0 (R14);            \
	PREFETCHT0 (R14)(AX*1);      \
	PREFETCHT0 (R14)(AX*2);      \
	PREFETCHT0 (R14)(DX*1);      \
	LEAQ       (R14)(AX*4), R14; \
	PREFETCHT0 (R14);            \
	PREFETCHT0 (R14)(AX*1);      \
	PREFETCHT0 (R14)(AX*2);      \
	PREFETCHT0 (R14)(DX*1);      \
	LEAQ       (R14)(AX*4), R14; \
	PREFETCHT0 (R14);            \
	PREFETCHT0 (R14)(AX*1);      \
	PREFETCHT0 (R14)(AX*2);      \
	PREFETCHT0 (R14)(DX*1)

// func decodeT4x16AVX512(words *uint32, wstride int, sc, bi *float32, dst *float32, ldd, n int)
//
// decodeT4AVX2 for sixteen rows at once: in block b (b < n), row i (i < 16) holds one
// word at words[i·wstride + b], and its eight 4-bit codes are written down column i of
// dst: dst[(8b + q)·ldd + i] = sc[i]·code_q + bi[i]. Each code step is one panel row of
// sixteen values. Blocks go eight at a time: sixteen loads of eight words (one per row)
// and a 16×8 transpose bring each block's sixteen words into one register (a gather per
// block took about half the decoder's time); then four at a time, the same way; the last
// one to three blocks take a gather each.
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
	VMOVDQU32    iota16<>(SB), Z31
	VPMULLD      Z3, Z31, Z31 // lane i: i·wstride, the gather's offsets
	VMOVUPS      (R8), Z10
	VMOVUPS      (R9), Z11
	VMOVUPS      codes16<>(SB), Z9
	VMOVDQU64    qperm0<>(SB), Z29
	VMOVDQU64    qperm1<>(SB), Z30

	// Row pointers: row i at SI + i·W (W = AX bytes, DX = 3W); R10, R11 and R12 are rows
	// 4, 8 and 12.
	SHLQ $2, AX
	LEAQ (AX)(AX*2), DX
	LEAQ (SI)(AX*4), R10
	LEAQ (SI)(AX*8), R11
	LEAQ (R10)(AX*8), R12
	MOVQ CX, R13
	SHRQ $3, R13 // whole runs of eight blocks
	JZ   t16rest

t16chunk:
	T16HINT

	// Z(i) = row i's eight words | row i+8's.
	VMOVDQU      (SI), Y0
	VINSERTI64X4 $1, (R11), Z0, Z0
	VMOVDQU      (SI)(AX*1), Y1
	VINSERTI64X4 $1, (R11)(AX*1), Z1, Z1
	VMOVDQU      (SI)(AX*2), Y2
	VINSERTI64X4 $1, (R11)(AX*2), Z2, Z2
	VMOVDQU      (SI)(DX*1), Y3
	VINSERTI64X4 $1, (R11)(DX*1), Z3, Z3
	VMOVDQU      (R10), Y4
	VINSERTI64X4 $1, (R12), Z4, Z4
	VMOVDQU      (R10)(AX*1), Y5
	VINSERTI64X4 $1, (R12)(AX*1), Z5, Z5
	VMOVDQU      (R10)(AX*2), Y6
	VINSERTI64X4 $1, (R12)(AX*2), Z6, Z6
	VMOVDQU      (R10)(DX*1), Y7
	VINSERTI64X4 $1, (R12)(DX*1), Z7, Z7

	// An 8×8 transpose in each 256-bit half: pairs of rows, then quads, then the lanes.
	VUNPCKLPS Z1, Z0, Z12
	VUNPCKHPS Z1, Z0, Z13
	VUNPCKLPS Z3, Z2, Z14
	VUNPCKHPS Z3, Z2, Z15
	VUNPCKLPS Z5, Z4, Z16
	VUNPCKHPS Z5, Z4, Z17
	VUNPCKLPS Z7, Z6, Z18
	VUNPCKHPS Z7, Z6, Z19
	VUNPCKLPD Z14, Z12, Z0 // rows 0–3, words 0 and 4
	VUNPCKHPD Z14, Z12, Z1 // words 1 and 5
	VUNPCKLPD Z15, Z13, Z2 // words 2 and 6
	VUNPCKHPD Z15, Z13, Z3 // words 3 and 7
	VUNPCKLPD Z18, Z16, Z4 // rows 4–7
	VUNPCKHPD Z18, Z16, Z5
	VUNPCKLPD Z19, Z17, Z6
	VUNPCKHPD Z19, Z17, Z7
	VMOVDQA64 Z29, Z20
	VPERMI2Q  Z4, Z0, Z20  // word 0 of rows 0–15
	VMOVDQA64 Z29, Z21
	VPERMI2Q  Z5, Z1, Z21  // word 1
	VMOVDQA64 Z29, Z22
	VPERMI2Q  Z6, Z2, Z22  // word 2
	VMOVDQA64 Z29, Z23
	VPERMI2Q  Z7, Z3, Z23  // word 3
	VMOVDQA64 Z30, Z24
	VPERMI2Q  Z4, Z0, Z24  // word 4
	VMOVDQA64 Z30, Z25
	VPERMI2Q  Z5, Z1, Z25  // word 5
	VMOVDQA64 Z30, Z26
	VPERMI2Q  Z6, Z2, Z26  // word 6
	VMOVDQA64 Z30, Z27
	VPERMI2Q  Z7, Z3, Z27  // word 7

	T16WORD(Z20)
	T16WORD(Z21)
	T16WORD(Z22)
	T16WORD(Z23)
	T16WORD(Z24)
	T16WORD(Z25)
	T16WORD(Z26)
	T16WORD(Z27)

	ADDQ $32, SI
	ADDQ $32, R10
	ADDQ $32, R11
	ADDQ $32, R12
	DECQ R13
	JNZ  t16chunk

t16rest:
	ANDQ $7, CX
	CMPQ CX, $4
	JLT  t16tail

	// Four blocks (a group of 32 codes, or what is left of eight): Z(q) = rows q, q+4,
	// q+8 and q+12's four words, then a 4×4 transpose in each 128-bit lane.
	T16HINT
	VMOVDQU      (SI), X0
	VINSERTI32X4 $1, (R10), Z0, Z0
	VINSERTI32X4 $2, (R11), Z0, Z0
	VINSERTI32X4 $3, (R12), Z0, Z0
	VMOVDQU      (SI)(AX*1), X1
	VINSERTI32X4 $1, (R10)(AX*1), Z1, Z1
	VINSERTI32X4 $2, (R11)(AX*1), Z1, Z1
	VINSERTI32X4 $3, (R12)(AX*1), Z1, Z1
	VMOVDQU      (SI)(AX*2), X2
	VINSERTI32X4 $1, (R10)(AX*2), Z2, Z2
	VINSERTI32X4 $2, (R11)(AX*2), Z2, Z2
	VINSERTI32X4 $3, (R12)(AX*2), Z2, Z2
	VMOVDQU      (SI)(DX*1), X3
	VINSERTI32X4 $1, (R10)(DX*1), Z3, Z3
	VINSERTI32X4 $2, (R11)(DX*1), Z3, Z3
	VINSERTI32X4 $3, (R12)(DX*1), Z3, Z3
	VUNPCKLPS    Z1, Z0, Z12
	VUNPCKHPS    Z1, Z0, Z13
	VUNPCKLPS    Z3, Z2, Z14
	VUNPCKHPS    Z3, Z2, Z15
	VUNPCKLPD    Z14, Z12, Z20 // word 0 of rows 0–15
	VUNPCKHPD    Z14, Z12, Z21 // word 1
	VUNPCKLPD    Z15, Z13, Z22 // word 2
	VUNPCKHPD    Z15, Z13, Z23 // word 3
	T16WORD(Z20)
	T16WORD(Z21)
	T16WORD(Z22)
	T16WORD(Z23)
	ADDQ         $16, SI
	SUBQ         $4, CX

t16tail:
	TESTQ CX, CX
	JZ    t16done

t16block:
	KXNORW     K1, K1, K1
	VPGATHERDD (SI)(Z31*4), K1, Z0
	T16WORD(Z0)
	ADDQ       $4, SI
	DECQ       CX
	JNZ        t16block

t16done:
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
	MOVQ      R12, R14
	SHLQ      $5, R14 // 32 rows of W

n16row:
	// Hint the words of the row 32 ahead into L1: a weight's rows stream from memory, and
	// one row's codes take only a few cycles to decode.
	PREFETCHT0   (R10)(R14*1)
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
