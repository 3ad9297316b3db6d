#include "textflag.h"

// expf (exp.go) on four lanes, operation for operation: the same products
// and sums in the same order, none fused, so that every lane gets the Go
// loop's bits. The Go assembler has no vector float arithmetic, so those
// instructions are encoded here (4S arrangement: d = n op m).
#define FMUL(d, n, m) WORD $(0x6E20DC00 | (m<<16) | (n<<5) | d)
#define FADD(d, n, m) WORD $(0x4E20D400 | (m<<16) | (n<<5) | d)
#define FSUB(d, n, m) WORD $(0x4EA0D400 | (m<<16) | (n<<5) | d)
#define FDIV(d, n, m) WORD $(0x6E20FC00 | (m<<16) | (n<<5) | d)
#define FMAX(d, n, m) WORD $(0x4E20F400 | (m<<16) | (n<<5) | d)
#define FMIN(d, n, m) WORD $(0x4EA0F400 | (m<<16) | (n<<5) | d)
// SSHR1: d = n >> 1, arithmetic, per 32-bit lane.
#define SSHR1(d, n) WORD $(0x4F3F0400 | (n<<5) | d)

// EXPCONSTS loads expTable4 (R8) into V16–V31: V16 hi, V17 lo, V18 log2e,
// V19 the rounding constant, V20 ln2Hi, V21 ln2Lo, V22–V27 c0–c5, V28 1,
// V29 the bias 127 (integer), V30 the sign bit.
#define EXPCONSTS \
	VLD1.P 64(R8), [V16.S4, V17.S4, V18.S4, V19.S4]; \
	VLD1.P 64(R8), [V20.S4, V21.S4, V22.S4, V23.S4]; \
	VLD1.P 64(R8), [V24.S4, V25.S4, V26.S4, V27.S4]; \
	VLD1 (R8), [V28.S4, V29.S4, V30.S4, V31.S4]

// EXP4 computes V0 = e^V0 with V1–V3 as scratch. FMAX and FMIN return a
// NaN operand, as the Go loop's clamps let a NaN through.
#define EXP4 \
	FMAX(0, 0, 17); \
	FMIN(0, 0, 16); \
	FMUL(1, 0, 18); \
	FADD(1, 1, 19); \
	FSUB(2, 1, 19); \
	VSUB V19.S4, V1.S4, V1.S4; \
	FMUL(3, 2, 20); \
	FSUB(0, 0, 3); \
	FMUL(3, 2, 21); \
	FSUB(0, 0, 3); \
	FMUL(2, 0, 0); \
	FMUL(3, 27, 0); \
	FADD(3, 3, 26); \
	FMUL(3, 3, 0); \
	FADD(3, 3, 25); \
	FMUL(3, 3, 0); \
	FADD(3, 3, 24); \
	FMUL(3, 3, 0); \
	FADD(3, 3, 23); \
	FMUL(3, 3, 0); \
	FADD(3, 3, 22); \
	FMUL(3, 3, 2); \
	FADD(3, 3, 0); \
	FADD(3, 3, 28); \
	SSHR1(2, 1); \
	VSUB V2.S4, V1.S4, V1.S4; \
	VADD V29.S4, V2.S4, V2.S4; \
	VSHL $23, V2.S4, V2.S4; \
	VADD V29.S4, V1.S4, V1.S4; \
	VSHL $23, V1.S4, V1.S4; \
	FMUL(3, 3, 2); \
	FMUL(0, 3, 1)

// func expShiftNEON(y, x *float32, n int, shift float32, c *[expConsts4][4]float32)
TEXT ·expShiftNEON(SB), NOSPLIT, $0-40
	MOVD y+0(FP), R0
	MOVD x+8(FP), R1
	MOVD n+16(FP), R2
	FMOVS shift+24(FP), F7
	VDUP V7.S[0], V7.S4
	MOVD c+32(FP), R8
	EXPCONSTS

expshift:
	VLD1.P 16(R1), [V0.S4]
	FSUB(0, 0, 7)
	EXP4
	VST1.P [V0.S4], 16(R0)
	SUBS $4, R2, R2
	BNE  expshift
	RET

// func swiGLUNEON(y, gates, u *float32, n int, c *[expConsts4][4]float32)
TEXT ·swiGLUNEON(SB), NOSPLIT, $0-40
	MOVD y+0(FP), R0
	MOVD gates+8(FP), R1
	MOVD u+16(FP), R3
	MOVD n+24(FP), R2
	MOVD c+32(FP), R8
	EXPCONSTS

swiglu:
	VLD1.P 16(R1), [V6.S4]
	VLD1.P 16(R3), [V5.S4]
	VEOR V30.B16, V6.B16, V0.B16
	EXP4
	FADD(0, 0, 28)
	FDIV(0, 6, 0)
	FMUL(0, 0, 5)
	VST1.P [V0.S4], 16(R0)
	SUBS $4, R2, R2
	BNE  swiglu
	RET

// func siluNEON(y, x *float32, n int, c *[expConsts4][4]float32)
TEXT ·siluNEON(SB), NOSPLIT, $0-32
	MOVD y+0(FP), R0
	MOVD x+8(FP), R1
	MOVD n+16(FP), R2
	MOVD c+24(FP), R8
	EXPCONSTS

silu:
	VLD1.P 16(R1), [V6.S4]
	VEOR V30.B16, V6.B16, V0.B16
	EXP4
	FADD(0, 0, 28)
	FDIV(0, 6, 0)
	VST1.P [V0.S4], 16(R0)
	SUBS $4, R2, R2
	BNE  silu
	RET

// func gateNEON(o, gates *float32, n int, a float32, c *[expConsts4][4]float32)
TEXT ·gateNEON(SB), NOSPLIT, $0-40
	MOVD o+0(FP), R0
	MOVD gates+8(FP), R1
	MOVD n+16(FP), R2
	FMOVS a+24(FP), F7
	VDUP V7.S[0], V7.S4
	MOVD c+32(FP), R8
	EXPCONSTS

gate:
	VLD1.P 16(R1), [V6.S4]
	VEOR V30.B16, V6.B16, V0.B16
	EXP4
	FADD(0, 0, 28)
	FDIV(0, 7, 0)
	VLD1 (R0), [V5.S4]
	FMUL(0, 5, 0)
	VST1.P [V0.S4], 16(R0)
	SUBS $4, R2, R2
	BNE  gate
	RET
