#include "textflag.h"

// The f32 kernels of the attention and DeltaNet helpers for arm64
// (Advanced SIMD). Each keeps the eight float lanes of its amd64 AVX2 twin
// (kernels_amd64.s) in two 4-lane registers, with the same fused
// multiply-adds and the same horizontal sums, so it gives the same bits:
// a sequence's attention and DeltaNet outputs do not depend on the
// machine's architecture. Go's assembler has no mnemonic for the vector
// float instructions, so they are encoded by hand (checked against GNU as).

#define FMUL(d, n, m) WORD $(0x6E20DC00 | (m<<16) | (n<<5) | d)   // Vd.4S = Vn.4S · Vm.4S
#define FADD(d, n, m) WORD $(0x4E20D400 | (m<<16) | (n<<5) | d)   // Vd.4S = Vn.4S + Vm.4S
#define FADDP(d, n, m) WORD $(0x6E20D400 | (m<<16) | (n<<5) | d)  // pairwise sums of Vn.4S, then Vm.4S
#define FMLA(d, n, m) WORD $(0x4E20CC00 | (m<<16) | (n<<5) | d)   // Vd.4S += Vn.4S · Vm.4S

// HSUM8 sums the eight lanes lo (0–3) and hi (4–7) into lane 0 of lo as
// AVX2's vextractf128, vaddps, vhaddps, vhaddps do: lane i plus lane i+4,
// then two pairwise adds.
#define HSUM8(lo, hi) \
	FADD(lo, lo, hi) \
	FADDP(lo, lo, lo) \
	FADDP(lo, lo, lo)

// func dotNEON(a, b *float32, n int) float32
//
// Σ a[i]·b[i] over n elements, n a multiple of 16: two sets of eight
// lanes (elements 0–7 and 8–15 of every sixteen), added lane by lane at
// the end.
TEXT ·dotNEON(SB), NOSPLIT, $0-28
	MOVD a+0(FP), R0
	MOVD b+8(FP), R1
	MOVD n+16(FP), R2
	VEOR V0.B16, V0.B16, V0.B16
	VEOR V1.B16, V1.B16, V1.B16
	VEOR V2.B16, V2.B16, V2.B16
	VEOR V3.B16, V3.B16, V3.B16
	LSR $4, R2
	CBZ R2, dotdone
dotloop:
	VLD1.P 64(R0), [V4.S4, V5.S4, V6.S4, V7.S4]
	VLD1.P 64(R1), [V16.S4, V17.S4, V18.S4, V19.S4]
	FMLA(0, 4, 16)
	FMLA(1, 5, 17)
	FMLA(2, 6, 18)
	FMLA(3, 7, 19)
	SUBS $1, R2
	BNE dotloop
dotdone:
	FADD(0, 0, 2)
	FADD(1, 1, 3)
	HSUM8(0, 1)
	FMOVS F0, ret+24(FP)
	RET

// func dot4NEON(w0, w1, w2, w3, x *float32, n int, out *[4]float32)
//
// Four dot products of the rows w0..w3 with x over n elements, n a
// multiple of 16. Row r sums into V(4r), V(4r+1) (elements 0–7 of every
// sixteen) and V(4r+2), V(4r+3) (8–15); the sets are added lane by lane,
// then each row's eight lanes are summed as vhaddps does in dot4AVX2:
// pairs, pairs of pairs, then the two halves.
TEXT ·dot4NEON(SB), NOSPLIT, $0-56
	MOVD w0+0(FP), R0
	MOVD w1+8(FP), R1
	MOVD w2+16(FP), R2
	MOVD w3+24(FP), R3
	MOVD x+32(FP), R4
	MOVD n+40(FP), R5
	MOVD out+48(FP), R6
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
	VEOR V12.B16, V12.B16, V12.B16
	VEOR V13.B16, V13.B16, V13.B16
	VEOR V14.B16, V14.B16, V14.B16
	VEOR V15.B16, V15.B16, V15.B16
	LSR $4, R5
	CBZ R5, dot4reduce
dot4loop:
	VLD1.P 64(R4), [V16.S4, V17.S4, V18.S4, V19.S4]
	VLD1.P 64(R0), [V20.S4, V21.S4, V22.S4, V23.S4]
	VLD1.P 64(R1), [V24.S4, V25.S4, V26.S4, V27.S4]
	FMLA(0, 20, 16)
	FMLA(1, 21, 17)
	FMLA(2, 22, 18)
	FMLA(3, 23, 19)
	FMLA(4, 24, 16)
	FMLA(5, 25, 17)
	FMLA(6, 26, 18)
	FMLA(7, 27, 19)
	VLD1.P 64(R2), [V20.S4, V21.S4, V22.S4, V23.S4]
	VLD1.P 64(R3), [V24.S4, V25.S4, V26.S4, V27.S4]
	FMLA(8, 20, 16)
	FMLA(9, 21, 17)
	FMLA(10, 22, 18)
	FMLA(11, 23, 19)
	FMLA(12, 24, 16)
	FMLA(13, 25, 17)
	FMLA(14, 26, 18)
	FMLA(15, 27, 19)
	SUBS $1, R5
	BNE dot4loop
