#include "textflag.h"

// Attention's four-row loops for arm64 (Advanced SIMD), the twins of
// attention_amd64.s: the same products and sums as dot4NEON and axpyNEON
// (kernels_arm64.s), so a score is scale times dot4's lane and a value sum
// is n axpy calls, bit for bit, as on amd64.

#define FMUL(d, n, m) WORD $(0x6E20DC00 | (m<<16) | (n<<5) | d)   // Vd.4S = Vn.4S · Vm.4S
#define FADD(d, n, m) WORD $(0x4E20D400 | (m<<16) | (n<<5) | d)   // Vd.4S = Vn.4S + Vm.4S
#define FADDP(d, n, m) WORD $(0x6E20D400 | (m<<16) | (n<<5) | d)  // pairwise sums of Vn.4S, then Vm.4S
#define FMLA(d, n, m) WORD $(0x4E20CC00 | (m<<16) | (n<<5) | d)   // Vd.4S += Vn.4S · Vm.4S

#define ZERO4(a, b, c, d) \
	VEOR a.B16, a.B16, a.B16 \
	VEOR b.B16, b.B16, b.B16 \
	VEOR c.B16, c.B16, c.B16 \
	VEOR d.B16, d.B16, d.B16

// MAC16(a, w, x) adds sixteen products of the four registers from w with
// those from x into the four from a (register numbers).
#define MAC16(a, w, x) \
	FMLA(a, w, x) \
	FMLA((a+1), (w+1), (x+1)) \
	FMLA((a+2), (w+2), (x+2)) \
	FMLA((a+3), (w+3), (x+3))

// func attentionScores4NEON(q0, q1, q2, q3, keys *float32, stride, n, dim int, scale float32, out *float32, outStride int)
//
// out[l·outStride + j] = scale·(q_l · keys[j·stride : j·stride+dim]) for
// the four query rows l and n key rows j, dim a multiple of 16: each key
// row is loaded once for the four queries.
TEXT ·attentionScores4NEON(SB), NOSPLIT, $0-88
	MOVD q0+0(FP), R0
	MOVD q1+8(FP), R1
	MOVD q2+16(FP), R2
	MOVD q3+24(FP), R3
	MOVD keys+32(FP), R4
	MOVD stride+40(FP), R5
	LSL $2, R5
	MOVD n+48(FP), R6
	MOVD dim+56(FP), R7
	LSR $4, R7
	MOVWU scale+64(FP), R8
	VDUP R8, V28.S4
	MOVD out+72(FP), R9
	MOVD outStride+80(FP), R10
	LSL $2, R10
	CBZ R6, scoresdone
scoresrow:
	ZERO4(V0, V1, V2, V3)
	ZERO4(V4, V5, V6, V7)
	ZERO4(V8, V9, V10, V11)
	ZERO4(V12, V13, V14, V15)
	MOVD R0, R11
	MOVD R1, R12
	MOVD R2, R13
	MOVD R3, R14
	MOVD R4, R15
	MOVD R7, R19
scoresloop:
	VLD1.P 64(R15), [V16.S4, V17.S4, V18.S4, V19.S4]
	VLD1.P 64(R11), [V20.S4, V21.S4, V22.S4, V23.S4]
	VLD1.P 64(R12), [V24.S4, V25.S4, V26.S4, V27.S4]
	MAC16(0, 20, 16)
	MAC16(4, 24, 16)
	VLD1.P 64(R13), [V20.S4, V21.S4, V22.S4, V23.S4]
	VLD1.P 64(R14), [V24.S4, V25.S4, V26.S4, V27.S4]
	MAC16(8, 20, 16)
	MAC16(12, 24, 16)
	SUBS $1, R19
	BNE scoresloop

	// dot4NEON's sums: each row's two sets lane by lane, then pairs,
	// pairs of pairs and the two halves.
	FADD(0, 0, 2)
	FADD(1, 1, 3)
	FADD(4, 4, 6)
	FADD(5, 5, 7)
	FADD(8, 8, 10)
	FADD(9, 9, 11)
	FADD(12, 12, 14)
	FADD(13, 13, 15)
	FADDP(16, 0, 4)
	FADDP(17, 8, 12)
	FADDP(16, 16, 17)
	FADDP(18, 1, 5)
	FADDP(19, 9, 13)
	FADDP(18, 18, 19)
	FADD(16, 16, 18)
	FMUL(16, 16, 28)

	// The four scores down column j of out.
	FMOVS F16, (R9)
	ADD R10, R9, R20
	VMOV V16.S[1], R21
	MOVW R21, (R20)
	ADD R10, R20
	VMOV V16.S[2], R21
	MOVW R21, (R20)
	ADD R10, R20
	VMOV V16.S[3], R21
	MOVW R21, (R20)
	ADD $4, R9
	ADD R5, R4
	SUBS $1, R6
	BNE scoresrow
scoresdone:
	RET

