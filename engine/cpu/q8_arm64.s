#include "textflag.h"

// The int8 kernels of the fast path's int8 precision (q8.go) for arm64
// with the dot-product extension: sdot multiplies four signed bytes by four
// signed bytes into each int32 lane, so a lane sums the same four weight
// bytes as vpdpbusd's on amd64 (4-bit codes 0..15 are as good signed as
// unsigned), and the float steps are the amd64 kernels' in the same
// order. Go's assembler has no mnemonic for sdot or for the vector float
// and conversion instructions used here, so they are encoded by hand
// (checked against GNU as with -march=armv8.2-a+dotprod).

#define SDOT(d, n, m) WORD $(0x4E809400 | (m<<16) | (n<<5) | d)   // Vd.4S += Vn.16B · Vm.16B
#define SCVTF(d, n) WORD $(0x4E21D800 | (n<<5) | d)               // Vd.4S = float(Vn.4S)
#define FMUL(d, n, m) WORD $(0x6E20DC00 | (m<<16) | (n<<5) | d)   // Vd.4S = Vn.4S · Vm.4S
#define FADD(d, n, m) WORD $(0x4E20D400 | (m<<16) | (n<<5) | d)   // Vd.4S = Vn.4S + Vm.4S
#define FADDP(d, n, m) WORD $(0x6E20D400 | (m<<16) | (n<<5) | d)  // pairwise add
#define FMLA(d, n, m) WORD $(0x4E20CC00 | (m<<16) | (n<<5) | d)   // Vd.4S += Vn.4S · Vm.4S

// Field offsets of q8Tile.
#define T_W 0
#define T_SCALES 8
#define T_BIASES 16
#define T_UNITS 24
#define T_CHUNKS 32
#define T_X 40
#define T_XSTRIDE 48
#define T_TOKENS 56
#define T_OUT 64
#define T_OUTSTRIDE 72

// Registers: R0 the tile, R1 the token's prepared row, R2 its output, R3
// tokens left; per token R4 weights, R5 scales, R6 biases, R7 units left,
// R8 the prepared-row cursor, R9 chunks left. V0, V1 the float lanes 0–3
// and 4–7; V2, V3 the int32 lanes; V31 the nibble mask.

#define TILE_START \
	MOVD t+0(FP), R0 \
	MOVD T_X(R0), R1 \
	MOVD T_OUT(R0), R2 \
	MOVD T_TOKENS(R0), R3 \
	VMOVI $15, V31.B16

#define TOKEN_START \
	MOVD T_W(R0), R4 \
	MOVD T_SCALES(R0), R5 \
	MOVD T_BIASES(R0), R6 \
	MOVD T_UNITS(R0), R7 \
	MOVD R1, R8 \
	VEOR V0.B16, V0.B16, V0.B16 \
	VEOR V1.B16, V1.B16, V1.B16

// Q4_CHUNK adds one 32-byte chunk of 4-bit weights (64 elements): the low
// nibbles of bytes 0–15 and 16–31 against the even activations, the high
// ones against the odd.
#define Q4_CHUNK \
	VLD1.P 32(R4), [V4.B16, V5.B16] \
	VLD1.P 64(R8), [V16.B16, V17.B16, V18.B16, V19.B16] \
	VUSHR $4, V4.B16, V6.B16 \
	VUSHR $4, V5.B16, V7.B16 \
	VAND V31.B16, V4.B16, V4.B16 \
	VAND V31.B16, V5.B16, V5.B16 \
	SDOT(2, 4, 16) \
	SDOT(3, 5, 17) \
	SDOT(2, 6, 18) \
	SDOT(3, 7, 19)

// UNIT_FOLD folds the int lanes into the float lanes with scales in V20
// (lanes 0–3) and V21 (4–7), biases in V26 and V27: per lane
// acc += fma(float(isum), s·d, b·Σx).
#define UNIT_FOLD \
	VLD1.P 64(R8), [V22.S4, V23.S4, V24.S4, V25.S4] \
	SCVTF(2, 2) \
	SCVTF(3, 3) \
	FMUL(22, 20, 22) \
	FMUL(23, 21, 23) \
	FMUL(24, 26, 24) \
	FMUL(25, 27, 25) \
	FMLA(24, 2, 22) \
	FMLA(25, 3, 23) \
	FADD(0, 0, 24) \
	FADD(1, 1, 25)

// BF16 scale or bias at (src)+off into all lanes of vd: the upper half of
// a float32.
#define BF16_DUP(src, off, reg, vd) \
	MOVHU off(src), reg \
	LSL $16, reg \
	VDUP reg, vd.S4

// TOKEN_END sums the eight lanes as the amd64 kernels do (lane i plus lane
// i+4, then two pairwise adds), stores the output and moves on.
#define TOKEN_END \
	FADD(0, 0, 1) \
	FADDP(0, 0, 0) \
	FADDP(0, 0, 0) \
	FMOVS F0, (R2) \
	MOVD T_XSTRIDE(R0), R10 \
	ADD R10, R1 \
	MOVD T_OUTSTRIDE(R0), R10 \
	ADD R10, R2 \
	SUBS $1, R3

// func q4TileNEON(t *q8Tile)
TEXT ·q4TileNEON(SB), NOSPLIT, $0-8
	TILE_START
q4nToken:
	TOKEN_START
q4nUnit:
	VEOR V2.B16, V2.B16, V2.B16
	VEOR V3.B16, V3.B16, V3.B16
	MOVD T_CHUNKS(R0), R9
q4nChunk:
	Q4_CHUNK
	SUBS $1, R9
	BNE q4nChunk
	BF16_DUP(R5, 0, R10, V20)
	VMOV V20.B16, V21.B16
	BF16_DUP(R6, 0, R11, V26)
	VMOV V26.B16, V27.B16
	ADD $2, R5
	ADD $2, R6
	UNIT_FOLD
	SUBS $1, R7
	BNE q4nUnit
	TOKEN_END
	BNE q4nToken
	RET

// func q4SplitTileNEON(t *q8Tile)
//
// Two groups of 32 per unit: bytes 0–15 of the chunk (lanes 0–3) are the
// first group, bytes 16–31 (lanes 4–7) the second.
TEXT ·q4SplitTileNEON(SB), NOSPLIT, $0-8
	TILE_START
q4snToken:
	TOKEN_START
q4snUnit:
	VEOR V2.B16, V2.B16, V2.B16
	VEOR V3.B16, V3.B16, V3.B16
	Q4_CHUNK
	BF16_DUP(R5, 0, R10, V20)
	BF16_DUP(R5, 2, R10, V21)
	BF16_DUP(R6, 0, R11, V26)
	BF16_DUP(R6, 2, R11, V27)
	ADD $4, R5
	ADD $4, R6
	UNIT_FOLD
	SUBS $1, R7
	BNE q4snUnit
	TOKEN_END
	BNE q4snToken
	RET
