#include "textflag.h"

// The int8 kernels of the fast path (q8.go): one weight row of an affine
// matrix against t.tokens prepared token rows. Field offsets of q8Tile:
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

// Registers shared by every kernel:
//   AX the tile, DI the current token's prepared row, R10 its output,
//   R11 tokens left; per token SI weights, DX scales, R8 biases,
//   CX units left, BX chunks left, R12 the prepared-row cursor;
//   Y0 the float accumulator (eight lanes), Y1 the unit's int32 lanes.

#define TOKEN_START \
	MOVQ T_W(AX), SI \
	MOVQ T_SCALES(AX), DX \
	MOVQ T_BIASES(AX), R8 \
	MOVQ T_UNITS(AX), CX \
	MOVQ DI, R12 \
	VXORPS Y0, Y0, Y0

// UNIT_UNIFORM folds a unit of one group into Y0: scale and bias are BF16,
// the upper half of a float32, so one broadcast word shifted up by 16 is
// the float in every lane. acc += fma(float(isum), s·d, b·Σx lanes), the
// Σx lanes being zero but the first: one add, not two fused multiply-adds,
// waits on the previous unit (with two, their latency bounded a decode
// row at 8 cycles a unit).
#define UNIT_UNIFORM \
	VCVTDQ2PS Y1, Y1 \
	VPBROADCASTW (DX), Y4 \
	VPSLLD $16, Y4, Y4 \
	VMULPS (R12), Y4, Y4 \
	VPBROADCASTW (R8), Y5 \
	VPSLLD $16, Y5, Y5 \
	VMULPS 32(R12), Y5, Y5 \
	VFMADD231PS Y4, Y1, Y5 \
	VADDPS Y5, Y0, Y0 \
	ADDQ $64, R12 \
	ADDQ $2, DX \
	ADDQ $2, R8

// UNIT_SPLIT is UNIT_UNIFORM for two groups of 32 side by side: the lanes
// set in pattern take the second group's scale and bias, the others the
// first's (0xF0 for int8 activations: lanes 4–7; 0xCC for int16: lanes 2,
// 3, 6 and 7, as vphaddd leaves them). Y14 holds 0xFFFF0000 in every dword.
#define UNIT_SPLIT(pattern) \
	VCVTDQ2PS Y1, Y1 \
	VPBROADCASTD (DX), Y4 \
	VPSLLD $16, Y4, Y6 \
	VPAND Y14, Y4, Y4 \
	VPBLENDD pattern, Y4, Y6, Y4 \
	VMULPS (R12), Y4, Y4 \
	VPBROADCASTD (R8), Y5 \
	VPSLLD $16, Y5, Y6 \
	VPAND Y14, Y5, Y5 \
	VPBLENDD pattern, Y5, Y6, Y5 \
	VMULPS 32(R12), Y5, Y5 \
	VFMADD231PS Y4, Y1, Y5 \
	VADDPS Y5, Y0, Y0 \
	ADDQ $64, R12 \
	ADDQ $4, DX \
	ADDQ $4, R8

// TOKEN_END sums the eight lanes (the halves, then two pairwise adds, as
// q8RowGo does), stores the token's output and moves to the next token.
#define TOKEN_END \
	VEXTRACTF128 $1, Y0, X1 \
	VADDPS X1, X0, X0 \
	VHADDPS X0, X0, X0 \
	VHADDPS X0, X0, X0 \
	VMOVSS X0, (R10) \
	ADDQ T_XSTRIDE(AX), DI \
	ADDQ T_OUTSTRIDE(AX), R10 \
	DECQ R11

#define TILE_START \
	MOVQ t+0(FP), AX \
	MOVQ T_X(AX), DI \
	MOVQ T_OUT(AX), R10 \
	MOVQ T_TOKENS(AX), R11 \
	MOVL $0x0F0F0F0F, BX \
	VMOVD BX, X15 \
	VPBROADCASTD X15, Y15 \
	VPCMPEQD Y14, Y14, Y14 \
	VPSLLD $16, Y14, Y14 \
	VPCMPEQW Y13, Y13, Y13 \
	VPSRLW $15, Y13, Y13 \
	VPCMPEQW Y12, Y12, Y12 \
	VPSRLW $12, Y12, Y12

// Y15 holds 0x0F in every byte (the nibble mask), Y13 1 in every word (to
// widen AVX2's pairwise sums), Y12 0x000F in every word.

// Q4_CHUNK_VNNI adds one 32-byte chunk of 4-bit weights (64 elements: low
// nibbles against the even activations, high nibbles against the odd) into
// the int32 lanes Y1; vpdpbusd multiplies unsigned bytes (the weights) by
// signed bytes (the activations) and adds each four products into a lane.
#define Q4_CHUNK_VNNI \
	VMOVDQU (SI), Y2 \
	VPSRLW $4, Y2, Y3 \
	VPAND Y15, Y2, Y2 \
	VPAND Y15, Y3, Y3 \
	VPDPBUSD (R12), Y2, Y1 \
	VPDPBUSD 32(R12), Y3, Y7 \
	ADDQ $32, SI \
	ADDQ $64, R12

// Q4_CHUNK_AVX2 is the same with vpmaddubsw (pairs of products into int16:
// at most 2·15·127, no saturation) and vpmaddwd by ones (pairs of those
// into int32): lane k again sums bytes 4k..4k+3, so the lanes equal VNNI's.
#define Q4_CHUNK_AVX2 \
	VMOVDQU (SI), Y2 \
	VPSRLW $4, Y2, Y3 \
	VPAND Y15, Y2, Y2 \
	VPAND Y15, Y3, Y3 \
	VPMADDUBSW (R12), Y2, Y2 \
	VPMADDUBSW 32(R12), Y3, Y3 \
	VPADDW Y3, Y2, Y2 \
	VPMADDWD Y13, Y2, Y2 \
	VPADDD Y2, Y1, Y1 \
	ADDQ $32, SI \
	ADDQ $64, R12

// Q8_CHUNK_VNNI adds one 32-byte chunk of 8-bit weights (32 elements).
#define Q8_CHUNK_VNNI \
	VMOVDQU (SI), Y2 \
	VPDPBUSD (R12), Y2, Y1 \
	ADDQ $32, SI \
	ADDQ $32, R12

// Q8_CHUNK_AVX2: vpmaddubsw would saturate 255·127·2, so the bytes are
// widened to words and multiplied by vpmaddwd (pairs into int32); a
// horizontal add of the two halves' pairs and a qword permutation put the
// sum of bytes 4k..4k+3 into lane k, as vpdpbusd does.
#define Q8_CHUNK_AVX2 \
	VPMOVZXBW (SI), Y2 \
	VPMOVZXBW 16(SI), Y3 \
	VPMOVSXBW (R12), Y4 \
	VPMOVSXBW 16(R12), Y5 \
	VPMADDWD Y4, Y2, Y2 \
	VPMADDWD Y5, Y3, Y3 \
	VPHADDD Y3, Y2, Y2 \
	VPERMQ $0xD8, Y2, Y2 \
	VPADDD Y2, Y1, Y1 \
	ADDQ $32, SI \
	ADDQ $32, R12

// func q4TileVNNI(t *q8Tile)
TEXT ·q4TileVNNI(SB), NOSPLIT, $0-8
	TILE_START
q4vToken:
	TOKEN_START
q4vUnit:
	VPXOR Y1, Y1, Y1
	VPXOR Y7, Y7, Y7
	MOVQ T_CHUNKS(AX), BX
q4vChunk:
	Q4_CHUNK_VNNI
	DECQ BX
	JNZ q4vChunk
	VPADDD Y7, Y1, Y1
	UNIT_UNIFORM
	DECQ CX
	JNZ q4vUnit
	TOKEN_END
	JNZ q4vToken
	VZEROUPPER
	RET

// func q4SplitTileVNNI(t *q8Tile)
TEXT ·q4SplitTileVNNI(SB), NOSPLIT, $0-8
	TILE_START
q4svToken:
	TOKEN_START
q4svUnit:
	VPXOR Y1, Y1, Y1
	VPXOR Y7, Y7, Y7
	Q4_CHUNK_VNNI
	VPADDD Y7, Y1, Y1
	UNIT_SPLIT($0xF0)
	DECQ CX
	JNZ q4svUnit
	TOKEN_END
	JNZ q4svToken
	VZEROUPPER
	RET

// func q8TileVNNI(t *q8Tile)
TEXT ·q8TileVNNI(SB), NOSPLIT, $0-8
	TILE_START
