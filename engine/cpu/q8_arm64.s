#include "textflag.h"

// The integer kernels of the fast path (q8.go) for arm64.
//
// int8 activations (the int8 precision), with the dot-product extension:
// sdot multiplies four signed bytes by four signed bytes into each int32
// lane, so a lane sums the same four weight bytes as vpdpbusd's on amd64
// (4-bit codes 0..15 are as good signed as unsigned).
//
// int16 activations (the fast precision, the default), on any arm64 CPU:
// the weight codes are widened to int16 (uxtl) and smlal/smlal2 multiply
// four of them by four activations into four int32 sums, one per weight
// byte of a 16-byte half; addp then folds those sums into the eight lanes
// of q8Layout.laneOf, which the amd64 kernels fill with vpmaddwd. Integer
// sums are exact, so every lane holds exactly the Go loops' sum.
//
// The float steps are the amd64 kernels' in the same order (per lane
// acc += fma(float(isum), s·d, b·d·Σxq), then one fixed horizontal sum).
// Go's assembler has no mnemonic for sdot, smlal or the vector float and
// conversion instructions used here, so they are encoded by hand (checked
// against GNU as with -march=armv8.2-a+dotprod).

#define SDOT(d, n, m) WORD $(0x4E809400 | (m<<16) | (n<<5) | d)   // Vd.4S += Vn.16B · Vm.16B
#define SCVTF(d, n) WORD $(0x4E21D800 | (n<<5) | d)               // Vd.4S = float(Vn.4S)
#define FMUL(d, n, m) WORD $(0x6E20DC00 | (m<<16) | (n<<5) | d)   // Vd.4S = Vn.4S · Vm.4S
#define FADD(d, n, m) WORD $(0x4E20D400 | (m<<16) | (n<<5) | d)   // Vd.4S = Vn.4S + Vm.4S
#define FADDP(d, n, m) WORD $(0x6E20D400 | (m<<16) | (n<<5) | d)  // pairwise add
#define FMLA(d, n, m) WORD $(0x4E20CC00 | (m<<16) | (n<<5) | d)   // Vd.4S += Vn.4S · Vm.4S
#define SMLAL(d, n, m) WORD $(0x0E608000 | (m<<16) | (n<<5) | d)  // Vd.4S += Vn.4H · Vm.4H (lower halves)
#define SMLAL2(d, n, m) WORD $(0x4E608000 | (m<<16) | (n<<5) | d) // Vd.4S += Vn.8H · Vm.8H (upper halves)
#define UXTL(d, n) WORD $(0x2F08A400 | (n<<5) | d)                // Vd.8H = Vn.8B widened
#define UXTL2(d, n) WORD $(0x6F08A400 | (n<<5) | d)               // Vd.8H = Vn.16B's upper 8 widened
#define ADDP(d, n, m) WORD $(0x4EA0BC00 | (m<<16) | (n<<5) | d)   // Vd.4S = pairwise sums of Vn.4S, then Vm.4S

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

// int16 activations. Per 16-byte half of a weight chunk the products go
// into four int32 vectors, one sum per weight byte (bytes 0–3, 4–7, 8–11,
// 12–15 of the half); lane L of q8Layout.laneOf is then bytes 2L and 2L+1
// of either half (one group per unit), or bytes 4i … 4i+3 of one half
// (two groups of 32 per unit).

// W16_MAC adds the products of the sixteen int16 weights in wlo (bytes
// 0–7 of a half) and whi (8–15) with the activations alo and ahi (eight
// each, in the same order) into the byte sums a0–a3.
#define W16_MAC(wlo, whi, alo, ahi, a0, a1, a2, a3) \
	SMLAL(a0, wlo, alo) \
	SMLAL2(a1, wlo, alo) \
	SMLAL(a2, whi, ahi) \
	SMLAL2(a3, whi, ahi)

// W4_HALF adds one 16-byte half of 4-bit weights, in vw (register number
// w), against its 32 activations (the low nibbles' sixteen, then the high
// nibbles'), read at R8, into the byte sums a0–a3. Clobbers vw, V6, V8,
// V9, V14–V19.
#define W4_HALF(vw, w, a0, a1, a2, a3) \
	VLD1.P 64(R8), [V16.H8, V17.H8, V18.H8, V19.H8] \
	VUSHR $4, vw.B16, V6.B16 \
	VAND V31.B16, vw.B16, vw.B16 \
	UXTL(8, w) \
	UXTL2(9, w) \
	UXTL(14, 6) \
	UXTL2(15, 6) \
	W16_MAC(8, 9, 16, 17, a0, a1, a2, a3) \
	W16_MAC(14, 15, 18, 19, a0, a1, a2, a3)