dot4reduce:
	// Row r's lanes 0–3 into V(4r), 4–7 into V(4r+1).
	FADD(0, 0, 2)
	FADD(1, 1, 3)
	FADD(4, 4, 6)
	FADD(5, 5, 7)
	FADD(8, 8, 10)
	FADD(9, 9, 11)
	FADD(12, 12, 14)
	FADD(13, 13, 15)
	// Lanes 0–3 of the four rows: [Σ row 0, Σ row 1, Σ row 2, Σ row 3].
	FADDP(16, 0, 4)
	FADDP(17, 8, 12)
	FADDP(16, 16, 17)
	// Lanes 4–7 the same, then the halves added.
	FADDP(18, 1, 5)
	FADDP(19, 9, 13)
	FADDP(18, 18, 19)
	FADD(16, 16, 18)
	VST1 [V16.S4], (R6)
	RET

// func deltaStepNEON(s, k, q, v, o *float32, dk, dv int, decay, beta float32)
//
// One token of the Gated DeltaNet scan for one value head, with the state
// stored transposed (s is [dv, dk]: row d holds column d of S). For each d:
//   row *= decay;  delta = beta·(v[d] − row·k);  row += delta·k;  o[d] = row·q
// dk is a multiple of 8.
TEXT ·deltaStepNEON(SB), NOSPLIT, $0-64
	MOVD s+0(FP), R0
	MOVD k+8(FP), R1
	MOVD q+16(FP), R2
	MOVD v+24(FP), R3
	MOVD o+32(FP), R4
	MOVD dk+40(FP), R5
	MOVD dv+48(FP), R6
	MOVWU decay+56(FP), R7
	VDUP R7, V15.S4
	FMOVS beta+60(FP), F14
	CBZ R6, dsdone
dsrow:
	VEOR V0.B16, V0.B16, V0.B16
	VEOR V1.B16, V1.B16, V1.B16
	MOVD R0, R8
	MOVD R1, R9
	MOVD R5, R10
dspass1:
	VLD1 (R8), [V2.S4, V3.S4]
	FMUL(2, 15, 2)
	FMUL(3, 15, 3)
	VST1.P [V2.S4, V3.S4], 32(R8)
	VLD1.P 32(R9), [V4.S4, V5.S4]
	FMLA(0, 2, 4)
	FMLA(1, 3, 5)
	SUBS $8, R10
	BNE dspass1
	HSUM8(0, 1)
	FMOVS (R3), F3
	FSUBS F0, F3, F3
	FMULS F14, F3, F3
	FMOVS F3, R11
	VDUP R11, V13.S4 // delta

	VEOR V6.B16, V6.B16, V6.B16
	VEOR V7.B16, V7.B16, V7.B16
	MOVD R0, R8
	MOVD R1, R9
	MOVD R2, R12
	MOVD R5, R10
dspass2:
	VLD1 (R8), [V2.S4, V3.S4]
	VLD1.P 32(R9), [V4.S4, V5.S4]
	FMLA(2, 13, 4)
	FMLA(3, 13, 5)
	VST1.P [V2.S4, V3.S4], 32(R8)
	VLD1.P 32(R12), [V8.S4, V9.S4]
	FMLA(6, 2, 8)
	FMLA(7, 3, 9)
	SUBS $8, R10
	BNE dspass2
	HSUM8(6, 7)
	FMOVS F6, (R4)

	MOVD R8, R0
	ADD $4, R3
	ADD $4, R4
	SUBS $1, R6
	BNE dsrow
dsdone:
	RET

// func axpyNEON(y, x *float32, n int, a float32)
//
// y[i] += a·x[i] over n elements, n a multiple of 8.
TEXT ·axpyNEON(SB), NOSPLIT, $0-28
	MOVD y+0(FP), R0
	MOVD x+8(FP), R1
	MOVD n+16(FP), R2
	MOVWU a+24(FP), R3
	VDUP R3, V15.S4
	LSR $3, R2
	CBZ R2, axdone
axloop:
	VLD1 (R0), [V0.S4, V1.S4]
	VLD1.P 32(R1), [V2.S4, V3.S4]
	FMLA(0, 15, 2)
	FMLA(1, 15, 3)
	VST1.P [V0.S4, V1.S4], 32(R0)
	SUBS $1, R2
	BNE axloop
axdone:
	RET
