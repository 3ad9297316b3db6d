package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// fma32 is a·b + c rounded once to float32, as the kernels' fmla: the
// product of two float32 is exact in float64; the sum is rounded to odd
// in float64 (its rounding error found exactly by TwoSum), and a
// round-to-odd result of 53 bits rounds to 24 bits as the exact value does.
func fma32(a, b, c float32) float32 {
	p, q := float64(a)*float64(b), float64(c)
	s := p + q
	v := s - p
	e := (p - (s - v)) + (q - v)
	if e != 0 && math.Float64bits(s)&1 == 0 {
		s = math.Nextafter(s, math.Copysign(math.Inf(1), e))
	}
	return float32(s)
}

// The f32 kernels' arithmetic written out in Go with fma32: eight lanes,
// fused multiply-adds, and AVX2's horizontal sums (vextractf128 and
// vaddps, then two vhaddps for one sum; vhaddps by pairs of rows for
// dot4). Every level's kernels must give these bits, so that attention
// and the DeltaNet scan compute the same on amd64 and arm64.

// hsum8 is lane i plus lane i+4, then two pairwise adds.
func hsum8(l *[8]float32) float32 {
	h0, h1, h2, h3 := l[0]+l[4], l[1]+l[5], l[2]+l[6], l[3]+l[7]
	return (h0 + h1) + (h2 + h3)
}

// dotFused is the kernels' dot over n, a multiple of 16: elements 0–7 and
// 8–15 of every sixteen in two sets of lanes, added lane by lane.
func dotFused(a, b []float32, n int) float32 {
	var s0, s1, l [8]float32
	for i := 0; i < n; i += 16 {
		for j := range 8 {
			s0[j] = fma32(a[i+j], b[i+j], s0[j])
			s1[j] = fma32(a[i+8+j], b[i+8+j], s1[j])
		}
	}
	for j := range l {
		l[j] = s0[j] + s1[j]
	}
	return hsum8(&l)
}

// dot4Fused is the kernels' dot4: each row's two sets of lanes added lane
// by lane, then pairs, pairs of pairs, and the two halves.
func dot4Fused(w [4][]float32, x []float32, n int) [4]float32 {
	var l [4][8]float32
	for r := range 4 {
		var s0, s1 [8]float32
		for i := 0; i < n; i += 16 {
			for j := range 8 {
				s0[j] = fma32(w[r][i+j], x[i+j], s0[j])
				s1[j] = fma32(w[r][i+8+j], x[i+8+j], s1[j])
			}
		}
		for j := range 8 {
			l[r][j] = s0[j] + s1[j]
		}
	}
	var out [4]float32
	for r := range 4 {
		half := func(h int) float32 {
			v := l[r][4*h:]
			return (v[0] + v[1]) + (v[2] + v[3])
		}
		out[r] = half(0) + half(1)
	}
	return out
}

// deltaStepFused is the kernels' DeltaNet step (deltaStepWith's loops with
// eight lanes and fused multiply-adds).
func deltaStepFused(st *deltaStep) {
	S, k, q, v, o := st.S, st.k, st.q, st.v, st.o
	decay, beta := st.decay, st.beta
	dk := len(k)
	for d := range v {
		row := S[d*dk : (d+1)*dk]
		var acc [8]float32
		for i := range row {
			row[i] *= decay
			acc[i%8] = fma32(row[i], k[i], acc[i%8])
		}
		delta := beta * (v[d] - hsum8(&acc))
		acc = [8]float32{}
		for i := range row {
			row[i] = fma32(delta, k[i], row[i])
			acc[i%8] = fma32(row[i], q[i], acc[i%8])
		}
		o[d] = hsum8(&acc)
	}
}

