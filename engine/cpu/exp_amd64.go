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

func expShiftAVX2Slice(y, x []float32, shift float32) {
	x = x[:len(y)]
	n := len(y) &^ 7
	if n > 0 {
		expShiftAVX2(&y[0], &x[0], n, shift, &expTable)
	}
	expShiftGo(y[n:], x[n:], shift)
}

var avx2Activations = activations{
	expShift: expShiftAVX2Slice,
	softmax:  func(y, x []float32) { softmaxWith(expShiftAVX2Slice, y, x) },
	swiGLU: func(y, g, u []float32) {
		g, u = g[:len(y)], u[:len(y)]
		n := len(y) &^ 7
		if n > 0 {
			swiGLUAVX2(&y[0], &g[0], &u[0], n, &expTable)
		}
		swiGLUGo(y[n:], g[n:], u[n:])
	},
	silu: func(y, x []float32) {
		x = x[:len(y)]
		n := len(y) &^ 7
		if n > 0 {
			siluAVX2(&y[0], &x[0], n, &expTable)
		}
		siluGo(y[n:], x[n:])
	},
	gate: func(o, g []float32, a float32) {
		g = g[:len(o)]
		n := len(o) &^ 7
		if n > 0 {
			gateAVX2(&o[0], &g[0], n, a, &expTable)
		}
		gateGo(o[n:], g[n:], a)
	},
}

// fastActivations is the fast path's table for the instruction set: the
// assembly on the AVX2 levels, the Go loops on the generic one.
func fastActivations(isa ISA) *activations {
	if isa == ISAAVX2 || isa == ISAVNNI {
		return &avx2Activations
	}
	return &goActivations
}
