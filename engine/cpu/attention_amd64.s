#include "textflag.h"

// func attentionScores4AVX2(q0, q1, q2, q3, keys *float32, stride, n, dim int, scale float32, out *float32, outStride int)
//
// out[l·outStride + j] = scale·(q_l · keys[j·stride : j·stride+dim]) for
// the four query rows l and n key rows j, dim a multiple of 16: each key
// row is loaded once for the four queries. The products and their sum run
// exactly as in dot4AVX2, so a score equals scale·dot4's lane.
TEXT ·attentionScores4AVX2(SB), NOSPLIT, $0-88
	MOVQ q0+0(FP), R8
	MOVQ q1+8(FP), R9
	MOVQ q2+16(FP), R10
	MOVQ q3+24(FP), R11
	MOVQ keys+32(FP), SI
	MOVQ stride+40(FP), R12
	SHLQ $2, R12
	MOVQ n+48(FP), R13
	MOVQ dim+56(FP), BX
	SHRQ $4, BX
	VBROADCASTSS scale+64(FP), X10
	MOVQ out+72(FP), DI
	MOVQ outStride+80(FP), DX
	SHLQ $2, DX
	TESTQ R13, R13
	JZ scoresdone

scoresrow:
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	XORQ AX, AX
	MOVQ BX, CX

scoresloop:
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
	JNZ scoresloop

	VADDPS Y4, Y0, Y0
	VADDPS Y5, Y1, Y1
	VADDPS Y6, Y2, Y2
	VADDPS Y7, Y3, Y3
	VHADDPS Y1, Y0, Y0
	VHADDPS Y3, Y2, Y2
	VHADDPS Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS X1, X0, X0
	VMULPS X10, X0, X0

	// Scatter the four scores down the column j of out.
	VMOVSS X0, (DI)
	MOVQ DI, CX
	ADDQ DX, CX
	VEXTRACTPS $1, X0, (CX)
	ADDQ DX, CX
	VEXTRACTPS $2, X0, (CX)
	ADDQ DX, CX
	VEXTRACTPS $3, X0, (CX)
	ADDQ $4, DI
	ADDQ R12, SI
	DECQ R13
	JNZ scoresrow

scoresdone:
	VZEROUPPER
	RET

// func attentionValues4AVX2(outs *[4]*float32, e *float32, eStride int, values *float32, stride, n, dim int)
//
// outs[l][d] += Σ_j e[l·eStride + j]·values[j·stride + d] for the four
// rows l, n value rows j in order and d < dim, dim a multiple of 16: each
// value row is loaded once for the four rows, whose sums stay in registers
// sixteen dims at a time. Each element gets the fused multiply-adds of
// axpyAVX2 in the same order, so the result equals n axpy calls.
TEXT ·attentionValues4AVX2(SB), NOSPLIT, $0-56
	MOVQ outs+0(FP), R8
	MOVQ e+8(FP), R9
	MOVQ eStride+16(FP), R10
	SHLQ $2, R10
	LEAQ (R10)(R10*2), R11
	MOVQ values+24(FP), SI
	MOVQ stride+32(FP), R12
	SHLQ $2, R12
	MOVQ n+40(FP), R13
	MOVQ dim+48(FP), DX
	SHLQ $2, DX
	XORQ CX, CX
	TESTQ R13, R13
	JZ valuesdone

valueschunk:
	MOVQ 0(R8), BX
	VMOVUPS 0(BX)(CX*1), Y0
	VMOVUPS 32(BX)(CX*1), Y1
	MOVQ 8(R8), BX
	VMOVUPS 0(BX)(CX*1), Y2
	VMOVUPS 32(BX)(CX*1), Y3
	MOVQ 16(R8), BX
	VMOVUPS 0(BX)(CX*1), Y4
	VMOVUPS 32(BX)(CX*1), Y5
	MOVQ 24(R8), BX
	VMOVUPS 0(BX)(CX*1), Y6
	VMOVUPS 32(BX)(CX*1), Y7
	MOVQ SI, DI
	ADDQ CX, DI
	XORQ AX, AX

valuesloop:
	VMOVUPS 0(DI), Y8
	VMOVUPS 32(DI), Y9
	VBROADCASTSS (R9)(AX*4), Y10
	VFMADD231PS Y8, Y10, Y0
	VFMADD231PS Y9, Y10, Y1
	LEAQ (R9)(R10*1), BX
	VBROADCASTSS (BX)(AX*4), Y11
	VFMADD231PS Y8, Y11, Y2
	VFMADD231PS Y9, Y11, Y3
	LEAQ (R9)(R10*2), BX
	VBROADCASTSS (BX)(AX*4), Y12
	VFMADD231PS Y8, Y12, Y4
	VFMADD231PS Y9, Y12, Y5
	LEAQ (R9)(R11*1), BX
	VBROADCASTSS (BX)(AX*4), Y13
	VFMADD231PS Y8, Y13, Y6
	VFMADD231PS Y9, Y13, Y7
	ADDQ R12, DI
	INCQ AX
	CMPQ AX, R13
	JLT valuesloop

	MOVQ 0(R8), BX
	VMOVUPS Y0, 0(BX)(CX*1)
	VMOVUPS Y1, 32(BX)(CX*1)
	MOVQ 8(R8), BX
	VMOVUPS Y2, 0(BX)(CX*1)
	VMOVUPS Y3, 32(BX)(CX*1)
	MOVQ 16(R8), BX
	VMOVUPS Y4, 0(BX)(CX*1)
	VMOVUPS Y5, 32(BX)(CX*1)
	MOVQ 24(R8), BX
	VMOVUPS Y6, 0(BX)(CX*1)
	VMOVUPS Y7, 32(BX)(CX*1)
	ADDQ $64, CX
	CMPQ CX, DX
	JLT valueschunk

valuesdone:
	VZEROUPPER
	RET

// func fmaPeakAVX2(iters int)
//
// iters rounds of twelve independent 256-bit fused multiply-adds: the
// machine's peak for attention's products (BenchmarkAttentionCore).
TEXT ·fmaPeakAVX2(SB), NOSPLIT, $0-8
	MOVQ iters+0(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
	VXORPS Y12, Y12, Y12
	VXORPS Y13, Y13, Y13
	TESTQ CX, CX
	JZ peakdone

peakloop:
	VFMADD231PS Y12, Y13, Y0
	VFMADD231PS Y12, Y13, Y1
	VFMADD231PS Y12, Y13, Y2
	VFMADD231PS Y12, Y13, Y3
	VFMADD231PS Y12, Y13, Y4
	VFMADD231PS Y12, Y13, Y5
	VFMADD231PS Y12, Y13, Y6
	VFMADD231PS Y12, Y13, Y7
	VFMADD231PS Y12, Y13, Y8
	VFMADD231PS Y12, Y13, Y9
	VFMADD231PS Y12, Y13, Y10
	VFMADD231PS Y12, Y13, Y11
	DECQ CX
	JNZ peakloop

peakdone:
	VZEROUPPER
	RET
