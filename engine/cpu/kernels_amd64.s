#include "textflag.h"

// func q4RowAVX2(words *uint32, xd *float32, scales, biases *uint16, xsum *float32, groups int) float32
//
// One output row of a 4-bit affine matrix with 64-wide groups:
// Σ_g scale_g·Σ_j q_j·x_j + bias_g·xsum_g. xd holds x reordered per group as
// [x0 x2 … x62 | x1 x3 … x63], so that the low nibbles of 8 consecutive
// bytes (elements 0, 2, …, 14 of the group) meet 8 consecutive floats, and
// the high nibbles the 8 floats 128 bytes further on.
TEXT ·q4RowAVX2(SB), NOSPLIT, $0-52
	MOVQ words+0(FP), SI
	MOVQ xd+8(FP), DI
	MOVQ scales+16(FP), DX
	MOVQ biases+24(FP), R8
	MOVQ xsum+32(FP), R9
	MOVQ groups+40(FP), CX
	VXORPS Y0, Y0, Y0 // Σ scale·(Σq·x), 8 lanes
	VXORPS X8, X8, X8 // Σ bias·xsum
	VPCMPEQD Y15, Y15, Y15
	VPSRLD $28, Y15, Y15 // 0x0F in every lane

	TESTQ CX, CX
	JZ done

loop:
	VPMOVZXBD 0(SI), Y3
	VPSRLD $4, Y3, Y4
	VPAND Y15, Y3, Y3
	VCVTDQ2PS Y3, Y3
	VCVTDQ2PS Y4, Y4
	VMULPS 0(DI), Y3, Y1
	VMULPS 128(DI), Y4, Y2

	VPMOVZXBD 8(SI), Y5
	VPSRLD $4, Y5, Y6
	VPAND Y15, Y5, Y5
	VCVTDQ2PS Y5, Y5
	VCVTDQ2PS Y6, Y6
	VFMADD231PS 32(DI), Y5, Y1
	VFMADD231PS 160(DI), Y6, Y2

	VPMOVZXBD 16(SI), Y3
	VPSRLD $4, Y3, Y4
	VPAND Y15, Y3, Y3
	VCVTDQ2PS Y3, Y3
	VCVTDQ2PS Y4, Y4
	VFMADD231PS 64(DI), Y3, Y1
	VFMADD231PS 192(DI), Y4, Y2

	VPMOVZXBD 24(SI), Y5
	VPSRLD $4, Y5, Y6
	VPAND Y15, Y5, Y5
	VCVTDQ2PS Y5, Y5
	VCVTDQ2PS Y6, Y6
	VFMADD231PS 96(DI), Y5, Y1
	VFMADD231PS 224(DI), Y6, Y2

	VADDPS Y2, Y1, Y1

	// scale and bias are BF16, the upper half of a float32: broadcast
	// the 16 bits to every half-lane and shift them up. (Everything here is
	// VEX-encoded: a legacy SSE move into an XMM register with the upper
	// YMM halves dirty costs a state transition on Intel cores, measured
	// at 100x slower on a Xeon.)
	VPBROADCASTW (DX), Y7
	VPSLLD $16, Y7, Y7
	VFMADD231PS Y1, Y7, Y0

	VPBROADCASTW (R8), X9
	VPSLLD $16, X9, X9
	VFMADD231SS (R9), X9, X8

	ADDQ $32, SI
	ADDQ $256, DI
	ADDQ $2, DX
	ADDQ $2, R8
	ADDQ $4, R9
	DECQ CX
	JNZ loop

done:
	VEXTRACTF128 $1, Y0, X1
	VADDPS X1, X0, X0
	VHADDPS X0, X0, X0
	VHADDPS X0, X0, X0
	VADDSS X8, X0, X0
	VZEROUPPER
	MOVSS X0, ret+48(FP)
	RET

