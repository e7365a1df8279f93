//go:build amd64 && !purego

#include "textflag.h"

// Eight-lane copies of gelu.go's float32 constants (bit patterns), and 127 for the exponent.

DATA gC<>+0(SB)/4, $0x3f4c422a
DATA gC<>+4(SB)/4, $0x3f4c422a
DATA gC<>+8(SB)/4, $0x3f4c422a
DATA gC<>+12(SB)/4, $0x3f4c422a
DATA gC<>+16(SB)/4, $0x3f4c422a
DATA gC<>+20(SB)/4, $0x3f4c422a
DATA gC<>+24(SB)/4, $0x3f4c422a
DATA gC<>+28(SB)/4, $0x3f4c422a
GLOBL gC<>(SB), RODATA|NOPTR, $32
DATA gA<>+0(SB)/4, $0x3d372713
DATA gA<>+4(SB)/4, $0x3d372713
DATA gA<>+8(SB)/4, $0x3d372713
DATA gA<>+12(SB)/4, $0x3d372713
DATA gA<>+16(SB)/4, $0x3d372713
DATA gA<>+20(SB)/4, $0x3d372713
DATA gA<>+24(SB)/4, $0x3d372713
DATA gA<>+28(SB)/4, $0x3d372713
GLOBL gA<>(SB), RODATA|NOPTR, $32
DATA g3A<>+0(SB)/4, $0x3e095d4f
DATA g3A<>+4(SB)/4, $0x3e095d4f
DATA g3A<>+8(SB)/4, $0x3e095d4f
DATA g3A<>+12(SB)/4, $0x3e095d4f
DATA g3A<>+16(SB)/4, $0x3e095d4f
DATA g3A<>+20(SB)/4, $0x3e095d4f
DATA g3A<>+24(SB)/4, $0x3e095d4f
DATA g3A<>+28(SB)/4, $0x3e095d4f
GLOBL g3A<>(SB), RODATA|NOPTR, $32
DATA g2C<>+0(SB)/4, $0x3fcc422a
DATA g2C<>+4(SB)/4, $0x3fcc422a
DATA g2C<>+8(SB)/4, $0x3fcc422a
DATA g2C<>+12(SB)/4, $0x3fcc422a
DATA g2C<>+16(SB)/4, $0x3fcc422a
DATA g2C<>+20(SB)/4, $0x3fcc422a
DATA g2C<>+24(SB)/4, $0x3fcc422a
DATA g2C<>+28(SB)/4, $0x3fcc422a
GLOBL g2C<>(SB), RODATA|NOPTR, $32
DATA gM2<>+0(SB)/4, $0xc0000000
DATA gM2<>+4(SB)/4, $0xc0000000
DATA gM2<>+8(SB)/4, $0xc0000000
DATA gM2<>+12(SB)/4, $0xc0000000
DATA gM2<>+16(SB)/4, $0xc0000000
DATA gM2<>+20(SB)/4, $0xc0000000
DATA gM2<>+24(SB)/4, $0xc0000000
DATA gM2<>+28(SB)/4, $0xc0000000
GLOBL gM2<>(SB), RODATA|NOPTR, $32
DATA g87<>+0(SB)/4, $0x42ae0000
DATA g87<>+4(SB)/4, $0x42ae0000
DATA g87<>+8(SB)/4, $0x42ae0000
DATA g87<>+12(SB)/4, $0x42ae0000
DATA g87<>+16(SB)/4, $0x42ae0000
DATA g87<>+20(SB)/4, $0x42ae0000
DATA g87<>+24(SB)/4, $0x42ae0000
DATA g87<>+28(SB)/4, $0x42ae0000
GLOBL g87<>(SB), RODATA|NOPTR, $32
DATA gN87<>+0(SB)/4, $0xc2ae0000
DATA gN87<>+4(SB)/4, $0xc2ae0000
DATA gN87<>+8(SB)/4, $0xc2ae0000
DATA gN87<>+12(SB)/4, $0xc2ae0000
DATA gN87<>+16(SB)/4, $0xc2ae0000
DATA gN87<>+20(SB)/4, $0xc2ae0000
DATA gN87<>+24(SB)/4, $0xc2ae0000
DATA gN87<>+28(SB)/4, $0xc2ae0000
GLOBL gN87<>(SB), RODATA|NOPTR, $32
DATA gLog2e<>+0(SB)/4, $0x3fb8aa3b
DATA gLog2e<>+4(SB)/4, $0x3fb8aa3b
DATA gLog2e<>+8(SB)/4, $0x3fb8aa3b
DATA gLog2e<>+12(SB)/4, $0x3fb8aa3b
DATA gLog2e<>+16(SB)/4, $0x3fb8aa3b
DATA gLog2e<>+20(SB)/4, $0x3fb8aa3b
DATA gLog2e<>+24(SB)/4, $0x3fb8aa3b
DATA gLog2e<>+28(SB)/4, $0x3fb8aa3b
GLOBL gLog2e<>(SB), RODATA|NOPTR, $32
DATA gC1<>+0(SB)/4, $0x3f318000
DATA gC1<>+4(SB)/4, $0x3f318000
DATA gC1<>+8(SB)/4, $0x3f318000
DATA gC1<>+12(SB)/4, $0x3f318000
DATA gC1<>+16(SB)/4, $0x3f318000
DATA gC1<>+20(SB)/4, $0x3f318000
DATA gC1<>+24(SB)/4, $0x3f318000
DATA gC1<>+28(SB)/4, $0x3f318000
GLOBL gC1<>(SB), RODATA|NOPTR, $32
DATA gC2<>+0(SB)/4, $0xb95e8083
DATA gC2<>+4(SB)/4, $0xb95e8083
DATA gC2<>+8(SB)/4, $0xb95e8083
DATA gC2<>+12(SB)/4, $0xb95e8083
DATA gC2<>+16(SB)/4, $0xb95e8083
DATA gC2<>+20(SB)/4, $0xb95e8083
DATA gC2<>+24(SB)/4, $0xb95e8083
DATA gC2<>+28(SB)/4, $0xb95e8083
GLOBL gC2<>(SB), RODATA|NOPTR, $32
DATA gP0<>+0(SB)/4, $0x39506967
DATA gP0<>+4(SB)/4, $0x39506967
DATA gP0<>+8(SB)/4, $0x39506967
DATA gP0<>+12(SB)/4, $0x39506967
DATA gP0<>+16(SB)/4, $0x39506967
DATA gP0<>+20(SB)/4, $0x39506967
DATA gP0<>+24(SB)/4, $0x39506967
DATA gP0<>+28(SB)/4, $0x39506967
GLOBL gP0<>(SB), RODATA|NOPTR, $32
DATA gP1<>+0(SB)/4, $0x3ab743ce
DATA gP1<>+4(SB)/4, $0x3ab743ce
DATA gP1<>+8(SB)/4, $0x3ab743ce
DATA gP1<>+12(SB)/4, $0x3ab743ce
DATA gP1<>+16(SB)/4, $0x3ab743ce
DATA gP1<>+20(SB)/4, $0x3ab743ce
DATA gP1<>+24(SB)/4, $0x3ab743ce
DATA gP1<>+28(SB)/4, $0x3ab743ce
GLOBL gP1<>(SB), RODATA|NOPTR, $32
DATA gP2<>+0(SB)/4, $0x3c088908
DATA gP2<>+4(SB)/4, $0x3c088908
DATA gP2<>+8(SB)/4, $0x3c088908
DATA gP2<>+12(SB)/4, $0x3c088908
DATA gP2<>+16(SB)/4, $0x3c088908
DATA gP2<>+20(SB)/4, $0x3c088908
DATA gP2<>+24(SB)/4, $0x3c088908
DATA gP2<>+28(SB)/4, $0x3c088908
GLOBL gP2<>(SB), RODATA|NOPTR, $32
DATA gP3<>+0(SB)/4, $0x3d2aa9c1
DATA gP3<>+4(SB)/4, $0x3d2aa9c1
DATA gP3<>+8(SB)/4, $0x3d2aa9c1
DATA gP3<>+12(SB)/4, $0x3d2aa9c1
DATA gP3<>+16(SB)/4, $0x3d2aa9c1
DATA gP3<>+20(SB)/4, $0x3d2aa9c1
DATA gP3<>+24(SB)/4, $0x3d2aa9c1
DATA gP3<>+28(SB)/4, $0x3d2aa9c1
GLOBL gP3<>(SB), RODATA|NOPTR, $32
DATA gP4<>+0(SB)/4, $0x3e2aaaaa
DATA gP4<>+4(SB)/4, $0x3e2aaaaa
DATA gP4<>+8(SB)/4, $0x3e2aaaaa
DATA gP4<>+12(SB)/4, $0x3e2aaaaa
DATA gP4<>+16(SB)/4, $0x3e2aaaaa
DATA gP4<>+20(SB)/4, $0x3e2aaaaa
DATA gP4<>+24(SB)/4, $0x3e2aaaaa
DATA gP4<>+28(SB)/4, $0x3e2aaaaa
GLOBL gP4<>(SB), RODATA|NOPTR, $32
DATA gP5<>+0(SB)/4, $0x3f000000
DATA gP5<>+4(SB)/4, $0x3f000000
DATA gP5<>+8(SB)/4, $0x3f000000
DATA gP5<>+12(SB)/4, $0x3f000000
DATA gP5<>+16(SB)/4, $0x3f000000
DATA gP5<>+20(SB)/4, $0x3f000000
DATA gP5<>+24(SB)/4, $0x3f000000
DATA gP5<>+28(SB)/4, $0x3f000000
GLOBL gP5<>(SB), RODATA|NOPTR, $32
DATA gOne<>+0(SB)/4, $0x3f800000
DATA gOne<>+4(SB)/4, $0x3f800000
DATA gOne<>+8(SB)/4, $0x3f800000
DATA gOne<>+12(SB)/4, $0x3f800000
DATA gOne<>+16(SB)/4, $0x3f800000
DATA gOne<>+20(SB)/4, $0x3f800000
DATA gOne<>+24(SB)/4, $0x3f800000
DATA gOne<>+28(SB)/4, $0x3f800000
GLOBL gOne<>(SB), RODATA|NOPTR, $32
DATA g127<>+0(SB)/4, $127
DATA g127<>+4(SB)/4, $127
DATA g127<>+8(SB)/4, $127
DATA g127<>+12(SB)/4, $127
DATA g127<>+16(SB)/4, $127
DATA g127<>+20(SB)/4, $127
DATA g127<>+24(SB)/4, $127
DATA g127<>+28(SB)/4, $127
GLOBL g127<>(SB), RODATA|NOPTR, $32

