package cpu

import "math"

// The activations' exponentials. The exact path takes them in float64
// through math.Exp, as the reference does; the fast paths (PrecisionFast,
// PrecisionInt8) take them in float32 through expf, within 2 ulp of
// math.Exp over the float32 range (TestExpf), in assembly eight lanes at
// a time where the machine has AVX2 (exp_amd64.s) and four at a time on
// arm64's NEON (exp_arm64.s).
//
// A row must come out bit for bit the same whatever pass it is in, and a
// row's elements may fall in the assembly's lanes or in the Go loop's tail
// depending on where a parallel region cuts the data: so the assembly does
// exactly the Go loop's arithmetic, operation for operation, with no fused
// multiply-add (the Go code converts each product to float32, which keeps
// the compiler from fusing it on arm64), and TestActivationKernels checks
// the two agree bit for bit.

// expf's constants: x is clamped to [expLo, expHi] (e^expLo rounds to 0 in
// float32, e^expHi overflows to +Inf), split as x = k·ln2 + r with k an
// integer and |r| ≤ ln2/2, and e^r is a polynomial; the result is e^r·2^k.
const (
	expHi = 89
	expLo = -104
	// roundMagic (1.5·2²³) added to a float32 of magnitude under 2²²
	// rounds it to an integer (ties to even) held in the low bits.
	roundMagic = 12582912
	log2e      = 1.44269504088896341
	// ln2Hi + ln2Lo is ln 2; ln2Hi has 9 significant bits, so k·ln2Hi is
	// exact for |k| ≤ 150 (Cody and Waite's reduction).
	ln2Hi = 0.693359375
	ln2Lo = -2.12194440e-4
	// e^r ≈ 1 + r + r²·(c0 + c1·r + … + c5·r⁵) on |r| ≤ ln2/2 (the
	// coefficients of Cephes' expf).
	expC0 = 5.0000001201e-1
	expC1 = 1.6666665459e-1
	expC2 = 4.1665795894e-2
	expC3 = 8.3334519073e-3
	expC4 = 1.3981999507e-3
	expC5 = 1.9875691500e-4
)

// expf is eˣ in float32: +Inf above 88.72, 0 below −103.97, subnormal
// results rounded once, NaN for NaN.
func expf(x float32) float32 {
	if x < expLo { // a NaN passes both clamps, and comes out NaN
		x = expLo
	}
	if x > expHi {
		x = expHi
	}
	t := float32(x*log2e) + roundMagic
	k := int32(math.Float32bits(t)) - int32(math.Float32bits(roundMagic))
	kf := t - roundMagic
	r := x - float32(kf*ln2Hi)
	r -= float32(kf * ln2Lo)
	z := float32(r * r)
	q := float32(expC5*r) + expC4
	q = float32(q*r) + expC3
	q = float32(q*r) + expC2
	q = float32(q*r) + expC1
	q = float32(q*r) + expC0
	p := float32(float32(q*z)+r) + 1
	// 2^k in two factors, each a normal float for k in [−150, 128], so
	// that a subnormal result is rounded once, by the last product.
	k1 := k >> 1
	s1 := math.Float32frombits(uint32(k1+127) << 23)
	s2 := math.Float32frombits(uint32(k-k1+127) << 23)
	return float32(p*s1) * s2
}

// activations are the element-wise kernels around the products: one
// table computes with math.Exp (the exact path), the others with expf.
type activations struct {
	// expShift writes y[i] = e^(x[i]−shift); y and x may be the same.
	expShift func(y, x []float32, shift float32)
	// swiGLU writes y[i] = silu(g[i])·u[i]; y may be g or u.
	swiGLU func(y, g, u []float32)
	// silu writes y[i] = silu(x[i]); y may be x.
	silu func(y, x []float32)
	// gate writes o[i] = o[i]·a·sigmoid(g[i]).
	gate func(o, g []float32, a float32)
	// softmax writes the softmax of x into y (the router's).
	softmax func(y, x []float32)
}

// acts is the backend's table: the exact one on the exact path, else the
// fast one of its instruction set.
func (b *Backend) acts() *activations {
	if !b.quantizedActivations() {
		return &exactActivations
	}
	return fastActivations(b.kern.isa)
}

