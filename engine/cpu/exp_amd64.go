package cpu

import "math"

// The AVX2 activations of exp_amd64.s: each runs n (a multiple of 8)
// elements; the wrappers run the rest with the Go loops, which give the
// same bits.

//go:noescape
func expShiftAVX2(y, x *float32, n int, shift float32, c *[expConsts][8]float32)

//go:noescape
func swiGLUAVX2(y, gates, u *float32, n int, c *[expConsts][8]float32)

//go:noescape
func siluAVX2(y, x *float32, n int, c *[expConsts][8]float32)

//go:noescape
func gateAVX2(o, gates *float32, n int, a float32, c *[expConsts][8]float32)

// expTable holds expf's constants, eight lanes each, in the order
// exp_amd64.s reads them.
const expConsts = 14

var expTable = func() (t [expConsts][8]float32) {
	c := [expConsts]float32{expHi, expLo, log2e, roundMagic, ln2Hi, ln2Lo,
		expC0, expC1, expC2, expC3, expC4, expC5, 1,
		math.Float32frombits(127)} // the exponent's bias, an integer lane
	for i := range t {
		for l := range t[i] {
			t[i][l] = c[i]
		}
	}
	return t
}()

var avx2Activations = laneActivations(laneKernels{lanes: 8,
	expShift: func(y, x *float32, n int, shift float32) { expShiftAVX2(y, x, n, shift, &expTable) },
	swiGLU:   func(y, g, u *float32, n int) { swiGLUAVX2(y, g, u, n, &expTable) },
	silu:     func(y, x *float32, n int) { siluAVX2(y, x, n, &expTable) },
	gate:     func(o, g *float32, n int, a float32) { gateAVX2(o, g, n, a, &expTable) },
})

// fastActivations is the fast path's table for the instruction set: the
// assembly on the AVX2 levels, the Go loops on the generic one.
func fastActivations(isa ISA) *activations {
	if isa == ISAAVX2 || isa == ISAVNNI {
		return &avx2Activations
	}
	return &goActivations
}
