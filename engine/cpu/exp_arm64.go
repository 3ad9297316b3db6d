package cpu

import "math"

// The NEON activations of exp_arm64.s: each runs n (a multiple of 4)
// elements; the wrappers run the rest with the Go loops, which give the
// same bits.

//go:noescape
func expShiftNEON(y, x *float32, n int, shift float32, c *[expConsts4][4]float32)

//go:noescape
func swiGLUNEON(y, gates, u *float32, n int, c *[expConsts4][4]float32)

//go:noescape
func siluNEON(y, x *float32, n int, c *[expConsts4][4]float32)

//go:noescape
func gateNEON(o, gates *float32, n int, a float32, c *[expConsts4][4]float32)

// expTable4 holds expf's constants, four lanes each, in the order
// exp_arm64.s loads them into V16–V31.
const expConsts4 = 16

var expTable4 = func() (t [expConsts4][4]float32) {
	c := [expConsts4]float32{expHi, expLo, log2e, roundMagic, ln2Hi, ln2Lo,
		expC0, expC1, expC2, expC3, expC4, expC5, 1,
		math.Float32frombits(127),        // the exponent's bias, an integer lane
		math.Float32frombits(0x80000000), // the sign bit
		0}
	for i := range t {
		for l := range t[i] {
			t[i][l] = c[i]
		}
	}
	return t
}()

var neonActivations = laneActivations(laneKernels{lanes: 4,
	expShift: func(y, x *float32, n int, shift float32) { expShiftNEON(y, x, n, shift, &expTable4) },
	swiGLU:   func(y, g, u *float32, n int) { swiGLUNEON(y, g, u, n, &expTable4) },
	silu:     func(y, x *float32, n int) { siluNEON(y, x, n, &expTable4) },
	gate:     func(o, g *float32, n int, a float32) { gateNEON(o, g, n, a, &expTable4) },
})

// fastActivations is the fast path's table for the instruction set: the
// assembly on the neon level, the Go loops on the generic one.
func fastActivations(isa ISA) *activations {
	if isa == ISANEON {
		return &neonActivations
	}
	return &goActivations
}