// SIGMA sets Y1 = s = 1/(1 + e^(−2u)) for x in Y0, op for op as gelu.go's geluSigma
// (x² stays in Y2 for GELU′). It uses Y3–Y8.
#define SIGMA \
	VMULPS     Y0, Y0, Y2;            \
	VMULPS     Y0, Y2, Y3;            \
	VMULPS     gA<>(SB), Y3, Y3;      \
	VADDPS     Y3, Y0, Y3;            \
	VMULPS     gC<>(SB), Y3, Y3;      \
	VMULPS     gM2<>(SB), Y3, Y3;     \
	VCMPPS     $0x1e, g87<>(SB), Y3, Y7; \
	VMINPS     g87<>(SB), Y3, Y4;     \
	VMAXPS     gN87<>(SB), Y4, Y4;    \
	VMULPS     gLog2e<>(SB), Y4, Y5;  \
	VROUNDPS   $0, Y5, Y5;            \
	VMULPS     gC1<>(SB), Y5, Y6;     \
	VSUBPS     Y6, Y4, Y4;            \
	VMULPS     gC2<>(SB), Y5, Y6;     \
	VSUBPS     Y6, Y4, Y4;            \
	VMULPS     Y4, Y4, Y6;            \
	VMULPS     gP0<>(SB), Y4, Y8;     \
	VADDPS     gP1<>(SB), Y8, Y8;     \
	VMULPS     Y4, Y8, Y8;            \
	VADDPS     gP2<>(SB), Y8, Y8;     \
	VMULPS     Y4, Y8, Y8;            \
	VADDPS     gP3<>(SB), Y8, Y8;     \
	VMULPS     Y4, Y8, Y8;            \
	VADDPS     gP4<>(SB), Y8, Y8;     \
	VMULPS     Y4, Y8, Y8;            \
	VADDPS     gP5<>(SB), Y8, Y8;     \
	VMULPS     Y6, Y8, Y8;            \
	VADDPS     Y4, Y8, Y8;            \
	VADDPS     gOne<>(SB), Y8, Y8;    \
	VCVTPS2DQ  Y5, Y5;                \
	VPADDD     g127<>(SB), Y5, Y5;    \
	VPSLLD     $23, Y5, Y5;           \
	VMULPS     Y5, Y8, Y8;            \
	VADDPS     gOne<>(SB), Y8, Y8;    \
	VMOVUPS    gOne<>(SB), Y1;        \
	VDIVPS     Y8, Y1, Y1;            \
	VANDNPS    Y1, Y7, Y1

