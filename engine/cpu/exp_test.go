package cpu

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// ulps is the distance in float32 steps between a and b, both finite and
// of one sign (or zero).
func ulps(a, b float32) int64 {
	ia, ib := int64(math.Float32bits(a)&^(1<<31)), int64(math.Float32bits(b)&^(1<<31))
	if ia > ib {
		return ia - ib
	}
	return ib - ia
}

// expEdges are the inputs where expf's branches meet: zeros, the
// overflow and underflow thresholds and their neighbours, the smallest
// normal and subnormal results, the clamps, infinities and NaN.
func expEdges() []float32 {
	xs := []float32{0, float32(math.Copysign(0, -1)), 1, -1, 1e-45, -1e-45, 1e-30, -1e-30,
		88.72283, 88.722839, 88.72284, 88.7229, 89, 90, 100, math.MaxFloat32,
		-87.33654, -87.33655, -87.3366, -100, -103.27893, -103.97207, -103.97208, -103.973, -104, -105, -200,
		-math.MaxFloat32, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())}
	for k := -150; k <= 128; k++ {
		x := float32(float64(k) * math.Ln2)
		xs = append(xs, x, math.Nextafter32(x, 200), math.Nextafter32(x, -200))
		h := float32((float64(k) + 0.5) * math.Ln2) // where the reduction's k changes
		xs = append(xs, h, math.Nextafter32(h, 200), math.Nextafter32(h, -200))
	}
	return xs
}

// TestExpf checks expf against math.Exp rounded to float32 within 2 ulp
// (the polynomial is Cephes' expf, whose error is under 2 ulp, and the
// reduction and the scaling add under half an ulp between them; a result
// below the smallest normal counts its ulp as the subnormal step) on a
// dense sweep of the float32 inputs (every 61st bit pattern of each sign,
// every input of [−1, 1]'s top binade and every 7th in [1, 2]) and on the
// edges; +Inf, 0 and NaN must come out exactly where math.Exp gives them.
func TestExpf(t *testing.T) {
	worst, worstX := int64(0), float32(0)
	check := func(x float32) {
		want := float32(math.Exp(float64(x)))
		got := expf(x)
		switch {
		case math.IsNaN(float64(want)):
			if !math.IsNaN(float64(got)) {
				t.Fatalf("expf(%g) = %g, want NaN", x, got)
			}
			return
		case math.IsInf(float64(want), 1) || want == 0:
			if got != want {
				t.Fatalf("expf(%g) = %g, want %g", x, got, want)
			}
			return
		case math.IsInf(float64(got), 0) || math.IsNaN(float64(got)):
			t.Fatalf("expf(%g) = %g, want %g", x, got, want)
		}
		if d := ulps(got, want); d > worst {
			worst, worstX = d, x
		}
	}
	sweep := func(lo, hi, step uint32) {
		for b := uint64(lo); b <= uint64(hi); b += uint64(step) {
			check(math.Float32frombits(uint32(b)))
		}
	}
	sweep(0, 0x7f800000, 61)          // +0 … +Inf
	sweep(0x80000000, 0xff800000, 61) // −0 … −Inf
	sweep(0x3f000000, 0x3f800000, 1)  // [0.5, 1]
	sweep(0xbf000000, 0xbf800000, 1)  // [−1, −0.5]
	sweep(0x3f800000, 0x40000000, 7)  // [1, 2]
	for _, x := range expEdges() {
		check(x)
	}
	t.Logf("largest error %d ulp, at %g", worst, worstX)
	if worst > 2 {
		t.Fatalf("expf(%g) is %d ulp from math.Exp, more than 2", worstX, worst)
	}
}

// activationInputs are random values over the range the activations see
// (and past it), the edges of expf, and some lengths' worth of padding.
func activationInputs(rng *rand.Rand, n int) []float32 {
	xs := expEdges()
	for len(xs) < n {
		xs = append(xs, float32(rng.NormFloat64()*float64([]float32{1, 4, 30, 120}[rng.IntN(4)])))
	}
	rng.Shuffle(len(xs), func(i, j int) { xs[i], xs[j] = xs[j], xs[i] })
	return xs[:n]
}

// sameFloatBits reports whether a and b hold the same bits, any NaN matching
// any NaN.
func sameFloatBits(a, b float32) bool {
	if a != a || b != b {
		return a != a && b != b
	}
	return math.Float32bits(a) == math.Float32bits(b)
}