// func attentionValues4NEON(outs *[4]*float32, e *float32, eStride int, values *float32, stride, n, dim int)
//
// outs[l][d] += Σ_j e[l·eStride + j]·values[j·stride + d] for the four
// rows l, n value rows j in order and d < dim, dim a multiple of 16: each
// value row is loaded once for the four rows, whose sums stay in registers
// sixteen dims at a time, each element with axpyNEON's fused multiply-add.
TEXT ·attentionValues4NEON(SB), NOSPLIT, $0-56
	MOVD outs+0(FP), R0
	MOVD e+8(FP), R1
	MOVD eStride+16(FP), R2
	LSL $2, R2
	MOVD values+24(FP), R3
	MOVD stride+32(FP), R4
	LSL $2, R4
	MOVD n+40(FP), R5
	MOVD dim+48(FP), R6
	LSL $2, R6
	MOVD 0(R0), R7
	MOVD 8(R0), R8
	MOVD 16(R0), R9
	MOVD 24(R0), R10
	MOVD $0, R11
	CBZ R5, valuesdone
valueschunk:
	ADD R11, R7, R12
	ADD R11, R8, R13
	ADD R11, R9, R14
	ADD R11, R10, R15
	VLD1 (R12), [V0.S4, V1.S4, V2.S4, V3.S4]
	VLD1 (R13), [V4.S4, V5.S4, V6.S4, V7.S4]
	VLD1 (R14), [V8.S4, V9.S4, V10.S4, V11.S4]
	VLD1 (R15), [V12.S4, V13.S4, V14.S4, V15.S4]
	ADD R11, R3, R19
	MOVD R1, R20
	MOVD R5, R21
valuesloop:
	VLD1 (R19), [V16.S4, V17.S4, V18.S4, V19.S4]
	ADD R4, R19
	VLD1R (R20), [V20.S4]
	ADD R2, R20, R22
	VLD1R (R22), [V21.S4]
	ADD R2, R22
	VLD1R (R22), [V22.S4]
	ADD R2, R22
	VLD1R (R22), [V23.S4]
	ADD $4, R20
	FMLA(0, 16, 20)
	FMLA(1, 17, 20)
	FMLA(2, 18, 20)
	FMLA(3, 19, 20)
	FMLA(4, 16, 21)
	FMLA(5, 17, 21)
	FMLA(6, 18, 21)
	FMLA(7, 19, 21)
	FMLA(8, 16, 22)
	FMLA(9, 17, 22)
	FMLA(10, 18, 22)
	FMLA(11, 19, 22)
	FMLA(12, 16, 23)
	FMLA(13, 17, 23)
	FMLA(14, 18, 23)
	FMLA(15, 19, 23)
	SUBS $1, R21
	BNE valuesloop
	VST1 [V0.S4, V1.S4, V2.S4, V3.S4], (R12)
	VST1 [V4.S4, V5.S4, V6.S4, V7.S4], (R13)
	VST1 [V8.S4, V9.S4, V10.S4, V11.S4], (R14)
	VST1 [V12.S4, V13.S4, V14.S4, V15.S4], (R15)
	ADD $64, R11
	CMP R6, R11
	BLT valueschunk
valuesdone:
	RET

// func fmaPeakNEON(iters int)
//
// iters rounds of twelve independent 128-bit fused multiply-adds: the
// machine's peak for attention's products (BenchmarkAttentionCore).
TEXT ·fmaPeakNEON(SB), NOSPLIT, $0-8
	MOVD iters+0(FP), R0
	VEOR V0.B16, V0.B16, V0.B16
	VEOR V1.B16, V1.B16, V1.B16
	VEOR V2.B16, V2.B16, V2.B16
	VEOR V3.B16, V3.B16, V3.B16
	VEOR V4.B16, V4.B16, V4.B16
	VEOR V5.B16, V5.B16, V5.B16
	VEOR V6.B16, V6.B16, V6.B16
	VEOR V7.B16, V7.B16, V7.B16
	VEOR V8.B16, V8.B16, V8.B16
	VEOR V9.B16, V9.B16, V9.B16
	VEOR V10.B16, V10.B16, V10.B16
	VEOR V11.B16, V11.B16, V11.B16
	VEOR V16.B16, V16.B16, V16.B16
	VEOR V20.B16, V20.B16, V20.B16
	CBZ R0, peakdone
peakloop:
	FMLA(0, 16, 20)
	FMLA(1, 16, 20)
	FMLA(2, 16, 20)
	FMLA(3, 16, 20)
	FMLA(4, 16, 20)
	FMLA(5, 16, 20)
	FMLA(6, 16, 20)
	FMLA(7, 16, 20)
	FMLA(8, 16, 20)
	FMLA(9, 16, 20)
	FMLA(10, 16, 20)
	FMLA(11, 16, 20)
	SUBS $1, R0
	BNE peakloop
peakdone:
	RET