q8vToken:
	TOKEN_START
q8vUnit:
	VPXOR Y1, Y1, Y1
	MOVQ T_CHUNKS(AX), BX
q8vChunk:
	Q8_CHUNK_VNNI
	DECQ BX
	JNZ q8vChunk
	UNIT_UNIFORM
	DECQ CX
	JNZ q8vUnit
	TOKEN_END
	JNZ q8vToken
	VZEROUPPER
	RET

// func q4TileAVX2(t *q8Tile)
TEXT ·q4TileAVX2(SB), NOSPLIT, $0-8
	TILE_START
q4aToken:
	TOKEN_START
q4aUnit:
	VPXOR Y1, Y1, Y1
	MOVQ T_CHUNKS(AX), BX
q4aChunk:
	Q4_CHUNK_AVX2
	DECQ BX
	JNZ q4aChunk
	UNIT_UNIFORM
	DECQ CX
	JNZ q4aUnit
	TOKEN_END
	JNZ q4aToken
	VZEROUPPER
	RET

// func q4SplitTileAVX2(t *q8Tile)
TEXT ·q4SplitTileAVX2(SB), NOSPLIT, $0-8
	TILE_START
q4saToken:
	TOKEN_START
q4saUnit:
	VPXOR Y1, Y1, Y1
	Q4_CHUNK_AVX2
	UNIT_SPLIT($0xF0)
	DECQ CX
	JNZ q4saUnit
	TOKEN_END
	JNZ q4saToken
	VZEROUPPER
	RET

// func q8TileAVX2(t *q8Tile)
TEXT ·q8TileAVX2(SB), NOSPLIT, $0-8
	TILE_START
q8aToken:
	TOKEN_START
q8aUnit:
	VPXOR Y1, Y1, Y1
	MOVQ T_CHUNKS(AX), BX
q8aChunk:
	Q8_CHUNK_AVX2
	DECQ BX
	JNZ q8aChunk
	UNIT_UNIFORM
	DECQ CX
	JNZ q8aUnit
	TOKEN_END
	JNZ q8aToken
	VZEROUPPER
	RET

// The kernels with int16 activations (PrecisionFast). The weights are
// widened to words sixteen bytes at a time (a 4-bit byte's word shifted
// right by 4 is its high nibble, masked with 0x000F its low one) and
// multiplied by vpdpwssd (pairs of signed words into int32 lanes) or, on
// AVX2, vpmaddwd and an add: the same pairs, so the same lanes.

// W4_HALF_VNNI adds sixteen bytes of 4-bit weights at woff(SI) against the
// 32 words of activations at xoff(R12) (the even elements, then the odd)
// into acc.
#define W4_HALF_VNNI(woff, xeven, xodd, acc, acc2) \
	VPMOVZXBW woff(SI), Y2 \
	VPSRLW $4, Y2, Y3 \
	VPAND Y12, Y2, Y2 \
	VPDPWSSD xeven(R12), Y2, acc \
	VPDPWSSD xodd(R12), Y3, acc2

#define W4_HALF_AVX2(woff, xeven, xodd, acc) \
	VPMOVZXBW woff(SI), Y2 \
	VPSRLW $4, Y2, Y3 \
	VPAND Y12, Y2, Y2 \
	VPMADDWD xeven(R12), Y2, Y2 \
	VPMADDWD xodd(R12), Y3, Y3 \
	VPADDD Y2, acc, acc \
	VPADDD Y3, acc, acc

#define W8_HALF_VNNI(woff, xoff, acc) \
	VPMOVZXBW woff(SI), Y2 \
	VPDPWSSD xoff(R12), Y2, acc

#define W8_HALF_AVX2(woff, xoff) \
	VPMOVZXBW woff(SI), Y2 \
	VPMADDWD xoff(R12), Y2, Y2 \
	VPADDD Y2, Y1, Y1

// func w4TileVNNI(t *q8Tile)
TEXT ·w4TileVNNI(SB), NOSPLIT, $0-8
	TILE_START
w4vToken:
	TOKEN_START
w4vUnit:
	VPXOR Y1, Y1, Y1
	VPXOR Y7, Y7, Y7
	VPXOR Y8, Y8, Y8
	VPXOR Y9, Y9, Y9
	MOVQ T_CHUNKS(AX), BX
w4vChunk:
	W4_HALF_VNNI(0, 0, 32, Y1, Y7)
	W4_HALF_VNNI(16, 64, 96, Y8, Y9)
	ADDQ $32, SI
	ADDQ $128, R12
	DECQ BX
	JNZ w4vChunk
	VPADDD Y7, Y1, Y1
	VPADDD Y9, Y8, Y8
	VPADDD Y8, Y1, Y1
	UNIT_UNIFORM
	DECQ CX
	JNZ w4vUnit
	TOKEN_END
	JNZ w4vToken
	VZEROUPPER
	RET

// func w4SplitTileVNNI(t *q8Tile)
//
// The two halves of the chunk are the two groups: each sums into its own
// lanes, and vphaddd folds them into [A A B B A A B B].
TEXT ·w4SplitTileVNNI(SB), NOSPLIT, $0-8
	TILE_START
w4svToken:
	TOKEN_START
w4svUnit:
	VPXOR Y1, Y1, Y1
	VPXOR Y7, Y7, Y7
	VPXOR Y8, Y8, Y8
	VPXOR Y9, Y9, Y9
	W4_HALF_VNNI(0, 0, 32, Y1, Y8)
	W4_HALF_VNNI(16, 64, 96, Y7, Y9)
	VPADDD Y8, Y1, Y1
	VPADDD Y9, Y7, Y7
	VPHADDD Y7, Y1, Y1
	ADDQ $32, SI
	ADDQ $128, R12
	UNIT_SPLIT($0xCC)
	DECQ CX
	JNZ w4svUnit
	TOKEN_END
	JNZ w4svToken
	VZEROUPPER
	RET

// func w8TileVNNI(t *q8Tile)
TEXT ·w8TileVNNI(SB), NOSPLIT, $0-8
	TILE_START
w8vToken:
	TOKEN_START
w8vUnit:
	VPXOR Y1, Y1, Y1
	VPXOR Y7, Y7, Y7
	MOVQ T_CHUNKS(AX), BX
w8vChunk:
	W8_HALF_VNNI(0, 0, Y1)
	W8_HALF_VNNI(16, 32, Y7)
	ADDQ $32, SI
	ADDQ $64, R12
	DECQ BX
	JNZ w8vChunk
	VPADDD Y7, Y1, Y1
	UNIT_UNIFORM
	DECQ CX
	JNZ w8vUnit
	TOKEN_END
	JNZ w8vToken
	VZEROUPPER
	RET

// func w4TileAVX2(t *q8Tile)
TEXT ·w4TileAVX2(SB), NOSPLIT, $0-8
	TILE_START
w4aToken:
	TOKEN_START
w4aUnit:
	VPXOR Y1, Y1, Y1
	MOVQ T_CHUNKS(AX), BX
w4aChunk:
	W4_HALF_AVX2(0, 0, 32, Y1)
	W4_HALF_AVX2(16, 64, 96, Y1)
	ADDQ $32, SI
	ADDQ $128, R12
	DECQ BX
	JNZ w4aChunk
	UNIT_UNIFORM
	DECQ CX
	JNZ w4aUnit
	TOKEN_END
	JNZ w4aToken
	VZEROUPPER
	RET

// func w4SplitTileAVX2(t *q8Tile)
TEXT ·w4SplitTileAVX2(SB), NOSPLIT, $0-8
	TILE_START
w4saToken:
	TOKEN_START
w4saUnit:
	VPXOR Y1, Y1, Y1
	VPXOR Y7, Y7, Y7
	W4_HALF_AVX2(0, 0, 32, Y1)
	W4_HALF_AVX2(16, 64, 96, Y7)
	VPHADDD Y7, Y1, Y1
	ADDQ $32, SI
	ADDQ $128, R12
	UNIT_SPLIT($0xCC)
	DECQ CX
	JNZ w4saUnit
	TOKEN_END
	JNZ w4saToken
	VZEROUPPER
	RET

// func w8TileAVX2(t *q8Tile)
TEXT ·w8TileAVX2(SB), NOSPLIT, $0-8
	TILE_START
w8aToken:
	TOKEN_START
w8aUnit:
	VPXOR Y1, Y1, Y1
	MOVQ T_CHUNKS(AX), BX