// GRAD sets Y12 = GELU′(x) = s + (x·s)·(1 − s)·(2c·(1 + 3a·x²)) from Y0 = x, Y1 = s,
// Y2 = x², as gelu.go's geluGradFrom. It uses Y10–Y12.
#define GRAD \
	VMULPS  g3A<>(SB), Y2, Y10; \
	VADDPS  gOne<>(SB), Y10, Y10; \
	VMULPS  g2C<>(SB), Y10, Y10; \
	VMULPS  Y1, Y0, Y11;        \
	VMOVUPS gOne<>(SB), Y12;    \
	VSUBPS  Y1, Y12, Y12;       \
	VMULPS  Y12, Y11, Y12;      \
	VMULPS  Y10, Y12, Y12;      \
	VADDPS  Y12, Y1, Y12

// func geluKernel(out, x *float32, n int)
TEXT ·geluKernel(SB), NOSPLIT, $0-24
	MOVQ out+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $3, CX

geluloop:
	VMOVUPS (SI), Y0
	SIGMA
	VMULPS  Y1, Y0, Y9
	VMOVUPS Y9, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	DECQ    CX
	JNZ     geluloop
	VZEROUPPER
	RET

// func geluGradKernel(out, x, gr *float32, n int)
TEXT ·geluGradKernel(SB), NOSPLIT, $0-32
	MOVQ out+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ gr+16(FP), DX
	MOVQ n+24(FP), CX
	SHRQ $3, CX

