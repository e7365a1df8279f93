//go:build amd64 && !purego

#include "textflag.h"

// Elementwise float32 kernels: dst[i] = x[i] op y[i] (vv), x[i] op s (vs) or s op y[i]
// (sv), for n a positive multiple of 8. Every lane is one IEEE-754 single operation, so
// the results are the bits the Go loops give.

// VV defines func name(dst, x, y *float32, n int) for the VEX op instr.
#define VV(name, instr) \
TEXT name(SB), NOSPLIT, $0-32; \
	MOVQ dst+0(FP), DI;         \
	MOVQ x+8(FP), SI;           \
	MOVQ y+16(FP), DX;          \
	MOVQ n+24(FP), CX;          \
vv32:;                   \
	CMPQ CX, $32;               \
	JLT  vv8;            \
	VMOVUPS (SI), Y0;           \
	VMOVUPS 32(SI), Y1;         \
	VMOVUPS 64(SI), Y2;         \
	VMOVUPS 96(SI), Y3;         \
	instr   (DX), Y0, Y0;       \
	instr   32(DX), Y1, Y1;     \
	instr   64(DX), Y2, Y2;     \
	instr   96(DX), Y3, Y3;     \
	VMOVUPS Y0, (DI);           \
	VMOVUPS Y1, 32(DI);         \
	VMOVUPS Y2, 64(DI);         \
	VMOVUPS Y3, 96(DI);         \
	ADDQ $128, SI;              \
	ADDQ $128, DX;              \
	ADDQ $128, DI;              \
	SUBQ $32, CX;               \
	JMP  vv32;           \
vv8:;                    \
	CMPQ CX, $0;                \
	JEQ  vvdone;         \
	VMOVUPS (SI), Y0;           \
	instr   (DX), Y0, Y0;       \
	VMOVUPS Y0, (DI);           \
	ADDQ $32, SI;               \
	ADDQ $32, DX;               \
	ADDQ $32, DI;               \
	SUBQ $8, CX;                \
	JMP  vv8;            \
vvdone:;                 \
	VZEROUPPER;                 \
	RET

// VS defines func name(dst, x *float32, s float32, n int): dst[i] = x[i] op s.
#define VS(name, instr) \
TEXT name(SB), NOSPLIT, $0-32; \
	MOVQ dst+0(FP), DI;         \
	MOVQ x+8(FP), SI;           \
	VBROADCASTSS s+16(FP), Y4;  \
	MOVQ n+24(FP), CX;          \
vs32:;                     \
	CMPQ CX, $32;               \
	JLT  vs8;              \
	VMOVUPS (SI), Y0;           \
	VMOVUPS 32(SI), Y1;         \
	VMOVUPS 64(SI), Y2;         \
	VMOVUPS 96(SI), Y3;         \
	instr   Y4, Y0, Y0;         \
	instr   Y4, Y1, Y1;         \
	instr   Y4, Y2, Y2;         \
	instr   Y4, Y3, Y3;         \
	VMOVUPS Y0, (DI);           \
	VMOVUPS Y1, 32(DI);         \
	VMOVUPS Y2, 64(DI);         \
	VMOVUPS Y3, 96(DI);         \
	ADDQ $128, SI;              \
	ADDQ $128, DI;              \
	SUBQ $32, CX;               \
	JMP  vs32;             \
vs8:;                      \
	CMPQ CX, $0;                \
	JEQ  vsdone;           \
	VMOVUPS (SI), Y0;           \
	instr   Y4, Y0, Y0;         \
	VMOVUPS Y0, (DI);           \
	ADDQ $32, SI;               \
	ADDQ $32, DI;               \
	SUBQ $8, CX;                \
	JMP  vs8;              \
vsdone:;                   \
	VZEROUPPER;                 \
	RET

// SV defines func name(dst *float32, s float32, y *float32, n int): dst[i] = s op y[i].
#define SV(name, instr) \
TEXT name(SB), NOSPLIT, $0-32; \
	MOVQ dst+0(FP), DI;         \
	VBROADCASTSS s+8(FP), Y4;   \
	MOVQ y+16(FP), DX;          \
	MOVQ n+24(FP), CX;          \
sv8:;                      \
	CMPQ CX, $0;                \
	JEQ  svdone;           \
	instr   (DX), Y4, Y0;       \
	VMOVUPS Y0, (DI);           \
	ADDQ $32, DX;               \
	ADDQ $32, DI;               \
	SUBQ $8, CX;                \
	JMP  sv8;              \
svdone:;                   \
	VZEROUPPER;                 \
	RET

VV(·addVV, VADDPS)
VV(·subVV, VSUBPS)
VV(·mulVV, VMULPS)
VV(·divVV, VDIVPS)
VS(·addVS, VADDPS)
VS(·subVS, VSUBPS)
VS(·mulVS, VMULPS)
VS(·divVS, VDIVPS)
SV(·subSV, VSUBPS)
SV(·divSV, VDIVPS)
SV(·addSV, VADDPS)
SV(·mulSV, VMULPS)