// func dot4AVX2(w0, w1, w2, w3, x *float32, n int, out *[4]float32)
//
// Four dot products of the rows w0..w3 with x over n elements, n a multiple
// of 16: each load of x serves four rows. Two sets of accumulators hide the
// FMA latency.
TEXT ·dot4AVX2(SB), NOSPLIT, $0-56
	MOVQ w0+0(FP), R8
	MOVQ w1+8(FP), R9
	MOVQ w2+16(FP), R10
	MOVQ w3+24(FP), R11
	MOVQ x+32(FP), SI
	MOVQ n+40(FP), CX
	MOVQ out+48(FP), DI
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	XORQ AX, AX
	SHRQ $4, CX
	JZ reduce

loop4:
	VMOVUPS 0(SI)(AX*4), Y8
	VMOVUPS 32(SI)(AX*4), Y9
	VFMADD231PS 0(R8)(AX*4), Y8, Y0
	VFMADD231PS 0(R9)(AX*4), Y8, Y1
	VFMADD231PS 0(R10)(AX*4), Y8, Y2
	VFMADD231PS 0(R11)(AX*4), Y8, Y3
	VFMADD231PS 32(R8)(AX*4), Y9, Y4
	VFMADD231PS 32(R9)(AX*4), Y9, Y5
	VFMADD231PS 32(R10)(AX*4), Y9, Y6
	VFMADD231PS 32(R11)(AX*4), Y9, Y7
	ADDQ $16, AX
	DECQ CX
	JNZ loop4

reduce:
	VADDPS Y4, Y0, Y0
	VADDPS Y5, Y1, Y1
	VADDPS Y6, Y2, Y2
	VADDPS Y7, Y3, Y3
	// Horizontal sums of Y0..Y3 into one xmm [s0 s1 s2 s3].
	VHADDPS Y1, Y0, Y0 // [a01 a23 b01 b23 | a45 a67 b45 b67] per lane
	VHADDPS Y3, Y2, Y2
	VHADDPS Y2, Y0, Y0 // [a b c d | a' b' c' d']
	VEXTRACTF128 $1, Y0, X1
	VADDPS X1, X0, X0
	VMOVUPS X0, (DI)
	VZEROUPPER
	RET

// func dotAVX2(a, b *float32, n int) float32
//
// Σ a[i]·b[i] over n elements, n a multiple of 16.
TEXT ·dotAVX2(SB), NOSPLIT, $0-28
	MOVQ a+0(FP), SI
	MOVQ b+8(FP), DI
	MOVQ n+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	XORQ AX, AX
	SHRQ $4, CX
	JZ dotdone

dotloop:
	VMOVUPS 0(SI)(AX*4), Y2
	VMOVUPS 32(SI)(AX*4), Y3
	VFMADD231PS 0(DI)(AX*4), Y2, Y0
	VFMADD231PS 32(DI)(AX*4), Y3, Y1
	ADDQ $16, AX
	DECQ CX
	JNZ dotloop

dotdone:
	VADDPS Y1, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS X1, X0, X0
	VHADDPS X0, X0, X0
	VHADDPS X0, X0, X0
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// func q4DequantAVX2(words *uint32, scales, biases *uint16, groups int, dst *float32)
//
// Dequantizes one row of a 4-bit affine matrix with 64-wide groups into dst
// in the order deinterleave64 gives x: per group the even elements, then
// the odd ones. A dot product of two rows in that same order is unchanged.
TEXT ·q4DequantAVX2(SB), NOSPLIT, $0-40
	MOVQ words+0(FP), SI
	MOVQ scales+8(FP), DX
	MOVQ biases+16(FP), R8
	MOVQ groups+24(FP), CX
	MOVQ dst+32(FP), DI
	VPCMPEQD Y15, Y15, Y15
	VPSRLD $28, Y15, Y15 // 0x0F in every lane
	TESTQ CX, CX
	JZ dqdone