w8aChunk:
	W8_HALF_AVX2(0, 0)
	W8_HALF_AVX2(16, 32)
	ADDQ $32, SI
	ADDQ $64, R12
	DECQ BX
	JNZ w8aChunk
	UNIT_UNIFORM
	DECQ CX
	JNZ w8aUnit
	TOKEN_END
	JNZ w8aToken
	VZEROUPPER
	RET

// Four-token kernels (int16 activations, one group per unit): each 32-byte
// chunk of the row is widened once and meets four token rows, so a
// prefill chunk reads and unpacks each weight once per four tokens. t.tokens
// is a multiple of 4. Every token's lanes see the same operations in the
// same order as in the one-token kernels above, so its output is the same
// bit for bit. Registers: Y0–Y3 the four accumulators, Y4–Y7 the four
// int32 lane sets, Y8–Y11 the widened weights (then the scale, the bias and
// a product), Y13 and Y15 AVX2's products; DI zero, R13, R10 and R15 one,
// two and three token strides, R14 the quad's prepared rows, R9 its
// outputs.

#define QUAD_START \
	MOVQ t+0(FP), AX \
	MOVQ T_X(AX), R14 \
	MOVQ T_OUT(AX), R9 \
	MOVQ T_TOKENS(AX), R11 \
	SHRQ $2, R11 \
	MOVQ T_XSTRIDE(AX), R13 \
	XORQ DI, DI \
	LEAQ (R13)(R13*1), R10 \
	LEAQ (R13)(R13*2), R15 \
	VPCMPEQW Y12, Y12, Y12 \
	VPSRLW $12, Y12, Y12

#define QUAD_TOKEN_START \
	MOVQ T_W(AX), SI \
	MOVQ T_SCALES(AX), DX \
	MOVQ T_BIASES(AX), R8 \
	MOVQ T_UNITS(AX), CX \
	MOVQ R14, R12 \
	VXORPS Y0, Y0, Y0 \
	VXORPS Y1, Y1, Y1 \
	VXORPS Y2, Y2, Y2 \
	VXORPS Y3, Y3, Y3

#define QUAD_UNIT_START \
	VPXOR Y4, Y4, Y4 \
	VPXOR Y5, Y5, Y5 \
	VPXOR Y6, Y6, Y6 \
	VPXOR Y7, Y7, Y7 \
	MOVQ T_CHUNKS(AX), BX

// VNNI's quads accumulate each token's lanes in two registers (Y4–Y7 and
// Y16–Y19, AVX-512's upper registers), so that two chains of vpdpwssd, not
// one, wait on each other's latency; the integer sums are exact, so the
// fold changes no bit.
#define QUAD_VNNI_ZERO \
	VPXORD Y16, Y16, Y16 \
	VPXORD Y17, Y17, Y17 \
	VPXORD Y18, Y18, Y18 \
	VPXORD Y19, Y19, Y19

#define QUAD_VNNI_FOLD \
	VPADDD Y16, Y4, Y4 \
	VPADDD Y17, Y5, Y5 \
	VPADDD Y18, Y6, Y6 \
	VPADDD Y19, Y7, Y7

// QUAD_W4_WIDEN widens one 32-byte chunk of 4-bit weights: Y8, Y9 the low
// and high nibbles of bytes 0–15, Y10, Y11 those of bytes 16–31.
#define QUAD_W4_WIDEN \
	VPMOVZXBW 0(SI), Y8 \
	VPSRLW $4, Y8, Y9 \
	VPAND Y12, Y8, Y8 \
	VPMOVZXBW 16(SI), Y10 \
	VPSRLW $4, Y10, Y11 \
	VPAND Y12, Y10, Y10

// QUAD_W4_TOKEN_VNNI(acc, idx) multiplies the widened chunk with one
// token's 64 activations at (R12)(idx*1): idx is DI (zero) for token 0,
// R13, R10 and R15 (one, two and three strides) for the others.
#define QUAD_W4_TOKEN_VNNI(acc, acc2, idx) \
	VPDPWSSD 0(R12)(idx*1), Y8, acc \
	VPDPWSSD 32(R12)(idx*1), Y9, acc2 \
	VPDPWSSD 64(R12)(idx*1), Y10, acc \
	VPDPWSSD 96(R12)(idx*1), Y11, acc2

#define QUAD_W4_TOKEN_AVX2(acc, idx) \
	VPMADDWD 0(R12)(idx*1), Y8, Y13 \
	VPMADDWD 32(R12)(idx*1), Y9, Y15 \
	VPADDD Y13, acc, acc \
	VPADDD Y15, acc, acc \
	VPMADDWD 64(R12)(idx*1), Y10, Y13 \
	VPMADDWD 96(R12)(idx*1), Y11, Y15 \
	VPADDD Y13, acc, acc \
	VPADDD Y15, acc, acc

#define QUAD_W8_WIDEN \
	VPMOVZXBW 0(SI), Y8 \
	VPMOVZXBW 16(SI), Y9

#define QUAD_W8_TOKEN_VNNI(acc, acc2, idx) \
	VPDPWSSD 0(R12)(idx*1), Y8, acc \
	VPDPWSSD 32(R12)(idx*1), Y9, acc2

#define QUAD_W8_TOKEN_AVX2(acc, idx) \
	VPMADDWD 0(R12)(idx*1), Y8, Y13 \
	VPMADDWD 32(R12)(idx*1), Y9, Y15 \
	VPADDD Y13, acc, acc \
	VPADDD Y15, acc, acc

// QUAD_UNIT_TOKEN folds one token's unit into its accumulator, as
// UNIT_UNIFORM does: Y8 holds the scale, Y9 the bias.
#define QUAD_UNIT_TOKEN(isum, acc, idx) \
	VCVTDQ2PS isum, isum \
	VMULPS 0(R12)(idx*1), Y8, Y10 \
	VMULPS 32(R12)(idx*1), Y9, Y13 \
	VFMADD231PS Y10, isum, Y13 \
	VADDPS Y13, acc, acc

// QUAD_UNIT_END folds the unit of all four tokens; R12 points at the unit's
// scales d of token 0.
#define QUAD_UNIT_END \
	VPBROADCASTW (DX), Y8 \
	VPSLLD $16, Y8, Y8 \
	VPBROADCASTW (R8), Y9 \
	VPSLLD $16, Y9, Y9 \
	QUAD_UNIT_TOKEN(Y4, Y0, DI) \
	QUAD_UNIT_TOKEN(Y5, Y1, R13) \
	QUAD_UNIT_TOKEN(Y6, Y2, R10) \
	QUAD_UNIT_TOKEN(Y7, Y3, R15) \
	ADDQ $64, R12 \
	ADDQ $2, DX \
	ADDQ $2, R8

#define QUAD_STORE(acc, xacc, dst) \
	VEXTRACTF128 $1, acc, X10 \
	VADDPS X10, xacc, xacc \
	VHADDPS xacc, xacc, xacc \
	VHADDPS xacc, xacc, xacc \
	VMOVSS xacc, dst

// QUAD_TOKEN_END stores the four outputs (the outputs are outStride apart:
// R10 walks them) and moves to the next quad.
#define QUAD_TOKEN_END \
	MOVQ T_OUTSTRIDE(AX), BX \
	QUAD_STORE(Y0, X0, (R9)) \
	ADDQ BX, R9 \
	QUAD_STORE(Y1, X1, (R9)) \
	ADDQ BX, R9 \
	QUAD_STORE(Y2, X2, (R9)) \
	ADDQ BX, R9 \
	QUAD_STORE(Y3, X3, (R9)) \
	ADDQ BX, R9 \
	LEAQ (R14)(R13*4), R14 \
	DECQ R11

// func w4QuadVNNI(t *q8Tile)
TEXT ·w4QuadVNNI(SB), NOSPLIT, $0-8
	QUAD_START
w4qvToken:
	QUAD_TOKEN_START
w4qvUnit:
	QUAD_UNIT_START
	QUAD_VNNI_ZERO
w4qvChunk:
	QUAD_W4_WIDEN
	QUAD_W4_TOKEN_VNNI(Y4, Y16, DI)
	QUAD_W4_TOKEN_VNNI(Y5, Y17, R13)
	QUAD_W4_TOKEN_VNNI(Y6, Y18, R10)
	QUAD_W4_TOKEN_VNNI(Y7, Y19, R15)
	ADDQ $32, SI
	ADDQ $128, R12
	DECQ BX
	JNZ w4qvChunk
	QUAD_VNNI_FOLD
	QUAD_UNIT_END
	DECQ CX
	JNZ w4qvUnit
	QUAD_TOKEN_END
	JNZ w4qvToken
	VZEROUPPER
	RET