gradloop:
	VMOVUPS (SI), Y0
	SIGMA
	GRAD
	VMULPS  (DX), Y12, Y12
	VMOVUPS Y12, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DX
	ADDQ    $32, DI
	DECQ    CX
	JNZ     gradloop
	VZEROUPPER
	RET

// func gegluKernel(out, gate, up *float32, n int)
TEXT ·gegluKernel(SB), NOSPLIT, $0-32
	MOVQ out+0(FP), DI
	MOVQ gate+8(FP), SI
	MOVQ up+16(FP), DX
	MOVQ n+24(FP), CX
	SHRQ $3, CX

gegluloop:
	VMOVUPS (SI), Y0
	SIGMA
	VMULPS  Y1, Y0, Y9
	VMULPS  (DX), Y9, Y9
	VMOVUPS Y9, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DX
	ADDQ    $32, DI
	DECQ    CX
	JNZ     gegluloop
	VZEROUPPER
	RET

// func gegluGradKernel(dg, du, gate, up, ct *float32, n int)
TEXT ·gegluGradKernel(SB), NOSPLIT, $0-48
	MOVQ dg+0(FP), DI
	MOVQ du+8(FP), R8
	MOVQ gate+16(FP), SI
	MOVQ up+24(FP), DX
	MOVQ ct+32(FP), R9
	MOVQ n+40(FP), CX
	SHRQ $3, CX

