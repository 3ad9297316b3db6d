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
	MOVL $0x0F, AX
	MOVQ AX, X15
	VPBROADCASTD X15, Y15

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

	// scale and bias are BF16: the upper half of a float32.
	MOVWLZX (DX), AX
	SHLL $16, AX
	MOVQ AX, X7
	VBROADCASTSS X7, Y7
	VFMADD231PS Y1, Y7, Y0

	MOVWLZX (R8), AX
	SHLL $16, AX
	MOVQ AX, X9
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