// func w4QuadAVX2(t *q8Tile)
TEXT ·w4QuadAVX2(SB), NOSPLIT, $0-8
	QUAD_START
w4qaToken:
	QUAD_TOKEN_START
w4qaUnit:
	QUAD_UNIT_START
w4qaChunk:
	QUAD_W4_WIDEN
	QUAD_W4_TOKEN_AVX2(Y4, DI)
	QUAD_W4_TOKEN_AVX2(Y5, R13)
	QUAD_W4_TOKEN_AVX2(Y6, R10)
	QUAD_W4_TOKEN_AVX2(Y7, R15)
	ADDQ $32, SI
	ADDQ $128, R12
	DECQ BX
	JNZ w4qaChunk
	QUAD_UNIT_END
	DECQ CX
	JNZ w4qaUnit
	QUAD_TOKEN_END
	JNZ w4qaToken
	VZEROUPPER
	RET

// func w8QuadVNNI(t *q8Tile)
TEXT ·w8QuadVNNI(SB), NOSPLIT, $0-8
	QUAD_START
w8qvToken:
	QUAD_TOKEN_START
w8qvUnit:
	QUAD_UNIT_START
	QUAD_VNNI_ZERO
w8qvChunk:
	QUAD_W8_WIDEN
	QUAD_W8_TOKEN_VNNI(Y4, Y16, DI)
	QUAD_W8_TOKEN_VNNI(Y5, Y17, R13)
	QUAD_W8_TOKEN_VNNI(Y6, Y18, R10)
	QUAD_W8_TOKEN_VNNI(Y7, Y19, R15)
	ADDQ $32, SI
	ADDQ $64, R12
	DECQ BX
	JNZ w8qvChunk
	QUAD_VNNI_FOLD
	QUAD_UNIT_END
	DECQ CX
	JNZ w8qvUnit
	QUAD_TOKEN_END
	JNZ w8qvToken
	VZEROUPPER
	RET

// func w8QuadAVX2(t *q8Tile)
TEXT ·w8QuadAVX2(SB), NOSPLIT, $0-8
	QUAD_START
w8qaToken:
	QUAD_TOKEN_START
w8qaUnit:
	QUAD_UNIT_START
w8qaChunk:
	QUAD_W8_WIDEN
	QUAD_W8_TOKEN_AVX2(Y4, DI)
	QUAD_W8_TOKEN_AVX2(Y5, R13)
	QUAD_W8_TOKEN_AVX2(Y6, R10)
	QUAD_W8_TOKEN_AVX2(Y7, R15)
	ADDQ $32, SI
	ADDQ $64, R12
	DECQ BX
	JNZ w8qaChunk
	QUAD_UNIT_END
	DECQ CX
	JNZ w8qaUnit
	QUAD_TOKEN_END
	JNZ w8qaToken
	VZEROUPPER
	RET

// Multi-row kernels: t.rows consecutive weight rows against one, two or
// four token rows (t.tokens is not read), each row's outputs 4 bytes after
// the previous row's. A row's weights, scales and biases follow the
// previous row's, so SI, DX and R8 run on from row to row; one call
// covers a block of rows, so the per-row call of the kernels above (a Go
// loop and an indirect call per row) goes. The bodies are those kernels',
// so a row's outputs are theirs bit for bit. Registers as in the quad
// kernels, plus R9 the current row's first output, R11 rows left.
//
// 512-bit forms of these (a 32-byte chunk widened into two registers of
// 32 words lined up with the stored activations, two vpdpwssd of 64 bytes
// per token and chunk, a fold of the upper lanes onto the lower) measured
// slower on AMD Zen 4 (BenchmarkProducts, GMAC per CPU second, one
// thread: 27 against 32 for one token, 40 against 50 for four): the core
// runs them as two 256-bit halves, so the halved instruction count saves
// nothing, and the lane-crossing shuffles and the fold cost extra.
#define T_ROWS 80
#define T_QUADS 88
#define T_WORK 96
#define T_PAIRS 104
#define T_REDO 112

#define ROWS_START \
	MOVQ t+0(FP), AX \
	MOVQ T_XSTRIDE(AX), R13 \
	XORQ DI, DI \
	LEAQ (R13)(R13*1), R10 \
	LEAQ (R13)(R13*2), R15 \
	VPCMPEQW Y12, Y12, Y12 \
	VPSRLW $12, Y12, Y12 \
	MOVQ T_W(AX), SI \
	MOVQ T_SCALES(AX), DX \
	MOVQ T_BIASES(AX), R8 \
	MOVQ T_OUT(AX), R9 \
	MOVQ T_ROWS(AX), R11

#define ROWS_ROW_START \
	MOVQ T_UNITS(AX), CX \
	MOVQ T_X(AX), R12 \
	VXORPS Y0, Y0, Y0 \
	VXORPS Y1, Y1, Y1 \
	VXORPS Y2, Y2, Y2 \
	VXORPS Y3, Y3, Y3

// PAIR_UNIT_END is QUAD_UNIT_END for two tokens.
#define PAIR_UNIT_END \
	VPBROADCASTW (DX), Y8 \
	VPSLLD $16, Y8, Y8 \
	VPBROADCASTW (R8), Y9 \
	VPSLLD $16, Y9, Y9 \
	QUAD_UNIT_TOKEN(Y4, Y0, DI) \
	QUAD_UNIT_TOKEN(Y5, Y1, R13) \
	ADDQ $64, R12 \
	ADDQ $2, DX \
	ADDQ $2, R8

// ROWS_END4 stores four tokens' outputs of the row (outStride apart) and
// moves to the next row; ROWS_END2 two.
#define ROWS_END4 \
	MOVQ T_OUTSTRIDE(AX), BX \
	MOVQ R9, R14 \
	QUAD_STORE(Y0, X0, (R14)) \
	ADDQ BX, R14 \
	QUAD_STORE(Y1, X1, (R14)) \
	ADDQ BX, R14 \
	QUAD_STORE(Y2, X2, (R14)) \
	ADDQ BX, R14 \
	QUAD_STORE(Y3, X3, (R14)) \
	ADDQ $4, R9 \
	DECQ R11

// ROWS2_UNIT_START, ROWS2_VNNI_ZERO and ROWS2_VNNI_FOLD are QUAD_UNIT_START,
// QUAD_VNNI_ZERO and QUAD_VNNI_FOLD for two tokens.
#define ROWS2_UNIT_START \
	VPXOR Y4, Y4, Y4 \
	VPXOR Y5, Y5, Y5 \
	MOVQ T_CHUNKS(AX), BX

#define ROWS2_VNNI_ZERO \
	VPXORD Y16, Y16, Y16 \
	VPXORD Y17, Y17, Y17

#define ROWS2_VNNI_FOLD \
	VPADDD Y16, Y4, Y4 \
	VPADDD Y17, Y5, Y5

#define ROWS_END2 \
	MOVQ T_OUTSTRIDE(AX), BX \
	MOVQ R9, R14 \
	QUAD_STORE(Y0, X0, (R14)) \
	ADDQ BX, R14 \
	QUAD_STORE(Y1, X1, (R14)) \
	ADDQ $4, R9 \
	DECQ R11

// One token over a block of rows with 256-bit registers: the one-token
// kernels' bodies (w4TileVNNI, w4TileAVX2, ...) looping over t.rows rows.
#define ROWS1_START \
	MOVQ t+0(FP), AX \
	MOVL $0x0F0F0F0F, BX \
	VMOVD BX, X15 \
	VPBROADCASTD X15, Y15 \
	VPCMPEQD Y14, Y14, Y14 \
	VPSLLD $16, Y14, Y14 \
	VPCMPEQW Y13, Y13, Y13 \
	VPSRLW $15, Y13, Y13 \
	VPCMPEQW Y12, Y12, Y12 \
	VPSRLW $12, Y12, Y12 \
	MOVQ T_W(AX), SI \
	MOVQ T_SCALES(AX), DX \
	MOVQ T_BIASES(AX), R8 \
	MOVQ T_OUT(AX), R10 \
	MOVQ T_ROWS(AX), R11

#define ROWS1_ROW_START \
	MOVQ T_UNITS(AX), CX \
	MOVQ T_X(AX), R12 \
	VXORPS Y0, Y0, Y0

#define ROWS1_ROW_END \
	VEXTRACTF128 $1, Y0, X1 \
	VADDPS X1, X0, X0 \
	VHADDPS X0, X0, X0 \
	VHADDPS X0, X0, X0 \
	VMOVSS X0, (R10) \
	ADDQ $4, R10 \
	DECQ R11

