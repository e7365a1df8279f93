//go:build amd64 && !purego

#include "textflag.h"

// func prefetchL2(p *float32, n int)
// Hints the cache lines of p[0..n) into L2 (PREFETCHT1): one hint per 64 bytes from p,
// and one for the last element, so a run that starts mid-line is covered to its end.
// A hint never faults and changes no value. n must be positive.
TEXT ·prefetchL2(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), AX
	MOVQ n+8(FP), CX
	LEAQ -4(AX)(CX*4), DX     // the last element

prefetchloop:
	PREFETCHT1 (AX)
	ADDQ $64, AX
	CMPQ AX, DX
	JBE  prefetchloop
	PREFETCHT1 (DX)
	RET
