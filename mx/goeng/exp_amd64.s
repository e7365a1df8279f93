//go:build amd64 && !purego

#include "textflag.h"

// func expKernel(dst, src *float32, n int, shift float32, table *float32, sums *[4]float64)
//
// dst[i] = e^(src[i] − shift) for i < n (a positive multiple of 8), computed as expInto
// does, with the same float32 operations in the same order (no fused multiply-add), and
// sums[k] = Σ_{i ≡ k mod 4} dst[i] in float64, added in order of i: lane k of a
// four-double register is expInto's partial sum s_k.
TEXT ·expKernel(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	VBROADCASTSS shift+24(FP), Y9
	MOVQ table+32(FP), DX
	MOVQ sums+40(FP), R8

	MOVL $0x42b8aa3b, AX // 64/ln2 as float32
	VMOVD AX, X15
	VBROADCASTSS X15, Y15
	MOVL $0x3f000000, AX // 0.5
	VMOVD AX, X14
	VBROADCASTSS X14, Y14
	MOVL $0x3c318000, AX // ln2hi = 0.693359375/64
	VMOVD AX, X13
	VBROADCASTSS X13, Y13
	MOVL $0xb65e8083, AX // ln2lo = -2.12194440e-4/64
	VMOVD AX, X12
	VBROADCASTSS X12, Y12
	MOVL $0x3f800000, AX // 1
	VMOVD AX, X11
	VBROADCASTSS X11, Y11
	MOVL $0xc2ae999a, AX // -87.3
	VMOVD AX, X10
	VBROADCASTSS X10, Y10
	MOVL $63, AX
	VMOVD AX, X8
	VPBROADCASTD X8, Y8
	MOVL $127, AX
	VMOVD AX, X7
	VPBROADCASTD X7, Y7
	VXORPD Y3, Y3, Y3 // partial sums s0..s3

loop:
	VMOVUPS    (SI), Y0
	VSUBPS     Y9, Y0, Y0     // x = v − shift
	VMULPS     Y15, Y0, Y1    // x·scale
	VSUBPS     Y14, Y1, Y1    // − 0.5
	VCVTTPS2DQ Y1, Y1         // n, truncated as int32() does
	VCVTDQ2PS  Y1, Y2         // nf
	VMULPS     Y13, Y2, Y4    // nf·ln2hi
	VSUBPS     Y4, Y0, Y4     // x − nf·ln2hi
	VMULPS     Y12, Y2, Y5    // nf·ln2lo
	VSUBPS     Y5, Y4, Y4     // r
	VMULPS     Y14, Y4, Y5    // r·0.5
	VADDPS     Y11, Y5, Y5    // 1 + r·0.5
	VMULPS     Y5, Y4, Y5     // r·(1 + r·0.5)
	VADDPS     Y11, Y5, Y5    // p
	VPAND      Y8, Y1, Y6     // n & 63
	VPCMPEQD   Y2, Y2, Y2     // gather mask: every lane
	VGATHERDPS Y2, (DX)(Y6*4), Y4
	VMULPS     Y4, Y5, Y5     // p·2^(j/64)
	VPSRAD     $6, Y1, Y6
	VPADDD     Y7, Y6, Y6
	VPSLLD     $23, Y6, Y6    // 2^(n>>6) as float32 bits
	VMULPS     Y6, Y5, Y5
	VCMPPS     $1, Y10, Y0, Y6 // x < −87.3 (false for NaN)
	VANDNPS    Y5, Y6, Y5      // … gives 0
	VMOVUPS    Y5, (DI)
	VCVTPS2PD  X5, Y6
	VADDPD     Y6, Y3, Y3
	VEXTRACTF128 $1, Y5, X5
	VCVTPS2PD  X5, Y6
	VADDPD     Y6, Y3, Y3
	ADDQ       $32, SI
	ADDQ       $32, DI
	SUBQ       $8, CX
	JNZ        loop

	VMOVUPD Y3, (R8)
	VZEROUPPER
	RET

// func maxKernel(x *float32, n int) float32
//
// The largest of x[0..n) (n a positive multiple of 8) as softmaxLSE's loop finds it: a
// value replaces the running maximum only when greater, so NaNs are skipped. VMAXPS
// returns its second source when either is NaN or both are zeros, and the running
// maximum is that operand. Four registers of lanes run side by side (VMAXPS's latency);
// the lanes are then reduced the same way. The result may differ from the loop's only
// in the sign of a zero maximum, which no use of it can tell apart (x − m and m + log s
// give the same bits either way).
TEXT ·maxKernel(SB), NOSPLIT, $0-20
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	MOVL $0xff800000, AX // −∞
	VMOVD AX, X0
	VBROADCASTSS X0, Y0
	VMOVAPS Y0, Y1
	VMOVAPS Y0, Y2
	VMOVAPS Y0, Y3
	MOVQ CX, BX
	SHRQ $5, BX
	JZ   mtail

mloop32:
	VMOVUPS (SI), Y4
	VMOVUPS 32(SI), Y5
	VMOVUPS 64(SI), Y6
	VMOVUPS 96(SI), Y7
	VMAXPS  Y0, Y4, Y0
	VMAXPS  Y1, Y5, Y1
	VMAXPS  Y2, Y6, Y2
	VMAXPS  Y3, Y7, Y3
	ADDQ    $128, SI
	DECQ    BX
	JNZ     mloop32

mtail:
	ANDQ $31, CX
	SHRQ $3, CX
	JZ   mreduce

mloop8:
	VMOVUPS (SI), Y4
	VMAXPS  Y0, Y4, Y0
	ADDQ    $32, SI
	DECQ    CX
	JNZ     mloop8

mreduce:
	VMAXPS       Y0, Y1, Y0
	VMAXPS       Y2, Y3, Y2
	VMAXPS       Y0, Y2, Y0
	VEXTRACTF128 $1, Y0, X1
	VMAXPS       X0, X1, X0
	VPERMILPS    $0x4e, X0, X1
	VMAXPS       X0, X1, X0
	VPERMILPS    $0xb1, X0, X1
	VMAXPS       X0, X1, X0
	VMOVSS       X0, ret+16(FP)
	VZEROUPPER
	RET