// func w4Rows1VNNI(t *q8Tile)
//
// A one-sequence decode step's products run here, each reading its
// weights from memory (the rest of the model passes through the caches
// between a layer's steps), so the weights W4R1_AHEAD bytes ahead, and
// the scales and biases as far ahead (a sixteenth of that in their bytes),
// are asked for while the current ones are multiplied. Two-thread decode
// products of a DeltaNet layer (BenchmarkDecodeLayerProducts, cold, best
// of four on a loaded machine): mixer 1.07 ms with the weights 1 KiB
// ahead, 0.99 with them 2 KiB ahead and the scales and biases too; MoE
// 0.90 and 0.75. BenchmarkDecode, quiet: a DeltaNet layer 0.94x the wall
// time, its MoE 0.91x, against the kernel before (1 KiB, weights only).
//
// Fewer instructions per unit than w4TileVNNI, the same lanes and float
// operations (so the same bits): the first chunk of a unit starts its two
// int32 accumulators with vpmaddwd instead of zeroing them, and a unit's
// BF16 scale and bias are each one instruction, a dword broadcast from
// memory masked to its upper word (the word before, then, is the previous
// unit's; the first unit of a row, which has none, broadcasts the word
// and shifts it up, reading nothing outside the row).
#define W4R1_AHEAD 2048
#define W4R1_SB_AHEAD 128

// W4R1_FIRST_CHUNK multiplies the unit's first chunk into Y1 (even
// elements) and Y7 (odd).
#define W4R1_FIRST_CHUNK \
	PREFETCHT0 W4R1_AHEAD(SI) \
	PREFETCHT0 W4R1_SB_AHEAD(DX) \
	PREFETCHT0 W4R1_SB_AHEAD(R8) \
	VPMOVZXBW 0(SI), Y2 \
	VPSRLW $4, Y2, Y3 \
	VPAND Y12, Y2, Y2 \
	VPMADDWD 0(R12), Y2, Y1 \
	VPMADDWD 32(R12), Y3, Y7 \
	VPMOVZXBW 16(SI), Y2 \
	VPSRLW $4, Y2, Y3 \
	VPAND Y12, Y2, Y2 \
	VPDPWSSD 64(R12), Y2, Y1 \
	VPDPWSSD 96(R12), Y3, Y7 \
	ADDQ $32, SI \
	ADDQ $128, R12

// W4R1_CHUNK adds a further chunk of the unit (groups wider than 64).
#define W4R1_CHUNK \
	PREFETCHT0 W4R1_AHEAD(SI) \
	W4_HALF_VNNI(0, 0, 32, Y1, Y7) \
	W4_HALF_VNNI(16, 64, 96, Y1, Y7) \
	ADDQ $32, SI \
	ADDQ $128, R12

// W4R1_FOLD is UNIT_UNIFORM's float update with the scale in Y4 and the
// bias in Y5 already widened.
#define W4R1_FOLD \
	VPADDD Y7, Y1, Y1 \
	VCVTDQ2PS Y1, Y1 \
	VMULPS (R12), Y4, Y4 \
	VMULPS 32(R12), Y5, Y5 \
	VFMADD231PS Y4, Y1, Y5 \
	VADDPS Y5, Y0, Y0 \
	ADDQ $64, R12 \
	ADDQ $2, DX \
	ADDQ $2, R8

TEXT ·w4Rows1VNNI(SB), NOSPLIT, $0-8
	ROWS1_START
w4r1vRow:
	ROWS1_ROW_START
	W4R1_FIRST_CHUNK
	MOVQ T_CHUNKS(AX), BX
	DECQ BX
	JZ w4r1vFirstFold
w4r1vFirstChunk:
	W4R1_CHUNK
	DECQ BX
	JNZ w4r1vFirstChunk
w4r1vFirstFold:
	VPBROADCASTW (DX), Y4
	VPSLLD $16, Y4, Y4
	VPBROADCASTW (R8), Y5
	VPSLLD $16, Y5, Y5
	W4R1_FOLD
	DECQ CX
	JZ w4r1vRowEnd
w4r1vUnit:
	W4R1_FIRST_CHUNK
	MOVQ T_CHUNKS(AX), BX
	DECQ BX
	JZ w4r1vFold
w4r1vChunk:
	W4R1_CHUNK
	DECQ BX
	JNZ w4r1vChunk
w4r1vFold:
	VPANDD.BCST -2(DX), Y14, Y4
	VPANDD.BCST -2(R8), Y14, Y5
	W4R1_FOLD
	DECQ CX
	JNZ w4r1vUnit
w4r1vRowEnd:
	ROWS1_ROW_END
	JNZ w4r1vRow
	VZEROUPPER
	RET

// func w4Rows2VNNI(t *q8Tile)
//
// The two-token kernels (a batched decode step of two or three sequences)
// prefetch as w4Rows1VNNI does: BenchmarkDecodeBatch/seqs2, 0.90x the CPU
// per step (four alternated runs, load average 4.7). The four-token ones
// do not: they also serve prefill, where the weights are in L2 and the
// extra load per chunk made a DeltaNet block's prefill 1.06x the CPU.
TEXT ·w4Rows2VNNI(SB), NOSPLIT, $0-8
	ROWS_START
w4r2vRow:
	ROWS_ROW_START
w4r2vUnit:
	PREFETCHT0 W4R1_SB_AHEAD(DX)
	PREFETCHT0 W4R1_SB_AHEAD(R8)
	ROWS2_UNIT_START
	ROWS2_VNNI_ZERO
w4r2vChunk:
	PREFETCHT0 W4R1_AHEAD(SI)
	QUAD_W4_WIDEN
	QUAD_W4_TOKEN_VNNI(Y4, Y16, DI)
	QUAD_W4_TOKEN_VNNI(Y5, Y17, R13)
	ADDQ $32, SI
	ADDQ $128, R12
	DECQ BX
	JNZ w4r2vChunk
	ROWS2_VNNI_FOLD
	PAIR_UNIT_END
	DECQ CX
	JNZ w4r2vUnit
	ROWS_END2
	JNZ w4r2vRow
	VZEROUPPER
	RET

// func w4Rows4VNNI(t *q8Tile)
TEXT ·w4Rows4VNNI(SB), NOSPLIT, $0-8
	ROWS_START
w4r4vRow:
	ROWS_ROW_START
w4r4vUnit:
	QUAD_UNIT_START
	QUAD_VNNI_ZERO
w4r4vChunk:
	QUAD_W4_WIDEN
	QUAD_W4_TOKEN_VNNI(Y4, Y16, DI)
	QUAD_W4_TOKEN_VNNI(Y5, Y17, R13)
	QUAD_W4_TOKEN_VNNI(Y6, Y18, R10)
	QUAD_W4_TOKEN_VNNI(Y7, Y19, R15)
	ADDQ $32, SI
	ADDQ $128, R12
	DECQ BX
	JNZ w4r4vChunk
	QUAD_VNNI_FOLD
	QUAD_UNIT_END
	DECQ CX
	JNZ w4r4vUnit
	ROWS_END4
	JNZ w4r4vRow
	VZEROUPPER
	RET

// func w8Rows1VNNI(t *q8Tile)
//
// Prefetching as w4Rows1VNNI does (a decode step's router reads its 8-bit
// weights from memory too): the weights W4R1_AHEAD bytes ahead, the scales
// and biases as far ahead, a thirty-second of that in their bytes.
TEXT ·w8Rows1VNNI(SB), NOSPLIT, $0-8
	ROWS1_START
w8r1vRow:
	ROWS1_ROW_START
w8r1vUnit:
	VPXOR Y1, Y1, Y1
	VPXOR Y7, Y7, Y7
	PREFETCHT0 (W4R1_SB_AHEAD/2)(DX)
	PREFETCHT0 (W4R1_SB_AHEAD/2)(R8)
	MOVQ T_CHUNKS(AX), BX
w8r1vChunk:
	PREFETCHT0 W4R1_AHEAD(SI)
	W8_HALF_VNNI(0, 0, Y1)
	W8_HALF_VNNI(16, 32, Y7)
	ADDQ $32, SI
	ADDQ $64, R12
	DECQ BX
	JNZ w8r1vChunk
	VPADDD Y7, Y1, Y1
	UNIT_UNIFORM
	DECQ CX
	JNZ w8r1vUnit
	ROWS1_ROW_END
	JNZ w8r1vRow
	VZEROUPPER
	RET