dqloop:
	VPBROADCASTW (DX), Y13
	VPSLLD $16, Y13, Y13 // scale
	VPBROADCASTW (R8), Y14
	VPSLLD $16, Y14, Y14 // bias

	VPMOVZXBD 0(SI), Y0
	VPMOVZXBD 8(SI), Y2
	VPMOVZXBD 16(SI), Y4
	VPMOVZXBD 24(SI), Y6
	VPSRLD $4, Y0, Y1
	VPSRLD $4, Y2, Y3
	VPSRLD $4, Y4, Y5
	VPSRLD $4, Y6, Y7
	VPAND Y15, Y0, Y0
	VPAND Y15, Y2, Y2
	VPAND Y15, Y4, Y4
	VPAND Y15, Y6, Y6
	VCVTDQ2PS Y0, Y0
	VCVTDQ2PS Y1, Y1
	VCVTDQ2PS Y2, Y2
	VCVTDQ2PS Y3, Y3
	VCVTDQ2PS Y4, Y4
	VCVTDQ2PS Y5, Y5
	VCVTDQ2PS Y6, Y6
	VCVTDQ2PS Y7, Y7
	VFMADD213PS Y14, Y13, Y0 // Y0 = Y13·Y0 + Y14
	VFMADD213PS Y14, Y13, Y1
	VFMADD213PS Y14, Y13, Y2
	VFMADD213PS Y14, Y13, Y3
	VFMADD213PS Y14, Y13, Y4
	VFMADD213PS Y14, Y13, Y5
	VFMADD213PS Y14, Y13, Y6
	VFMADD213PS Y14, Y13, Y7
	VMOVUPS Y0, 0(DI)
	VMOVUPS Y2, 32(DI)
	VMOVUPS Y4, 64(DI)
	VMOVUPS Y6, 96(DI)
	VMOVUPS Y1, 128(DI)
	VMOVUPS Y3, 160(DI)
	VMOVUPS Y5, 192(DI)
	VMOVUPS Y7, 224(DI)

	ADDQ $32, SI
	ADDQ $256, DI
	ADDQ $2, DX
	ADDQ $2, R8
	DECQ CX
	JNZ dqloop

dqdone:
	VZEROUPPER
	RET

// func dot4x2AVX2(w0, w1, w2, w3, x0, x1 *float32, n int, out *[8]float32)
//
// Eight dot products: rows w0..w3 with x0 (out[0:4]) and with x1
// (out[4:8]), n a multiple of 8. Each weight load serves two token rows and
// each x load four weight rows.
TEXT ·dot4x2AVX2(SB), NOSPLIT, $0-64
	MOVQ w0+0(FP), R8
	MOVQ w1+8(FP), R9
	MOVQ w2+16(FP), R10
	MOVQ w3+24(FP), R11
	MOVQ x0+32(FP), SI
	MOVQ x1+40(FP), BX
	MOVQ n+48(FP), CX
	MOVQ out+56(FP), DI
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	XORQ AX, AX
	SHRQ $3, CX
	JZ d42reduce

d42loop:
	VMOVUPS 0(SI)(AX*4), Y8
	VMOVUPS 0(BX)(AX*4), Y9
	VMOVUPS 0(R8)(AX*4), Y10
	VMOVUPS 0(R9)(AX*4), Y11
	VMOVUPS 0(R10)(AX*4), Y12
	VMOVUPS 0(R11)(AX*4), Y13
	VFMADD231PS Y10, Y8, Y0
	VFMADD231PS Y11, Y8, Y1
	VFMADD231PS Y12, Y8, Y2
	VFMADD231PS Y13, Y8, Y3
	VFMADD231PS Y10, Y9, Y4
	VFMADD231PS Y11, Y9, Y5
	VFMADD231PS Y12, Y9, Y6
	VFMADD231PS Y13, Y9, Y7
	ADDQ $8, AX
	DECQ CX
	JNZ d42loop