geglugradloop:
	VMOVUPS (SI), Y0
	SIGMA
	GRAD
	VMOVUPS (R9), Y13
	VMULPS  (DX), Y13, Y14
	VMULPS  Y12, Y14, Y14
	VMOVUPS Y14, (DI)
	VMULPS  Y1, Y0, Y9
	VMULPS  Y9, Y13, Y9
	VMOVUPS Y9, (R8)
	ADDQ    $32, SI
	ADDQ    $32, DX
	ADDQ    $32, R9
	ADDQ    $32, DI
	ADDQ    $32, R8
	DECQ    CX
	JNZ     geglugradloop
	VZEROUPPER
	RET

// tanhKernel's eight-lane constants (bit patterns of gelu.go's tanhF32 float32 values).

DATA tAbs<>+0(SB)/4, $0x7fffffff
DATA tAbs<>+4(SB)/4, $0x7fffffff
DATA tAbs<>+8(SB)/4, $0x7fffffff
DATA tAbs<>+12(SB)/4, $0x7fffffff
DATA tAbs<>+16(SB)/4, $0x7fffffff
DATA tAbs<>+20(SB)/4, $0x7fffffff
DATA tAbs<>+24(SB)/4, $0x7fffffff
DATA tAbs<>+28(SB)/4, $0x7fffffff
GLOBL tAbs<>(SB), RODATA|NOPTR, $32
DATA tSign<>+0(SB)/4, $0x80000000
DATA tSign<>+4(SB)/4, $0x80000000
DATA tSign<>+8(SB)/4, $0x80000000
DATA tSign<>+12(SB)/4, $0x80000000
DATA tSign<>+16(SB)/4, $0x80000000
DATA tSign<>+20(SB)/4, $0x80000000
DATA tSign<>+24(SB)/4, $0x80000000
DATA tSign<>+28(SB)/4, $0x80000000
GLOBL tSign<>(SB), RODATA|NOPTR, $32
DATA tP0<>+0(SB)/4, $0xbbbaf0ea
DATA tP0<>+4(SB)/4, $0xbbbaf0ea
DATA tP0<>+8(SB)/4, $0xbbbaf0ea
DATA tP0<>+12(SB)/4, $0xbbbaf0ea
DATA tP0<>+16(SB)/4, $0xbbbaf0ea
DATA tP0<>+20(SB)/4, $0xbbbaf0ea
DATA tP0<>+24(SB)/4, $0xbbbaf0ea
DATA tP0<>+28(SB)/4, $0xbbbaf0ea
GLOBL tP0<>(SB), RODATA|NOPTR, $32
DATA tP1<>+0(SB)/4, $0x3ca9134e
DATA tP1<>+4(SB)/4, $0x3ca9134e
DATA tP1<>+8(SB)/4, $0x3ca9134e
DATA tP1<>+12(SB)/4, $0x3ca9134e
DATA tP1<>+16(SB)/4, $0x3ca9134e
DATA tP1<>+20(SB)/4, $0x3ca9134e
DATA tP1<>+24(SB)/4, $0x3ca9134e
DATA tP1<>+28(SB)/4, $0x3ca9134e
GLOBL tP1<>(SB), RODATA|NOPTR, $32
DATA tP2<>+0(SB)/4, $0x3d5c1e2d
DATA tP2<>+4(SB)/4, $0x3d5c1e2d
DATA tP2<>+8(SB)/4, $0x3d5c1e2d
DATA tP2<>+12(SB)/4, $0x3d5c1e2d
DATA tP2<>+16(SB)/4, $0x3d5c1e2d
DATA tP2<>+20(SB)/4, $0x3d5c1e2d
DATA tP2<>+24(SB)/4, $0x3d5c1e2d
DATA tP2<>+28(SB)/4, $0x3d5c1e2d
GLOBL tP2<>(SB), RODATA|NOPTR, $32
DATA tP3<>+0(SB)/4, $0x3e088393
DATA tP3<>+4(SB)/4, $0x3e088393
DATA tP3<>+8(SB)/4, $0x3e088393
DATA tP3<>+12(SB)/4, $0x3e088393
DATA tP3<>+16(SB)/4, $0x3e088393
DATA tP3<>+20(SB)/4, $0x3e088393
DATA tP3<>+24(SB)/4, $0x3e088393
DATA tP3<>+28(SB)/4, $0x3e088393
GLOBL tP3<>(SB), RODATA|NOPTR, $32
DATA tP4<>+0(SB)/4, $0x3eaaaa99
DATA tP4<>+4(SB)/4, $0x3eaaaa99
DATA tP4<>+8(SB)/4, $0x3eaaaa99
DATA tP4<>+12(SB)/4, $0x3eaaaa99
DATA tP4<>+16(SB)/4, $0x3eaaaa99
DATA tP4<>+20(SB)/4, $0x3eaaaa99
DATA tP4<>+24(SB)/4, $0x3eaaaa99
DATA tP4<>+28(SB)/4, $0x3eaaaa99
GLOBL tP4<>(SB), RODATA|NOPTR, $32
DATA t0625<>+0(SB)/4, $0x3f200000
DATA t0625<>+4(SB)/4, $0x3f200000
DATA t0625<>+8(SB)/4, $0x3f200000
DATA t0625<>+12(SB)/4, $0x3f200000
DATA t0625<>+16(SB)/4, $0x3f200000
DATA t0625<>+20(SB)/4, $0x3f200000
DATA t0625<>+24(SB)/4, $0x3f200000
DATA t0625<>+28(SB)/4, $0x3f200000
GLOBL t0625<>(SB), RODATA|NOPTR, $32
DATA t9<>+0(SB)/4, $0x41100000
DATA t9<>+4(SB)/4, $0x41100000
DATA t9<>+8(SB)/4, $0x41100000
DATA t9<>+12(SB)/4, $0x41100000
DATA t9<>+16(SB)/4, $0x41100000
DATA t9<>+20(SB)/4, $0x41100000
DATA t9<>+24(SB)/4, $0x41100000
DATA t9<>+28(SB)/4, $0x41100000
GLOBL t9<>(SB), RODATA|NOPTR, $32
DATA t18<>+0(SB)/4, $0x41900000
DATA t18<>+4(SB)/4, $0x41900000
DATA t18<>+8(SB)/4, $0x41900000
DATA t18<>+12(SB)/4, $0x41900000
DATA t18<>+16(SB)/4, $0x41900000
DATA t18<>+20(SB)/4, $0x41900000
DATA t18<>+24(SB)/4, $0x41900000
DATA t18<>+28(SB)/4, $0x41900000
GLOBL t18<>(SB), RODATA|NOPTR, $32
DATA tTwo<>+0(SB)/4, $0x40000000
DATA tTwo<>+4(SB)/4, $0x40000000
DATA tTwo<>+8(SB)/4, $0x40000000
DATA tTwo<>+12(SB)/4, $0x40000000
DATA tTwo<>+16(SB)/4, $0x40000000
DATA tTwo<>+20(SB)/4, $0x40000000
DATA tTwo<>+24(SB)/4, $0x40000000
DATA tTwo<>+28(SB)/4, $0x40000000
GLOBL tTwo<>(SB), RODATA|NOPTR, $32