// TestActivationKernels checks each fast table against the Go loops bit
// for bit (a row's elements may go through either, see exp.go), over
// lengths that leave every tail and at offsets that misalign the vectors;
// and the fast loops against the exact table: within 1e-6 relative (the
// float32 exponential's 2 ulp and the three roundings of the sigmoid's
// sum, quotient and product: 5 ulp of 2⁻²⁴ each, 3e-7, with room) plus
// 1e-30 absolute: where e^−x overflows float32 (x < −88.7) the fast
// sigmoid is 0 and the exact one under 3e-39, times |x| and |u| (at most
// 1e4 here) under 1e-30.
func TestActivationKernels(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	type run func(a *activations, y, x, u []float32)
	kernels := map[string]run{
		"expShift": func(a *activations, y, x, _ []float32) { a.expShift(y, x, 1.5) },
		"swiGLU":   func(a *activations, y, x, u []float32) { a.swiGLU(y, x, u) },
		"silu":     func(a *activations, y, x, _ []float32) { a.silu(y, x) },
		"gate": func(a *activations, y, x, u []float32) {
			copy(y, u)
			a.gate(y, x, 0.75)
		},
	}
	var tables []ISA
	for _, isa := range ISAs() {
		if fastActivations(isa) != &goActivations {
			tables = append(tables, isa)
		}
	}
	if len(tables) == 0 {
		t.Log("this machine has no assembly activations: the Go loops against the exact table only")
	}
	for name, k := range kernels {
		for _, n := range []int{0, 1, 7, 8, 9, 15, 16, 17, 31, 33, 100, 1000} {
			for off := range 3 {
				x := activationInputs(rng, n+off)[off:]
				u := activationInputs(rng, n+off)[off:]
				for i, v := range u {
					if v != v || math.Abs(float64(v)) > 1e4 {
						u[i] = 1 // an up projection's values: finite, moderate
					}
				}
				want := make([]float32, n)
				k(&goActivations, want, slices.Clone(x), slices.Clone(u))
				for _, isa := range tables {
					got := make([]float32, n+off)[off:]
					k(fastActivations(isa), got, slices.Clone(x), slices.Clone(u))
					for i := range want {
						if !sameFloatBits(got[i], want[i]) {
							t.Fatalf("%s %s n=%d: element %d of %g: %g (%#x), the Go loop gives %g (%#x)",
								isa, name, n, i, x[i], got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
						}
					}
				}
				exact := make([]float32, n)
				k(&exactActivations, exact, slices.Clone(x), slices.Clone(u))
				for i := range exact {
					e, g := float64(exact[i]), float64(want[i])
					if e != e || g != g {
						if (e != e) != (g != g) {
							t.Fatalf("%s: element %d of %g: fast %g, exact %g", name, i, x[i], g, e)
						}
						continue
					}
					if math.IsInf(e, 0) || math.IsInf(g, 0) {
						if e != g {
							t.Fatalf("%s: element %d of %g: fast %g, exact %g", name, i, x[i], g, e)
						}
						continue
					}
					if math.Abs(g-e) > 1e-6*math.Abs(e)+1e-30 {
						t.Fatalf("%s: element %d of %g: fast %g, exact %g (relative %.3g)", name, i, x[i], g, e, math.Abs(g-e)/math.Abs(e))
					}
				}
			}
		}
	}
}

// TestActivationsInPlace checks that the kernels may write over their
// inputs, as the passes call them.
func TestActivationsInPlace(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, isa := range ISAs() {
		a := fastActivations(isa)
		x := activationInputs(rng, 37)
		want := make([]float32, len(x))
		a.silu(want, x)
		y := slices.Clone(x)
		a.silu(y, y)
		u := activationInputs(rng, 37)
		want2 := make([]float32, len(x))
		a.swiGLU(want2, x, u)
		y2 := slices.Clone(x)
		a.swiGLU(y2, y2, u)
		for i := range x {
			if !sameFloatBits(y[i], want[i]) || !sameFloatBits(y2[i], want2[i]) {
				t.Fatalf("%s: element %d differs in place", isa, i)
			}
		}
	}
}

func BenchmarkActivations(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	x := make([]float32, 4096)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * 4)
	}
	y := make([]float32, len(x))
	tables := map[string]*activations{"exact": &exactActivations, "go": &goActivations}
	for _, isa := range ISAs() {
		if a := fastActivations(isa); a != &goActivations {
			tables[string(isa)] = a
		}
	}
	for name, a := range tables {
		b.Run("silu/"+name, func(b *testing.B) {
			for range b.N {
				a.silu(y, x)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(x)), "ns/element")
		})
		b.Run("expShift/"+name, func(b *testing.B) {
			for range b.N {
				a.expShift(y, x, 3)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(x)), "ns/element")
		})
	}
}