d42reduce:
	VHADDPS Y1, Y0, Y0
	VHADDPS Y3, Y2, Y2
	VHADDPS Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS X1, X0, X0
	VMOVUPS X0, (DI)
	VHADDPS Y5, Y4, Y4
	VHADDPS Y7, Y6, Y6
	VHADDPS Y6, Y4, Y4
	VEXTRACTF128 $1, Y4, X5
	VADDPS X5, X4, X4
	VMOVUPS X4, 16(DI)
	VZEROUPPER
	RET

// func deltaStepAVX2(s, k, q, v, o *float32, dk, dv int, decay, beta float32)
//
// One token of the Gated DeltaNet scan for one value head, with the state
// stored transposed (s is [dv, dk]: row d holds column d of S). For each d:
//   row *= decay;  delta = beta·(v[d] − row·k);  row += delta·k;  o[d] = row·q
// dk is a multiple of 8.
TEXT ·deltaStepAVX2(SB), NOSPLIT, $0-64
	MOVQ s+0(FP), DI
	MOVQ k+8(FP), R8
	MOVQ q+16(FP), R9
	MOVQ v+24(FP), R10
	MOVQ o+32(FP), R11
	MOVQ dk+40(FP), R12
	MOVQ dv+48(FP), R13
	VBROADCASTSS decay+56(FP), Y15
	VMOVSS beta+60(FP), X14
	MOVQ R12, R14
	SHLQ $2, R14 // row stride in bytes
	TESTQ R13, R13
	JZ dsdone

dsrow:
	VXORPS Y0, Y0, Y0
	XORQ AX, AX
dspass1:
	VMULPS (DI)(AX*4), Y15, Y2
	VMOVUPS Y2, (DI)(AX*4)
	VFMADD231PS (R8)(AX*4), Y2, Y0
	ADDQ $8, AX
	CMPQ AX, R12
	JLT dspass1

	VEXTRACTF128 $1, Y0, X1
	VADDPS X1, X0, X0
	VHADDPS X0, X0, X0
	VHADDPS X0, X0, X0
	VMOVSS (R10), X3
	VSUBSS X0, X3, X3
	VMULSS X14, X3, X3
	VBROADCASTSS X3, Y3 // delta

	VXORPS Y4, Y4, Y4
	XORQ AX, AX
dspass2:
	VMOVUPS (DI)(AX*4), Y2
	VFMADD231PS (R8)(AX*4), Y3, Y2
	VMOVUPS Y2, (DI)(AX*4)
	VFMADD231PS (R9)(AX*4), Y2, Y4
	ADDQ $8, AX
	CMPQ AX, R12
	JLT dspass2

	VEXTRACTF128 $1, Y4, X5
	VADDPS X5, X4, X4
	VHADDPS X4, X4, X4
	VHADDPS X4, X4, X4
	VMOVSS X4, (R11)

	ADDQ R14, DI
	ADDQ $4, R10
	ADDQ $4, R11
	DECQ R13
	JNZ dsrow

dsdone:
	VZEROUPPER
	RET

// func axpyAVX2(y, x *float32, n int, a float32)
//
// y[i] += a·x[i] over n elements, n a multiple of 8.
TEXT ·axpyAVX2(SB), NOSPLIT, $0-28
	MOVQ y+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX
	VBROADCASTSS a+24(FP), Y15
	XORQ AX, AX
	SHRQ $3, CX
	JZ axdone

axloop:
	VMOVUPS (DI)(AX*4), Y0
	VFMADD231PS (SI)(AX*4), Y15, Y0
	VMOVUPS Y0, (DI)(AX*4)
	ADDQ $8, AX
	DECQ CX
	JNZ axloop

axdone:
	VZEROUPPER
	RET

