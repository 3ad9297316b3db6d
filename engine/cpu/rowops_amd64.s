#include "textflag.h"

// func convRowAVX2(out, rows *float32, stride int, taps *float32, k, w int)
//
// out[i] = Σ_j taps[j·w+i]·rows[j·stride+i] for i < w rounded down to a
// multiple of 8, j < k (k ≥ 1): each sum from 0, a product rounded then
// added, tap by tap in order, as convRowGo does.
TEXT ·convRowAVX2(SB), NOSPLIT, $0-48
	MOVQ out+0(FP), DI
	MOVQ rows+8(FP), SI
	MOVQ stride+16(FP), R9
	SHLQ $2, R9
	MOVQ taps+24(FP), DX
	MOVQ k+32(FP), R10
	MOVQ w+40(FP), R11
	MOVQ R11, CX
	SHRQ $3, CX
	SHLQ $2, R11

block:
	VXORPS  Y0, Y0, Y0
	MOVQ    SI, AX
	MOVQ    DX, BX
	MOVQ    R10, R12

tap:
	VMOVUPS (BX), Y1
	VMULPS  (AX), Y1, Y1
	VADDPS  Y1, Y0, Y0
	ADDQ    R9, AX
	ADDQ    R11, BX
	DECQ    R12
	JNZ     tap
	VMOVUPS Y0, (DI)
	ADDQ    $32, DI
	ADDQ    $32, SI
	ADDQ    $32, DX
	DECQ    CX
	JNZ     block
	VZEROUPPER
	RET

// func scaleAddAVX2(y, x *float32, n int, a float32)
//
// y[i] += a·x[i] for i < n (a multiple of 8): the product rounded, then
// added, as scaleAddGo does.
TEXT ·scaleAddAVX2(SB), NOSPLIT, $0-28
	MOVQ y+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX
	VBROADCASTSS a+24(FP), Y7
	SHRQ $3, CX

scaleadd:
	VMULPS  (SI), Y7, Y1
	VADDPS  (DI), Y1, Y1
	VMOVUPS Y1, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	DECQ    CX
	JNZ     scaleadd
	VZEROUPPER
	RET