#define ZERO4(a, b, c, d) \
	VEOR a.B16, a.B16, a.B16 \
	VEOR b.B16, b.B16, b.B16 \
	VEOR c.B16, c.B16, c.B16 \
	VEOR d.B16, d.B16, d.B16

// ONE_GROUP_FOLD folds the byte sums V10–V13 into the int lanes (lane L:
// bytes 2L and 2L+1) and those into the float lanes with the unit's one
// scale and bias.
#define ONE_GROUP_FOLD \
	ADDP(2, 10, 11) \
	ADDP(3, 12, 13) \
	BF16_DUP(R5, 0, R10, V20) \
	VMOV V20.B16, V21.B16 \
	BF16_DUP(R6, 0, R11, V26) \
	VMOV V26.B16, V27.B16 \
	ADD $2, R5 \
	ADD $2, R6 \
	UNIT_FOLD

// func w4TileNEON(t *q8Tile)
//
// 4-bit weights in groups of 64 or a multiple, int16 activations: per
// 32-byte chunk, the activations of the low then the high nibbles of
// bytes 0–15, then of bytes 16–31 (q8Layout.position).
TEXT ·w4TileNEON(SB), NOSPLIT, $0-8
	TILE_START
w4nToken:
	TOKEN_START
w4nUnit:
	ZERO4(V10, V11, V12, V13)
	MOVD T_CHUNKS(R0), R9
w4nChunk:
	VLD1.P 32(R4), [V4.B16, V5.B16]
	W4_HALF(V4, 4, 10, 11, 12, 13)
	W4_HALF(V5, 5, 10, 11, 12, 13)
	SUBS $1, R9
	BNE w4nChunk
	ONE_GROUP_FOLD
	SUBS $1, R7
	BNE w4nUnit
	TOKEN_END
	BNE w4nToken
	RET

// func w8TileNEON(t *q8Tile)
//
// 8-bit weights in groups of 32 or a multiple, int16 activations in x's
// order: byte k of a chunk meets activation k.
TEXT ·w8TileNEON(SB), NOSPLIT, $0-8
	TILE_START
w8nToken:
	TOKEN_START
w8nUnit:
	ZERO4(V10, V11, V12, V13)
	MOVD T_CHUNKS(R0), R9
w8nChunk:
	VLD1.P 32(R4), [V4.B16, V5.B16]
	VLD1.P 64(R8), [V16.H8, V17.H8, V18.H8, V19.H8]
	UXTL(6, 4)
	UXTL2(7, 4)
	UXTL(8, 5)
	UXTL2(9, 5)
	W16_MAC(6, 7, 16, 17, 10, 11, 12, 13)
	W16_MAC(8, 9, 18, 19, 10, 11, 12, 13)
	SUBS $1, R9
	BNE w8nChunk
	ONE_GROUP_FOLD
	SUBS $1, R7
	BNE w8nUnit
	TOKEN_END
	BNE w8nToken
	RET

// BF16_PAIR puts the BF16 values at (src) and (src)+2 into lanes 0, 1 and
// 2, 3 of vd.
#define BF16_PAIR(src, reg, vd) \
	MOVHU (src), reg \
	LSL $16, reg \
	VMOV reg, vd.S[0] \
	VMOV reg, vd.S[1] \
	MOVHU 2(src), reg \
	LSL $16, reg \
	VMOV reg, vd.S[2] \
	VMOV reg, vd.S[3]

// func w4SplitTileNEON(t *q8Tile)
//
// 4-bit weights in groups of 32, int16 activations: one chunk per unit,
// bytes 0–15 the first group and 16–31 the second. Lanes 0, 1, 4 and 5
// sum bytes 0–3, 4–7, 8–11 and 12–15 of the first half; lanes 2, 3, 6 and
// 7 the same bytes of the second.
TEXT ·w4SplitTileNEON(SB), NOSPLIT, $0-8
	TILE_START
w4snToken:
	TOKEN_START
w4snUnit:
	ZERO4(V10, V11, V12, V13)
	ZERO4(V24, V25, V26, V27)
	VLD1.P 32(R4), [V4.B16, V5.B16]
	W4_HALF(V4, 4, 10, 11, 12, 13)
	W4_HALF(V5, 5, 24, 25, 26, 27)
	ADDP(10, 10, 11)
	ADDP(24, 24, 25)
	ADDP(2, 10, 24)
	ADDP(12, 12, 13)
	ADDP(26, 26, 27)
	ADDP(3, 12, 26)
	BF16_PAIR(R5, R10, V20)
	VMOV V20.B16, V21.B16
	BF16_PAIR(R6, R11, V26)
	VMOV V26.B16, V27.B16
	ADD $4, R5
	ADD $4, R6
	UNIT_FOLD
	SUBS $1, R7
	BNE w4snUnit
	TOKEN_END
	BNE w4snToken
	RET