// func gemm6x16AVX2(w *float32, ldw int, xp *float32, k int, out *[96]float32)
//
// The prefill micro-kernel: six weight rows (w, w+ldw, …, each k floats)
// times sixteen token rows packed k-major (xp[i*16+t] is token t's element
// i), as outer products: for each i, two loads of the sixteen tokens'
// x[i] and one broadcast per weight row feed twelve FMAs, with the 6×16
// results in registers throughout. out[r*16+t] += Σ_i w[r][i]·x[t][i]:
// the caller splits k into blocks that stay in L1 and accumulates.
TEXT ·gemm6x16AVX2(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), R8
	MOVQ ldw+8(FP), DX
	SHLQ $2, DX
	LEAQ (R8)(DX*1), R9
	LEAQ (R9)(DX*1), R10
	LEAQ (R10)(DX*1), R11
	LEAQ (R11)(DX*1), R12
	LEAQ (R12)(DX*1), R13
	MOVQ xp+16(FP), SI
	MOVQ k+24(FP), CX
	MOVQ out+32(FP), DI
	VMOVUPS 0(DI), Y0
	VMOVUPS 32(DI), Y1
	VMOVUPS 64(DI), Y2
	VMOVUPS 96(DI), Y3
	VMOVUPS 128(DI), Y4
	VMOVUPS 160(DI), Y5
	VMOVUPS 192(DI), Y6
	VMOVUPS 224(DI), Y7
	VMOVUPS 256(DI), Y8
	VMOVUPS 288(DI), Y9
	VMOVUPS 320(DI), Y10
	VMOVUPS 352(DI), Y11
	XORQ AX, AX
	TESTQ CX, CX
	JZ g6store

g6loop:
	VMOVUPS 0(SI), Y12
	VMOVUPS 32(SI), Y13
	VBROADCASTSS (R8)(AX*4), Y14
	VBROADCASTSS (R9)(AX*4), Y15
	VFMADD231PS Y12, Y14, Y0
	VFMADD231PS Y13, Y14, Y1
	VFMADD231PS Y12, Y15, Y2
	VFMADD231PS Y13, Y15, Y3
	VBROADCASTSS (R10)(AX*4), Y14
	VBROADCASTSS (R11)(AX*4), Y15
	VFMADD231PS Y12, Y14, Y4
	VFMADD231PS Y13, Y14, Y5
	VFMADD231PS Y12, Y15, Y6
	VFMADD231PS Y13, Y15, Y7
	VBROADCASTSS (R12)(AX*4), Y14
	VBROADCASTSS (R13)(AX*4), Y15
	VFMADD231PS Y12, Y14, Y8
	VFMADD231PS Y13, Y14, Y9
	VFMADD231PS Y12, Y15, Y10
	VFMADD231PS Y13, Y15, Y11
	ADDQ $64, SI
	INCQ AX
	CMPQ AX, CX
	JLT g6loop

g6store:
	VMOVUPS Y0, 0(DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	VMOVUPS Y4, 128(DI)
	VMOVUPS Y5, 160(DI)
	VMOVUPS Y6, 192(DI)
	VMOVUPS Y7, 224(DI)
	VMOVUPS Y8, 256(DI)
	VMOVUPS Y9, 288(DI)
	VMOVUPS Y10, 320(DI)
	VMOVUPS Y11, 352(DI)
	VZEROUPPER
	RET

// func dotBF16AVX2(w *uint16, x *float32, n int) float32
//
// Σ bf16(w[i])·x[i] over n elements, n a multiple of 16: a BF16 value is
// the upper half of a float32, so widening to 32 bits and shifting left by
// 16 converts it exactly.
TEXT ·dotBF16AVX2(SB), NOSPLIT, $0-28
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ n+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	XORQ AX, AX
	SHRQ $4, CX
	JZ bfdone

bfloop:
	VPMOVZXWD (SI)(AX*2), Y2
	VPMOVZXWD 16(SI)(AX*2), Y3
	VPSLLD $16, Y2, Y2
	VPSLLD $16, Y3, Y3
	VFMADD231PS (DI)(AX*4), Y2, Y0
	VFMADD231PS 32(DI)(AX*4), Y3, Y1
	ADDQ $16, AX
	DECQ CX
	JNZ bfloop

bfdone:
	VADDPS Y1, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS X1, X0, X0
	VHADDPS X0, X0, X0
	VHADDPS X0, X0, X0
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET
