// Macros the sgemm kernels share (included by the .s files of this package).

// CROWADD adds vector register r into the row of C at p (c + Σ), stores it there and
// moves p on by ld bytes.
#define CROWADD(r, p, ld) \
	VADDPS  (p), r, r; \
	VMOVUPS r, (p);    \
	ADDQ    ld, p

// CROWSET stores vector register r into the row of C at p and moves p on by ld bytes.
#define CROWSET(r, p, ld) \
	VMOVUPS r, (p); \
	ADDQ    ld, p

// TRANSPOSE8 transposes the 8×8 block of rows Y0..Y7 into rows Y8..Y15 (Y0..Y7 are
// overwritten): rows interleaved in pairs, then quads, then the 128-bit lanes exchanged.
#define TRANSPOSE8 \
	VUNPCKLPS  Y1, Y0, Y8;          \
	VUNPCKHPS  Y1, Y0, Y9;          \
	VUNPCKLPS  Y3, Y2, Y10;         \
	VUNPCKHPS  Y3, Y2, Y11;         \
	VUNPCKLPS  Y5, Y4, Y12;         \
	VUNPCKHPS  Y5, Y4, Y13;         \
	VUNPCKLPS  Y7, Y6, Y14;         \
	VUNPCKHPS  Y7, Y6, Y15;         \
	VSHUFPS    $0x44, Y10, Y8, Y0;  \
	VSHUFPS    $0xEE, Y10, Y8, Y1;  \
	VSHUFPS    $0x44, Y11, Y9, Y2;  \
	VSHUFPS    $0xEE, Y11, Y9, Y3;  \
	VSHUFPS    $0x44, Y14, Y12, Y4; \
	VSHUFPS    $0xEE, Y14, Y12, Y5; \
	VSHUFPS    $0x44, Y15, Y13, Y6; \
	VSHUFPS    $0xEE, Y15, Y13, Y7; \
	VPERM2F128 $0x20, Y4, Y0, Y8;   \
	VPERM2F128 $0x20, Y5, Y1, Y9;   \
	VPERM2F128 $0x20, Y6, Y2, Y10;  \
	VPERM2F128 $0x20, Y7, Y3, Y11;  \
	VPERM2F128 $0x31, Y4, Y0, Y12;  \
	VPERM2F128 $0x31, Y5, Y1, Y13;  \
	VPERM2F128 $0x31, Y6, Y2, Y14;  \
	VPERM2F128 $0x31, Y7, Y3, Y15