var exactActivations = activations{
	expShift: func(y, x []float32, shift float32) {
		for i, v := range x[:len(y)] {
			y[i] = float32(math.Exp(float64(v - shift)))
		}
	},
	swiGLU: func(y, g, u []float32) {
		g, u = g[:len(y)], u[:len(y)]
		for i := range y {
			y[i] = silu(g[i]) * u[i]
		}
	},
	silu: func(y, x []float32) {
		for i, v := range x[:len(y)] {
			y[i] = silu(v)
		}
	},
	gate: func(o, g []float32, a float32) {
		for i, v := range g[:len(o)] {
			o[i] *= a * sigmoid(v)
		}
	},
	softmax: softmax,
}

// goActivations is the fast table's Go loops; the assembly's tails run
// them too.
var goActivations = activations{expShift: expShiftGo, swiGLU: swiGLUGo, silu: siluGo, gate: gateGo,
	softmax: func(y, x []float32) { softmaxWith(expShiftGo, y, x) }}

// softmaxWith writes the softmax of x into y with the exponentials of
// expShift, summed in float64.
func softmaxWith(expShift func(y, x []float32, shift float32), y, x []float32) {
	m := float32(math.Inf(-1))
	for _, v := range x {
		m = max(m, v)
	}
	expShift(y, x, m)
	var sum float64
	for _, e := range y {
		sum += float64(e)
	}
	inv := 1 / sum
	for i := range y {
		y[i] = float32(float64(y[i]) * inv)
	}
}

func expShiftGo(y, x []float32, shift float32) {
	for i, v := range x[:len(y)] {
		y[i] = expf(v - shift)
	}
}

// silu(x) = x/(1+e^−x); with e^−x = +Inf (x < −88.7) it is −0.
func swiGLUGo(y, g, u []float32) {
	g, u = g[:len(y)], u[:len(y)]
	for i := range y {
		v := g[i]
		y[i] = v / (1 + expf(-v)) * u[i]
	}
}

func siluGo(y, x []float32) {
	for i, v := range x[:len(y)] {
		y[i] = v / (1 + expf(-v))
	}
}

func gateGo(o, g []float32, a float32) {
	for i, v := range g[:len(o)] {
		o[i] *= a / (1 + expf(-v))
	}
}

// laneKernels are one instruction set's activation kernels, each over n
// elements, n a multiple of lanes.
type laneKernels struct {
	lanes    int
	expShift func(y, x *float32, n int, shift float32)
	swiGLU   func(y, g, u *float32, n int)
	silu     func(y, x *float32, n int)
	gate     func(o, g *float32, n int, a float32)
}

// laneActivations is the table of k: the kernels run the longest multiple
// of k.lanes, the Go loops the rest, which give the same bits.
func laneActivations(k laneKernels) activations {
	m := k.lanes - 1
	expShift := func(y, x []float32, shift float32) {
		x = x[:len(y)]
		n := len(y) &^ m
		if n > 0 {
			k.expShift(&y[0], &x[0], n, shift)
		}
		expShiftGo(y[n:], x[n:], shift)
	}
	return activations{
		expShift: expShift,
		softmax:  func(y, x []float32) { softmaxWith(expShift, y, x) },
		swiGLU: func(y, g, u []float32) {
			g, u = g[:len(y)], u[:len(y)]
			n := len(y) &^ m
			if n > 0 {
				k.swiGLU(&y[0], &g[0], &u[0], n)
			}
			swiGLUGo(y[n:], g[n:], u[n:])
		},
		silu: func(y, x []float32) {
			x = x[:len(y)]
			n := len(y) &^ m
			if n > 0 {
				k.silu(&y[0], &x[0], n)
			}
			siluGo(y[n:], x[n:])
		},
		gate: func(o, g []float32, a float32) {
			g = g[:len(o)]
			n := len(o) &^ m
			if n > 0 {
				k.gate(&o[0], &g[0], n, a)
			}
			gateGo(o[n:], g[n:], a)
		},
	}
}
