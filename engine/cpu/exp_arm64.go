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

func expShiftNEONSlice(y, x []float32, shift float32) {
	x = x[:len(y)]
	n := len(y) &^ 3
	if n > 0 {
		expShiftNEON(&y[0], &x[0], n, shift, &expTable4)
	}
	expShiftGo(y[n:], x[n:], shift)
}

var neonActivations = activations{
	expShift: expShiftNEONSlice,
	softmax:  func(y, x []float32) { softmaxWith(expShiftNEONSlice, y, x) },
	swiGLU: func(y, g, u []float32) {
		g, u = g[:len(y)], u[:len(y)]
		n := len(y) &^ 3
		if n > 0 {
			swiGLUNEON(&y[0], &g[0], &u[0], n, &expTable4)
		}
		swiGLUGo(y[n:], g[n:], u[n:])
	},
	silu: func(y, x []float32) {
		x = x[:len(y)]
		n := len(y) &^ 3
		if n > 0 {
			siluNEON(&y[0], &x[0], n, &expTable4)
		}
		siluGo(y[n:], x[n:])
	},
	gate: func(o, g []float32, a float32) {
		g = g[:len(o)]
		n := len(o) &^ 3
		if n > 0 {
			gateNEON(&o[0], &g[0], n, a, &expTable4)
		}
		gateGo(o[n:], g[n:], a)
	},
}

// fastActivations is the fast path's table for the instruction set: the
// assembly on the neon level, the Go loops on the generic one.
func fastActivations(isa ISA) *activations {
	if isa == ISANEON {
		return &neonActivations
	}
	return &goActivations
}
