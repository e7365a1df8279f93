//go:build amd64 && !purego

#include "textflag.h"

// func dotPD(a, b *float32, n int, sums *[4]float64)
//
// sums[k] = Σ_{i ≡ k mod 4} float64(a[i])·float64(b[i]) for i < n (a positive multiple of
// 4), added in order of i: lane k of one four-double register is dot4's partial sum s_k.
TEXT ·dotPD(SB), NOSPLIT, $0-32
	MOVQ   a+0(FP), SI
	MOVQ   b+8(FP), DX
	MOVQ   n+16(FP), CX
	MOVQ   sums+24(FP), DI
	VXORPD Y0, Y0, Y0

dloop:
	VCVTPS2PD (SI), Y1
	VCVTPS2PD (DX), Y2
	VMULPD    Y2, Y1, Y1
	VADDPD    Y1, Y0, Y0
	ADDQ      $16, SI
	ADDQ      $16, DX
	SUBQ      $4, CX
	JNZ       dloop
	VMOVUPD   Y0, (DI)
	VZEROUPPER
	RET

// func dot3PD(gr, w, x *float32, n int, sums *[4]float64)
//
// dotPD for (float64(g[i])·float64(w[i]))·float64(x[i]).
TEXT ·dot3PD(SB), NOSPLIT, $0-40
	MOVQ   gr+0(FP), SI
	MOVQ   w+8(FP), R8
	MOVQ   x+16(FP), DX
	MOVQ   n+24(FP), CX
	MOVQ   sums+32(FP), DI
	VXORPD Y0, Y0, Y0

d3loop:
	VCVTPS2PD (SI), Y1
	VCVTPS2PD (R8), Y2
	VCVTPS2PD (DX), Y3
	VMULPD    Y2, Y1, Y1
	VMULPD    Y3, Y1, Y1
	VADDPD    Y1, Y0, Y0
	ADDQ      $16, SI
	ADDQ      $16, R8
	ADDQ      $16, DX
	SUBQ      $4, CX
	JNZ       d3loop
	VMOVUPD   Y0, (DI)
	VZEROUPPER
	RET

// func rmsScaleW(dst, x, w *float32, inv float32, n int)
//
// dst[i] = (x[i]·inv)·w[i] in float32 for i < n (a positive multiple of 8).
TEXT ·rmsScaleW(SB), NOSPLIT, $0-40
	MOVQ         dst+0(FP), DI
	MOVQ         x+8(FP), SI
	MOVQ         w+16(FP), DX
	VBROADCASTSS inv+24(FP), Y4
	MOVQ         n+32(FP), CX

sloop:
	VMULPS  (SI), Y4, Y0
	VMULPS  (DX), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DX
	ADDQ    $32, DI
	SUBQ    $8, CX
	JNZ     sloop
	VZEROUPPER
	RET

// func rmsGradW(dst, gr, w, x *float32, ir, c float64, n int)
//
// dst[i] = float32(ir·(float64(g[i])·float64(w[i])) − float64(x[i])·c) for i < n (a
// positive multiple of 4), in float64 without fused multiply-adds, as the Go loop.
TEXT ·rmsGradW(SB), NOSPLIT, $0-56
	MOVQ         dst+0(FP), DI
	MOVQ         gr+8(FP), SI
	MOVQ         w+16(FP), R8
	MOVQ         x+24(FP), DX
	VBROADCASTSD ir+32(FP), Y4
	VBROADCASTSD c+40(FP), Y5
	MOVQ         n+48(FP), CX

gloop:
	VCVTPS2PD (SI), Y0
	VCVTPS2PD (R8), Y1
	VMULPD    Y1, Y0, Y0 // g·w
	VMULPD    Y0, Y4, Y0 // ir·(g·w)
	VCVTPS2PD (DX), Y2
	VMULPD    Y5, Y2, Y2 // x·c
	VSUBPD    Y2, Y0, Y0
	VCVTPD2PSY Y0, X0
	VMOVUPS   X0, (DI)
	ADDQ      $16, SI
	ADDQ      $16, R8
	ADDQ      $16, DX
	ADDQ      $16, DI
	SUBQ      $4, CX
	JNZ       gloop
	VZEROUPPER
	RET