// func tanhKernel(out, x *float32, n int)
// out[i] = tanhF32(x[i]) for n a positive multiple of 8, op for op as gelu.go's tanhF32:
// both branches for every lane, then blended (|x| ≥ 0.625: 1 − 2/(e^(2|x|) + 1) with
// x's sign, 1 past 9; else x + x³·P(x²); ±0 kept).
TEXT ·tanhKernel(SB), NOSPLIT, $0-24
	MOVQ out+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $3, CX

tanhloop:
	VMOVUPS (SI), Y0                  // x
	VANDPS  tAbs<>(SB), Y0, Y9        // z = |x|
	// The large branch: e = expPoly(min(2z, 18)), r = 1 − 2/(e + 1).
	VADDPS  Y9, Y9, Y4                // 2z (exact)
	VMINPS  t18<>(SB), Y4, Y4
	VMULPS     gLog2e<>(SB), Y4, Y5
	VROUNDPS   $0, Y5, Y5
	VMULPS     gC1<>(SB), Y5, Y6
	VSUBPS     Y6, Y4, Y4
	VMULPS     gC2<>(SB), Y5, Y6
	VSUBPS     Y6, Y4, Y4
	VMULPS     Y4, Y4, Y6
	VMULPS     gP0<>(SB), Y4, Y8
	VADDPS     gP1<>(SB), Y8, Y8
	VMULPS     Y4, Y8, Y8
	VADDPS     gP2<>(SB), Y8, Y8
	VMULPS     Y4, Y8, Y8
	VADDPS     gP3<>(SB), Y8, Y8
	VMULPS     Y4, Y8, Y8
	VADDPS     gP4<>(SB), Y8, Y8
	VMULPS     Y4, Y8, Y8
	VADDPS     gP5<>(SB), Y8, Y8
	VMULPS     Y6, Y8, Y8
	VADDPS     Y4, Y8, Y8
	VADDPS     gOne<>(SB), Y8, Y8
	VCVTPS2DQ  Y5, Y5
	VPADDD     g127<>(SB), Y5, Y5
	VPSLLD     $23, Y5, Y5
	VMULPS     Y5, Y8, Y8             // e
	VADDPS     gOne<>(SB), Y8, Y8     // e + 1
	VMOVUPS    tTwo<>(SB), Y1
	VDIVPS     Y8, Y1, Y1             // 2/(e + 1)
	VMOVUPS    gOne<>(SB), Y2
	VSUBPS     Y1, Y2, Y1             // r = 1 − 2/(e + 1)
	VCMPPS     $0x1e, t9<>(SB), Y9, Y3 // z > 9
	VBLENDVPS  Y3, Y2, Y1, Y1         // 1 there
	VANDPS     tSign<>(SB), Y0, Y3
	VXORPS     Y3, Y1, Y1             // x's sign
	// The small branch: z2 = x², p = ((((P0·z2 + P1)·z2 − P2)·z2 + P3)·z2 − P4), x + (p·z2)·x.
	VMULPS     Y0, Y0, Y2             // z2
	VMULPS     tP0<>(SB), Y2, Y10
	VADDPS     tP1<>(SB), Y10, Y10
	VMULPS     Y2, Y10, Y10
	VSUBPS     tP2<>(SB), Y10, Y10
	VMULPS     Y2, Y10, Y10
	VADDPS     tP3<>(SB), Y10, Y10
	VMULPS     Y2, Y10, Y10
	VSUBPS     tP4<>(SB), Y10, Y10
	VMULPS     Y2, Y10, Y10
	VMULPS     Y0, Y10, Y10
	VADDPS     Y0, Y10, Y10
	VXORPS     Y3, Y3, Y3
	VCMPPS     $0x00, Y3, Y0, Y3      // x == 0 (ordered): keep x (±0)
	VBLENDVPS  Y3, Y0, Y10, Y10
	VCMPPS     $0x1d, t0625<>(SB), Y9, Y3 // z ≥ 0.625 (ordered: NaN takes the small branch)
	VBLENDVPS  Y3, Y1, Y10, Y10
	VMOVUPS    Y10, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	DECQ    CX
	JNZ     tanhloop
	VZEROUPPER
	RET