// func w8Rows2VNNI(t *q8Tile)
TEXT ·w8Rows2VNNI(SB), NOSPLIT, $0-8
	ROWS_START
w8r2vRow:
	ROWS_ROW_START
w8r2vUnit:
	PREFETCHT0 (W4R1_SB_AHEAD/2)(DX)
	PREFETCHT0 (W4R1_SB_AHEAD/2)(R8)
	ROWS2_UNIT_START
	ROWS2_VNNI_ZERO
w8r2vChunk:
	PREFETCHT0 W4R1_AHEAD(SI)
	QUAD_W8_WIDEN
	QUAD_W8_TOKEN_VNNI(Y4, Y16, DI)
	QUAD_W8_TOKEN_VNNI(Y5, Y17, R13)
	ADDQ $32, SI
	ADDQ $64, R12
	DECQ BX
	JNZ w8r2vChunk
	ROWS2_VNNI_FOLD
	PAIR_UNIT_END
	DECQ CX
	JNZ w8r2vUnit
	ROWS_END2
	JNZ w8r2vRow
	VZEROUPPER
	RET

// func w8Rows4VNNI(t *q8Tile)
TEXT ·w8Rows4VNNI(SB), NOSPLIT, $0-8
	ROWS_START
w8r4vRow:
	ROWS_ROW_START
w8r4vUnit:
	QUAD_UNIT_START
	QUAD_VNNI_ZERO
w8r4vChunk:
	QUAD_W8_WIDEN
	QUAD_W8_TOKEN_VNNI(Y4, Y16, DI)
	QUAD_W8_TOKEN_VNNI(Y5, Y17, R13)
	QUAD_W8_TOKEN_VNNI(Y6, Y18, R10)
	QUAD_W8_TOKEN_VNNI(Y7, Y19, R15)
	ADDQ $32, SI
	ADDQ $64, R12
	DECQ BX
	JNZ w8r4vChunk
	QUAD_VNNI_FOLD
	QUAD_UNIT_END
	DECQ CX
	JNZ w8r4vUnit
	ROWS_END4
	JNZ w8r4vRow
	VZEROUPPER
	RET

// Two-row kernels (VNNI): t.rows consecutive weight rows (an even number)
// against four token rows, two rows at a time. What bounds the four-token
// kernels above on AMD Zen 4 is the two vector multiply pipes, which run
// vpdpwssd and the float multiplies alike: per unit (64 weights) and
// token, four vpdpwssd, then the fold's two multiplies (s·d, b·d·Σxq) and
// its fused multiply-add, 7 multiply-pipe operations where 4 do the
// integer work (timed apart on one 128-row block, the integer part and
// the fold add up to the whole). Here the fold's multiplies leave the
// unit loop: before a row pair's units, a short loop computes per unit
// [sA sA sA sA sB sB sB sB]·[d0 d1 d2 d3 d0 d1 d2 d3] and the same for
// b and d·Σxq (two multiplies for the eight (row, token) pairs, from the
// quad table q8Input.quads) into t.work; the unit's fold then broadcasts
// s·d from there into its fused multiply-add and loads b·d·Σxq as
// [p 0 0 0 0 0 0 0], loads instead of multiplies: 5¼ multiply-pipe
// operations per unit and token. Each activation load also feeds both
// rows. Each (row, token) pair keeps its own eight lanes and the float
// chain of UNIT_UNIFORM in the same order (d is the same in every lane of
// a unit of one group, so s·d broadcast is the lanes' s·d), so its output
// is the one-row kernels' bit for bit, with one exception handled: their
// bias lanes past the first hold b·0, ±0 for a finite b, here +0, which
// changes no sum (an accumulator that starts at +0 never becomes −0, and
// adding ±0 to anything else leaves it); an infinite or NaN b makes b·0 a
// NaN, so every bias's b·0 is ORed into Y15 and the kernel sets t.redo
// for q8Rows to run the rows again with the four-token kernel. The int32
// lanes of a unit start with vpmaddwd instead of a zeroed register and
// vpdpwssd: the weights are codes 0..255 and the activations within
// ±32767, so a pair of products never wraps and the sums are the same
// exact integers.
//
// Tried and slower on Zen 4: both rows' vpdpwssd loading the activations
// themselves (twice the loads; 0.88x), and computing a unit's s·d and
// b·d·Σxq inside the unit loop into memory read back at once (the
// broadcast loads wait on the just-written stores: the fold took longer
// than the multiplies it saved).
//
// Registers: Y0–Y3 row A's accumulators for tokens 0–3, Y4–Y7 row B's;
// Y8–Y11 row A's widened chunk, Y16–Y19 row B's (both then the fold's
// products); Y20–Y23 row A's int32 lanes, Y24–Y27 row B's; Y28–Y31 one
// token's activations; Y13, Y14 and Y30 (zero) the products loop's. SI
// walks row A's weights, row B's are R14 (a row's bytes) further; DX and
// R8 walk row A's scales and biases in the products loop, row B's are
// units words further. DI walks the next row pair's row A (RP_PREFETCH),
// R13, R10 and R15 are one, two and three token strides, R12 the prepared rows (the quad table in the products
// loop), R11 t.work, R9 row A's first output.
#define RP_START \
	MOVQ t+0(FP), AX \
	MOVQ T_XSTRIDE(AX), R13 \
	LEAQ (R13)(R13*1), R10 \
	LEAQ (R13)(R13*2), R15 \
	VPCMPEQW Y12, Y12, Y12 \
	VPSRLW $12, Y12, Y12 \
	MOVQ T_W(AX), SI \
	MOVQ T_SCALES(AX), DX \
	MOVQ T_BIASES(AX), R8 \
	MOVQ T_OUT(AX), R9 \
	MOVQ T_ROWS(AX), BX \
	SHRQ $1, BX \
	MOVQ BX, T_PAIRS(AX) \
	MOVQ T_UNITS(AX), R14 \
	IMULQ T_CHUNKS(AX), R14 \
	SHLQ $5, R14 \
	VPXORD Y15, Y15, Y15

#define RP_ROW_START \
	MOVQ T_UNITS(AX), CX \
	MOVQ T_X(AX), R12 \
	MOVQ T_WORK(AX), R11 \
	LEAQ (SI)(R14*2), DI \
	VXORPS Y0, Y0, Y0 \
	VXORPS Y1, Y1, Y1 \
	VXORPS Y2, Y2, Y2 \
	VXORPS Y3, Y3, Y3 \
	VXORPS Y4, Y4, Y4 \
	VXORPS Y5, Y5, Y5 \
	VXORPS Y6, Y6, Y6 \
	VXORPS Y7, Y7, Y7

// RP_W4_WIDEN widens one 32-byte chunk of each row: row A's as
// QUAD_W4_WIDEN, row B's into Y16–Y19.
#define RP_W4_WIDEN \
	QUAD_W4_WIDEN \
	VPMOVZXBW 0(SI)(R14*1), Y16 \
	VPSRLW $4, Y16, Y17 \
	VPANDD Y12, Y16, Y16 \
	VPMOVZXBW 16(SI)(R14*1), Y18 \
	VPSRLW $4, Y18, Y19 \
	VPANDD Y12, Y18, Y18

#define RP_W8_WIDEN \
	VPMOVZXBW 0(SI), Y8 \
	VPMOVZXBW 16(SI), Y9 \
	VPMOVZXBW 0(SI)(R14*1), Y16 \
	VPMOVZXBW 16(SI)(R14*1), Y17

// RP_W4_TOKEN(op, accA, accB) multiplies both rows' widened chunks with
// one token's 64 activations loaded into Y28–Y31 (RP_W4_LOAD(idx) loads
// those at (R12)(idx*1), RP_W4_LOAD0 token 0's at (R12)), each load feeding
// two products; op is VPMADDWD for a unit's first chunk, VPDPWSSD after.
#define RP_W4_LOAD(idx) \
	VMOVDQU64 0(R12)(idx*1), Y28 \
	VMOVDQU64 32(R12)(idx*1), Y29 \
	VMOVDQU64 64(R12)(idx*1), Y30 \
	VMOVDQU64 96(R12)(idx*1), Y31

#define RP_W4_LOAD0 \
	VMOVDQU64 0(R12), Y28 \
	VMOVDQU64 32(R12), Y29 \
	VMOVDQU64 64(R12), Y30 \
	VMOVDQU64 96(R12), Y31

