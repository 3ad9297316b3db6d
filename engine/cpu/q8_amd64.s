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
// the float in every lane. acc = fma(float(isum), s·d, acc), then
// acc = fma(b, Σx lanes, acc), the Σx lanes being zero but the first.
#define UNIT_UNIFORM \
	VCVTDQ2PS Y1, Y1 \
	VPBROADCASTW (DX), Y4 \
	VPSLLD $16, Y4, Y4 \
	VMULPS (R12), Y4, Y4 \
	VFMADD231PS Y4, Y1, Y0 \
	VPBROADCASTW (R8), Y5 \
	VPSLLD $16, Y5, Y5 \
	VFMADD231PS 32(R12), Y5, Y0 \
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
	VFMADD231PS Y4, Y1, Y0 \
	VPBROADCASTD (R8), Y5 \
	VPSLLD $16, Y5, Y6 \
	VPAND Y14, Y5, Y5 \
	VPBLENDD pattern, Y5, Y6, Y5 \
	VFMADD231PS 32(R12), Y5, Y0 \
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
	VPDPBUSD 32(R12), Y3, Y1 \
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
	MOVQ T_CHUNKS(AX), BX
q4vChunk:
	Q4_CHUNK_VNNI
	DECQ BX
	JNZ q4vChunk
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
	Q4_CHUNK_VNNI
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
#define W4_HALF_VNNI(woff, xeven, xodd, acc) \
	VPMOVZXBW woff(SI), Y2 \
	VPSRLW $4, Y2, Y3 \
	VPAND Y12, Y2, Y2 \
	VPDPWSSD xeven(R12), Y2, acc \
	VPDPWSSD xodd(R12), Y3, acc

#define W4_HALF_AVX2(woff, xeven, xodd, acc) \
	VPMOVZXBW woff(SI), Y2 \
	VPSRLW $4, Y2, Y3 \
	VPAND Y12, Y2, Y2 \
	VPMADDWD xeven(R12), Y2, Y2 \
	VPMADDWD xodd(R12), Y3, Y3 \
	VPADDD Y2, acc, acc \
	VPADDD Y3, acc, acc

#define W8_HALF_VNNI(woff, xoff) \
	VPMOVZXBW woff(SI), Y2 \
	VPDPWSSD xoff(R12), Y2, Y1

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
	MOVQ T_CHUNKS(AX), BX
w4vChunk:
	W4_HALF_VNNI(0, 0, 32, Y1)
	W4_HALF_VNNI(16, 64, 96, Y1)
	ADDQ $32, SI
	ADDQ $128, R12
	DECQ BX
	JNZ w4vChunk
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
	W4_HALF_VNNI(0, 0, 32, Y1)
	W4_HALF_VNNI(16, 64, 96, Y7)
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
	MOVQ T_CHUNKS(AX), BX
w8vChunk:
	W8_HALF_VNNI(0, 0)
	W8_HALF_VNNI(16, 32)
	ADDQ $32, SI
	ADDQ $64, R12
	DECQ BX
	JNZ w8vChunk
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