// TestFusedF32Kernels requires each level's f32 dot, dot4, axpy and
// DeltaNet step, where it has them, to give the Go models' bits on lengths
// of one to a few dozen vector steps, and on the DeltaNet state of the
// full model (128×128) and the alternative checkpoint's (24×40), through
// four tokens. Bit for bit: the models round exactly as the kernels are
// meant to, so any difference is a lane, order or fusion mistake.
func TestFusedF32Kernels(t *testing.T) {
	checked := 0
	for _, level := range machineKernels() {
		f := &level.f32
		if f.dot == nil && f.dot4 == nil && f.axpy == nil && f.deltaStep == nil {
			continue
		}
		checked++
		t.Run(string(level.isa), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(81, 82))
			for _, n := range []int{16, 32, 48, 256, 400} {
				a, b := randomVector(rng, n), randomVector(rng, n)
				if f.dot != nil {
					if got, want := f.dot(&a[0], &b[0], n), dotFused(a, b, n); math.Float32bits(got) != math.Float32bits(want) {
						t.Fatalf("dot n=%d: %v, want %v", n, got, want)
					}
				}
				if f.dot4 != nil {
					var w [4][]float32
					for r := range w {
						w[r] = randomVector(rng, n)
					}
					var got [4]float32
					f.dot4(&w[0][0], &w[1][0], &w[2][0], &w[3][0], &a[0], n, &got)
					if want := dot4Fused(w, a, n); fmt.Sprint(bitsOf(got[:])) != fmt.Sprint(bitsOf(want[:])) {
						t.Fatalf("dot4 n=%d: %v, want %v", n, got, want)
					}
				}
				if f.axpy != nil {
					y := append([]float32(nil), b...)
					f.axpy(&y[0], &a[0], n, 0.375)
					for i := range y {
						if want := fma32(0.375, a[i], b[i]); math.Float32bits(y[i]) != math.Float32bits(want) {
							t.Fatalf("axpy n=%d: y[%d] = %v, want %v", n, i, y[i], want)
						}
					}
				}
			}
			if f.deltaStep == nil {
				return
			}
			for _, size := range []struct{ dk, dv int }{{128, 128}, {24, 40}} {
				S := randomVector(rng, size.dk*size.dv)
				ref := append([]float32(nil), S...)
				for step := range 4 {
					k, q, v := randomVector(rng, size.dk), randomVector(rng, size.dk), randomVector(rng, size.dv)
					l2Normalize(k, 1e-6, 1)
					l2Normalize(q, 1e-6, 1/math.Sqrt(float64(size.dk)))
					decay, beta := float32(0.5+0.5*rng.Float64()), float32(rng.Float64())
					o, want := make([]float32, size.dv), make([]float32, size.dv)
					f.deltaStep(&S[0], &k[0], &q[0], &v[0], &o[0], size.dk, size.dv, decay, beta)
					deltaStepFused(&deltaStep{S: ref, k: k, q: q, v: v, o: want, decay: decay, beta: beta})
					for i := range S {
						if math.Float32bits(S[i]) != math.Float32bits(ref[i]) {
							t.Fatalf("%dx%d step %d: S[%d] = %v, want %v", size.dk, size.dv, step, i, S[i], ref[i])
						}
					}
					for d := range o {
						if math.Float32bits(o[d]) != math.Float32bits(want[d]) {
							t.Fatalf("%dx%d step %d: o[%d] = %v, want %v", size.dk, size.dv, step, d, o[d], want[d])
						}
					}
				}
			}
		})
	}
	if checked == 0 {
		t.Log("no level with f32 kernels on this machine")
	}
}

func bitsOf(x []float32) []uint32 {
	out := make([]uint32, len(x))
	for i, v := range x {
		out[i] = math.Float32bits(v)
	}
	return out
}

// TestFMA32 checks fma32 where rounding the sum twice goes wrong, and
// against math.FMA (rounded to float32 after) on random values within one
// float32 rounding.
func TestFMA32(t *testing.T) {
	// (1+2⁻²³)·2⁻²⁴(1−2⁻²³) + (1+2⁻²³) = 1 + 2⁻²³ + 2⁻²⁴ − 2⁻⁷⁰: just
	// below the halfway point between 1+2⁻²³ and 1+2⁻²², so it rounds
	// down; rounded first to float64 it would sit on the halfway point
	// and go to the even 1+2⁻²².
	a := float32(1 + math.Ldexp(1, -23))
	b := float32(math.Ldexp(1, -24) * (1 - math.Ldexp(1, -23)))
	if got := fma32(a, b, a); got != a {
		t.Errorf("fma32 just below a halfway point: %v, want %v", got, a)
	}
	if got := fma32(-a, b, -a); got != -a {
		t.Errorf("negated: %v, want %v", got, -a)
	}
	// Exactly halfway between 1 and 1+2⁻²³: ties to even, 1.
	if got := fma32(1, float32(math.Ldexp(1, -24)), 1); got != 1 {
		t.Errorf("fma32 at a halfway point: %v, want 1", got)
	}
	rng := rand.New(rand.NewPCG(73, 74))
	for range 100000 {
		a, b, c := float32(rng.NormFloat64()), float32(rng.NormFloat64()), float32(rng.NormFloat64())
		if got, want := fma32(a, b, c), float32(math.FMA(float64(a), float64(b), float64(c))); math.Abs(float64(got-want)) > math.Abs(float64(want))*1.2e-7 {
			t.Fatalf("fma32(%v, %v, %v) = %v, want about %v", a, b, c, got, want)
		}
	}
}