#define RP_W4_TOKEN(op, accA, accB) \
	op Y28, Y8, accA \
	op Y28, Y16, accB \
	VPDPWSSD Y29, Y9, accA \
	VPDPWSSD Y29, Y17, accB \
	VPDPWSSD Y30, Y10, accA \
	VPDPWSSD Y30, Y18, accB \
	VPDPWSSD Y31, Y11, accA \
	VPDPWSSD Y31, Y19, accB

#define RP_W8_LOAD(idx) \
	VMOVDQU64 0(R12)(idx*1), Y28 \
	VMOVDQU64 32(R12)(idx*1), Y29

#define RP_W8_LOAD0 \
	VMOVDQU64 0(R12), Y28 \
	VMOVDQU64 32(R12), Y29

#define RP_W8_TOKEN(op, accA, accB) \
	op Y28, Y8, accA \
	op Y28, Y16, accB \
	VPDPWSSD Y29, Y9, accA \
	VPDPWSSD Y29, Y17, accB

// RP_PREFETCH asks, once a unit, for the next row pair's weights at the
// offset the unit reads into L2 (DI walks the next pair's row A, R14 on is
// its row B). With four tokens in all the weights come from memory, and
// the two rows' interleaved reads of one row each are short streams for
// the hardware prefetchers: without it four tokens ran slower than with
// the four-token kernel. Into L2 only: PREFETCHT0 pushed the activations
// out of L1 (8-bit rows of 2 KiB: 0.95x on an L2-resident block).
#define RP_PREFETCH \
	PREFETCHT1 0(DI) \
	PREFETCHT1 0(DI)(R14*1)

#define RP_W4_CHUNK(op) \
	RP_W4_WIDEN \
	RP_W4_LOAD0 \
	RP_W4_TOKEN(op, Y20, Y24) \
	RP_W4_LOAD(R13) \
	RP_W4_TOKEN(op, Y21, Y25) \
	RP_W4_LOAD(R10) \
	RP_W4_TOKEN(op, Y22, Y26) \
	RP_W4_LOAD(R15) \
	RP_W4_TOKEN(op, Y23, Y27) \
	ADDQ $32, SI \
	ADDQ $32, DI \
	ADDQ $128, R12

#define RP_W8_CHUNK(op) \
	RP_W8_WIDEN \
	RP_W8_LOAD0 \
	RP_W8_TOKEN(op, Y20, Y24) \
	RP_W8_LOAD(R13) \
	RP_W8_TOKEN(op, Y21, Y25) \
	RP_W8_LOAD(R10) \
	RP_W8_TOKEN(op, Y22, Y26) \
	RP_W8_LOAD(R15) \
	RP_W8_TOKEN(op, Y23, Y27) \
	ADDQ $32, SI \
	ADDQ $32, DI \
	ADDQ $64, R12

// RP_FOLD(isum, acc, p, coff, poff) is UNIT_UNIFORM for one row and
// token: p = [b·d·Σxq 0 0 0 0 0 0 0] from poff(SP), p += float(isum)·(s·d)
// with s·d broadcast from coff(SP), acc += p.
#define RP_FOLD(isum, acc, xp, p, coff, poff) \
	VCVTDQ2PS isum, isum \
	VMOVSS poff(R11), xp \
	VFMADD231PS.BCST coff(R11), isum, p \
	VADDPS p, acc, acc

// RP_PRE computes one unit's s·d and b·d·Σxq of both rows and four tokens
// into 0(R11) and 32(R11): R12 points at the unit's [d×4 d×4 xs×4 xs×4],
// BX holds the units of a row (row B's scales and biases are 2·units bytes
// on).
#define RP_PRE \
	VPBROADCASTW (DX), X13 \
	VPBROADCASTW (DX)(BX*2), X14 \
	VINSERTI128 $1, X14, Y13, Y13 \
	VPSLLD $16, Y13, Y13 \
	VMULPS 0(R12), Y13, Y13 \
	VMOVUPS Y13, 0(R11) \
	VPBROADCASTW (R8), X14 \
	VPBROADCASTW (R8)(BX*2), X13 \
	VINSERTI128 $1, X13, Y14, Y14 \
	VPSLLD $16, Y14, Y14 \
	VMULPS Y30, Y14, Y13 \
	VORPS Y13, Y15, Y15 \
	VMULPS 32(R12), Y14, Y14 \
	VMOVUPS Y14, 32(R11) \
	ADDQ $2, DX \
	ADDQ $2, R8 \
	ADDQ $64, R12 \
	ADDQ $64, R11

#define RP_PRE_START \
	VXORPS Y30, Y30, Y30 \
	MOVQ T_UNITS(AX), CX \
	MOVQ CX, BX \
	MOVQ T_QUADS(AX), R12 \
	MOVQ T_WORK(AX), R11

// RP_UNIT_END folds the unit of both rows and four tokens from the
// products at R11.
#define RP_UNIT_END \
	RP_FOLD(Y20, Y0, X8, Y8, 0, 32) \
	RP_FOLD(Y24, Y4, X16, Y16, 16, 48) \
	RP_FOLD(Y21, Y1, X9, Y9, 4, 36) \
	RP_FOLD(Y25, Y5, X17, Y17, 20, 52) \
	RP_FOLD(Y22, Y2, X10, Y10, 8, 40) \
	RP_FOLD(Y26, Y6, X18, Y18, 24, 56) \
	RP_FOLD(Y23, Y3, X11, Y11, 12, 44) \
	RP_FOLD(Y27, Y7, X19, Y19, 28, 60) \
	ADDQ $64, R12 \
	ADDQ $64, R11

// RP_END sets t.redo where a bias of the call's rows is an infinity or a
// NaN: Y15 is the OR of every b·0, ±0 unless b is not finite.
#define RP_END \
	VPSLLD $1, Y15, Y15 \
	VPTEST Y15, Y15 \
	SETNE T_REDO(AX) \
	VZEROUPPER

// RP_ROW_END stores both rows' four outputs (row B's 4 bytes after row
// A's, each token outStride on) and moves SI, DX and R8 past row B.
#define RP_ROW_END \
	MOVQ T_OUTSTRIDE(AX), BX \
	MOVQ R9, CX \
	QUAD_STORE(Y0, X0, (CX)) \
	QUAD_STORE(Y4, X4, 4(CX)) \
	ADDQ BX, CX \
	QUAD_STORE(Y1, X1, (CX)) \
	QUAD_STORE(Y5, X5, 4(CX)) \
	ADDQ BX, CX \
	QUAD_STORE(Y2, X2, (CX)) \
	QUAD_STORE(Y6, X6, 4(CX)) \
	ADDQ BX, CX \
	QUAD_STORE(Y3, X3, (CX)) \
	QUAD_STORE(Y7, X7, 4(CX)) \
	ADDQ $8, R9 \
	ADDQ R14, SI \
	MOVQ T_UNITS(AX), BX \
	LEAQ (DX)(BX*2), DX \
	LEAQ (R8)(BX*2), R8 \
	DECQ T_PAIRS(AX)

// func w4Pair4VNNI(t *q8Tile)
TEXT ·w4Pair4VNNI(SB), NOSPLIT, $0-8
	RP_START
w4p4vRow:
	RP_PRE_START
w4p4vPre:
	RP_PRE
	DECQ CX
	JNZ w4p4vPre
	RP_ROW_START
w4p4vUnit:
	RP_PREFETCH
	RP_W4_CHUNK(VPMADDWD)
	MOVQ T_CHUNKS(AX), BX
	DECQ BX
	JZ w4p4vFold
w4p4vChunk:
	RP_W4_CHUNK(VPDPWSSD)
	DECQ BX
	JNZ w4p4vChunk
w4p4vFold:
	RP_UNIT_END
	DECQ CX
	JNZ w4p4vUnit
	RP_ROW_END
	JNZ w4p4vRow
	RP_END
	RET

// func w8Pair4VNNI(t *q8Tile)
TEXT ·w8Pair4VNNI(SB), NOSPLIT, $0-8
	RP_START
w8p4vRow:
	RP_PRE_START
w8p4vPre:
	RP_PRE
	DECQ CX
	JNZ w8p4vPre
	RP_ROW_START
w8p4vUnit:
	RP_PREFETCH
	RP_W8_CHUNK(VPMADDWD)
	MOVQ T_CHUNKS(AX), BX
	DECQ BX
	JZ w8p4vFold
w8p4vChunk:
	RP_W8_CHUNK(VPDPWSSD)
	DECQ BX
	JNZ w8p4vChunk
w8p4vFold:
	RP_UNIT_END
	DECQ CX
	JNZ w8p4vUnit
	RP_ROW_END
	JNZ w8p4vRow
	RP_END
	RET

