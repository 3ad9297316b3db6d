#include "textflag.h"

// expf (exp.go) on eight lanes, operation for operation: the same
// products and sums in the same order, none fused, so that every lane
// gets the Go loop's bits.
//
// R8 points at expTable (exp_amd64.go): 32 bytes a constant. EXPCONSTS
// loads those of the loop into Y8–Y15 and the sign mask into Y5; EXP8
// computes Y0 = e^Y0 with Y1–Y3 as scratch and the polynomial's
// coefficients read from the table.

#define EXPCONSTS \
	VMOVUPS 0(R8), Y15; \
	VMOVUPS 32(R8), Y14; \
	VMOVUPS 64(R8), Y13; \
	VMOVUPS 96(R8), Y12; \
	VMOVUPS 128(R8), Y11; \
	VMOVUPS 160(R8), Y10; \
	VMOVUPS 384(R8), Y9; \
	VMOVUPS 416(R8), Y8; \
	VPCMPEQD Y5, Y5, Y5; \
	VPSLLD $31, Y5, Y5

#define EXP8 \
	VMAXPS Y0, Y14, Y0; \
	VMINPS Y0, Y15, Y0; \
	VMULPS Y13, Y0, Y1; \
	VADDPS Y12, Y1, Y1; \
	VSUBPS Y12, Y1, Y2; \
	VPSUBD Y12, Y1, Y1; \
	VMULPS Y11, Y2, Y3; \
	VSUBPS Y3, Y0, Y0; \
	VMULPS Y10, Y2, Y3; \
	VSUBPS Y3, Y0, Y0; \
	VMULPS Y0, Y0, Y2; \
	VMULPS 352(R8), Y0, Y3; \
	VADDPS 320(R8), Y3, Y3; \
	VMULPS Y0, Y3, Y3; \
	VADDPS 288(R8), Y3, Y3; \
	VMULPS Y0, Y3, Y3; \
	VADDPS 256(R8), Y3, Y3; \
	VMULPS Y0, Y3, Y3; \
	VADDPS 224(R8), Y3, Y3; \
	VMULPS Y0, Y3, Y3; \
	VADDPS 192(R8), Y3, Y3; \
	VMULPS Y2, Y3, Y3; \
	VADDPS Y0, Y3, Y3; \
	VADDPS Y9, Y3, Y3; \
	VPSRAD $1, Y1, Y2; \
	VPSUBD Y2, Y1, Y1; \
	VPADDD Y8, Y2, Y2; \
	VPSLLD $23, Y2, Y2; \
	VPADDD Y8, Y1, Y1; \
	VPSLLD $23, Y1, Y1; \
	VMULPS Y2, Y3, Y3; \
	VMULPS Y1, Y3, Y0

// The max and min keep a NaN, as the Go loop's clamps let it through:
// with only one operand a NaN, vmaxps and vminps return their last source
// (Go's first operand), here x.

// func expShiftAVX2(y, x *float32, n int, shift float32, c *[expConsts][8]float32)
TEXT ·expShiftAVX2(SB), NOSPLIT, $0-40
	MOVQ y+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX
	VBROADCASTSS shift+24(FP), Y7
	MOVQ c+32(FP), R8
	EXPCONSTS

expshift:
	VMOVUPS (SI), Y0
	VSUBPS Y7, Y0, Y0
	EXP8
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	SUBQ $8, CX
	JNZ  expshift
	VZEROUPPER
	RET

// func swiGLUAVX2(y, gates, u *float32, n int, c *[expConsts][8]float32)
TEXT ·swiGLUAVX2(SB), NOSPLIT, $0-40
	MOVQ y+0(FP), DI
	MOVQ gates+8(FP), SI
	MOVQ u+16(FP), DX
	MOVQ n+24(FP), CX
	MOVQ c+32(FP), R8
	EXPCONSTS

swiglu:
	VMOVUPS (SI), Y6
	VXORPS  Y5, Y6, Y0
	EXP8
	VADDPS  Y9, Y0, Y0
	VDIVPS  Y0, Y6, Y0
	VMULPS  (DX), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DX
	ADDQ    $32, DI
	SUBQ    $8, CX
	JNZ     swiglu
	VZEROUPPER
	RET

// func siluAVX2(y, x *float32, n int, c *[expConsts][8]float32)
TEXT ·siluAVX2(SB), NOSPLIT, $0-32
	MOVQ y+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ c+24(FP), R8
	EXPCONSTS

silu:
	VMOVUPS (SI), Y6
	VXORPS  Y5, Y6, Y0
	EXP8
	VADDPS  Y9, Y0, Y0
	VDIVPS  Y0, Y6, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	SUBQ    $8, CX
	JNZ     silu
	VZEROUPPER
	RET

// func gateAVX2(o, gates *float32, n int, a float32, c *[expConsts][8]float32)
TEXT ·gateAVX2(SB), NOSPLIT, $0-40
	MOVQ o+0(FP), DI
	MOVQ gates+8(FP), SI
	MOVQ n+16(FP), CX
	VBROADCASTSS a+24(FP), Y7
	MOVQ c+32(FP), R8
	EXPCONSTS

gate:
	VMOVUPS (SI), Y6
	VXORPS  Y5, Y6, Y0
	EXP8
	VADDPS  Y9, Y0, Y0
	VDIVPS  Y0, Y7, Y0
	VMULPS  (DI), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	SUBQ    $8, CX
	JNZ     gate
	VZEROUPPER
	RET
