//go:build amd64 && !purego

#include "textflag.h"

// The experts' combine (combine.go) with AVX2, lane for lane the Go loops' operations:
// each product rounded in float32, converted exactly to float64, added in float64.

// func axpyRoundedF64(acc *float64, x *float32, w float32, n int)
// acc[i] += float64(float32(x[i]·w)) for i < n, n a positive multiple of 8.
TEXT ·axpyRoundedF64(SB), NOSPLIT, $0-32
	MOVQ acc+0(FP), DI
	MOVQ x+8(FP), SI
	VBROADCASTSS w+16(FP), Y4
	MOVQ n+24(FP), CX
loop:
	VMOVUPS (SI), Y0
	VMULPS  Y4, Y0, Y0        // float32 products
	VCVTPS2PD X0, Y1          // lanes 0..3 to float64 (exact)
	VEXTRACTF128 $1, Y0, X2
	VCVTPS2PD X2, Y2          // lanes 4..7
	VADDPD  (DI), Y1, Y1
	VADDPD  32(DI), Y2, Y2
	VMOVUPD Y1, (DI)
	VMOVUPD Y2, 32(DI)
	ADDQ $32, SI
	ADDQ $64, DI
	SUBQ $8, CX
	JNE  loop
	VZEROUPPER
	RET

// func roundF64(dst *float32, src *float64, n int)
// dst[i] = float32(src[i]) (round to nearest even) for i < n, n a positive multiple of 8.
TEXT ·roundF64(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
rloop:
	VCVTPD2PSY (SI), X0
	VCVTPD2PSY 32(SI), X1
	VMOVUPS X0, (DI)
	VMOVUPS X1, 16(DI)
	ADDQ $64, SI
	ADDQ $32, DI
	SUBQ $8, CX
	JNE  rloop
	VZEROUPPER
	RET