// func w4Rows1AVX2(t *q8Tile)
TEXT ·w4Rows1AVX2(SB), NOSPLIT, $0-8
	ROWS1_START
w4r1aRow:
	ROWS1_ROW_START
w4r1aUnit:
	VPXOR Y1, Y1, Y1
	MOVQ T_CHUNKS(AX), BX
w4r1aChunk:
	W4_HALF_AVX2(0, 0, 32, Y1)
	W4_HALF_AVX2(16, 64, 96, Y1)
	ADDQ $32, SI
	ADDQ $128, R12
	DECQ BX
	JNZ w4r1aChunk
	UNIT_UNIFORM
	DECQ CX
	JNZ w4r1aUnit
	ROWS1_ROW_END
	JNZ w4r1aRow
	VZEROUPPER
	RET

// func w4Rows2AVX2(t *q8Tile)
TEXT ·w4Rows2AVX2(SB), NOSPLIT, $0-8
	ROWS_START
w4r2aRow:
	ROWS_ROW_START
w4r2aUnit:
	ROWS2_UNIT_START
w4r2aChunk:
	QUAD_W4_WIDEN
	QUAD_W4_TOKEN_AVX2(Y4, DI)
	QUAD_W4_TOKEN_AVX2(Y5, R13)
	ADDQ $32, SI
	ADDQ $128, R12
	DECQ BX
	JNZ w4r2aChunk
	PAIR_UNIT_END
	DECQ CX
	JNZ w4r2aUnit
	ROWS_END2
	JNZ w4r2aRow
	VZEROUPPER
	RET

// func w4Rows4AVX2(t *q8Tile)
TEXT ·w4Rows4AVX2(SB), NOSPLIT, $0-8
	ROWS_START
w4r4aRow:
	ROWS_ROW_START
w4r4aUnit:
	QUAD_UNIT_START
w4r4aChunk:
	QUAD_W4_WIDEN
	QUAD_W4_TOKEN_AVX2(Y4, DI)
	QUAD_W4_TOKEN_AVX2(Y5, R13)
	QUAD_W4_TOKEN_AVX2(Y6, R10)
	QUAD_W4_TOKEN_AVX2(Y7, R15)
	ADDQ $32, SI
	ADDQ $128, R12
	DECQ BX
	JNZ w4r4aChunk
	QUAD_UNIT_END
	DECQ CX
	JNZ w4r4aUnit
	ROWS_END4
	JNZ w4r4aRow
	VZEROUPPER
	RET

// func w8Rows1AVX2(t *q8Tile)
TEXT ·w8Rows1AVX2(SB), NOSPLIT, $0-8
	ROWS1_START
w8r1aRow:
	ROWS1_ROW_START
w8r1aUnit:
	VPXOR Y1, Y1, Y1
	MOVQ T_CHUNKS(AX), BX
w8r1aChunk:
	W8_HALF_AVX2(0, 0)
	W8_HALF_AVX2(16, 32)
	ADDQ $32, SI
	ADDQ $64, R12
	DECQ BX
	JNZ w8r1aChunk
	UNIT_UNIFORM
	DECQ CX
	JNZ w8r1aUnit
	ROWS1_ROW_END
	JNZ w8r1aRow
	VZEROUPPER
	RET

// func w8Rows2AVX2(t *q8Tile)
TEXT ·w8Rows2AVX2(SB), NOSPLIT, $0-8
	ROWS_START
w8r2aRow:
	ROWS_ROW_START
w8r2aUnit:
	ROWS2_UNIT_START
w8r2aChunk:
	QUAD_W8_WIDEN
	QUAD_W8_TOKEN_AVX2(Y4, DI)
	QUAD_W8_TOKEN_AVX2(Y5, R13)
	ADDQ $32, SI
	ADDQ $64, R12
	DECQ BX
	JNZ w8r2aChunk
	PAIR_UNIT_END
	DECQ CX
	JNZ w8r2aUnit
	ROWS_END2
	JNZ w8r2aRow
	VZEROUPPER
	RET

// func w8Rows4AVX2(t *q8Tile)
TEXT ·w8Rows4AVX2(SB), NOSPLIT, $0-8
	ROWS_START
w8r4aRow:
	ROWS_ROW_START
w8r4aUnit:
	QUAD_UNIT_START
w8r4aChunk:
	QUAD_W8_WIDEN
	QUAD_W8_TOKEN_AVX2(Y4, DI)
	QUAD_W8_TOKEN_AVX2(Y5, R13)
	QUAD_W8_TOKEN_AVX2(Y6, R10)
	QUAD_W8_TOKEN_AVX2(Y7, R15)
	ADDQ $32, SI
	ADDQ $64, R12
	DECQ BX
	JNZ w8r4aChunk
	QUAD_UNIT_END
	DECQ CX
	JNZ w8r4aUnit
	ROWS_END4
	JNZ w8r4aRow
	VZEROUPPER
	RET

// The activation rounding of the int16 fast path (q8Layout.quantize) with
// AVX-512: the same float operations in the same order, element by
// element, so the records are the Go loop's byte for byte.

// func absMaxAVX512(x *float32, n int) float32
//
// max |x_i| over n elements, n a multiple of 16 (max is exact, so the
// order does not matter).
TEXT ·absMaxAVX512(SB), NOSPLIT, $0-20
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	VPXORD Z0, Z0, Z0
	MOVL $0x7FFFFFFF, AX
	VPBROADCASTD AX, Z1
amLoop:
	VPANDD (SI), Z1, Z2
	VMAXPS Z2, Z0, Z0
	ADDQ $64, SI
	SUBQ $16, CX
	JNZ amLoop
	VEXTRACTF64X4 $1, Z0, Y2
	VMAXPS Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X2
	VMAXPS X2, X0, X0
	VPERMILPS $0x4E, X0, X2
	VMAXPS X2, X0, X0
	VPERMILPS $0xB1, X0, X2
	VMAXPS X2, X0, X0
	VMOVSS X0, ret+16(FP)
	VZEROUPPER
	RET

// func quantW16AVX512(x *float32, n int, inv float32, levels int32, xq *byte, perm *uint16) int32
//
// Rounds n elements (a multiple of 32) to int16: q = clamp(round(x·inv))
// by adding and subtracting 1.5·2²³ after the product, each step rounded
// to float32 as the Go loop does, and stores each block of 32 in the
// order perm gives (perm[p] is the block's element stored at word p).
// It returns Σq.
TEXT ·quantW16AVX512(SB), NOSPLIT, $0-44
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	VBROADCASTSS inv+16(FP), Z1
	MOVL levels+20(FP), AX
	VPBROADCASTD AX, Z2
	VPXORD Z3, Z3, Z3
	VPSUBD Z2, Z3, Z3
	MOVL $0x4B400000, AX
	VPBROADCASTD AX, Z4
	MOVQ xq+24(FP), DI
	MOVQ perm+32(FP), DX
	VMOVDQU64 (DX), Z6
	VPXORD Z5, Z5, Z5
qwLoop:
	VMULPS (SI), Z1, Z7
	VADDPS Z4, Z7, Z7
	VSUBPS Z4, Z7, Z7
	VCVTTPS2DQ Z7, Z7
	VPMAXSD Z3, Z7, Z7
	VPMINSD Z2, Z7, Z7
	VPADDD Z7, Z5, Z5
	VMULPS 64(SI), Z1, Z8
	VADDPS Z4, Z8, Z8
	VSUBPS Z4, Z8, Z8
	VCVTTPS2DQ Z8, Z8
	VPMAXSD Z3, Z8, Z8
	VPMINSD Z2, Z8, Z8
	VPADDD Z8, Z5, Z5
	VPMOVDW Z7, Y7
	VPMOVDW Z8, Y8
	VINSERTI64X4 $1, Y8, Z7, Z7
	VPERMW Z7, Z6, Z7
	VMOVDQU64 Z7, (DI)
	ADDQ $128, SI
	ADDQ $64, DI
	SUBQ $32, CX
	JNZ qwLoop
	VEXTRACTI64X4 $1, Z5, Y0
	VPADDD Y0, Y5, Y5
	VEXTRACTI128 $1, Y5, X0
	VPADDD X0, X5, X5
	VPSHUFD $0x4E, X5, X0
	VPADDD X0, X5, X5
	VPSHUFD $0xB1, X5, X0
	VPADDD X0, X5, X5
	VMOVD X5, AX
	MOVL AX, ret+40(FP)
	VZEROUPPER
	RET
