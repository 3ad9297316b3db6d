package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/suzuran-app/suzuran/engine/model"
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

// q8RowFused is q8RowGo with the kernels' fused multiply-add: the same
// integer lanes, then per unit and lane acc += fma(float(isum), s·d,
// b·d·Σxq) and the same horizontal sum. The arm64 kernels must give its
// result bit for bit.
func q8RowFused(l *q8Layout, w *model.Matrix, o int, rec []byte) float32 {
	row := w.Data[o*l.rowBytes : (o+1)*l.rowBytes]
	groups := w.In / w.GroupSize
	scales := u16s(w.Scales)[o*groups : (o+1)*groups]
	biases := u16s(w.Biases)[o*groups : (o+1)*groups]
	per := l.unitElems / l.group
	act := func(xq []byte, i int) int32 {
		if l.wide {
			return int32(int16(uint16(xq[2*i]) | uint16(xq[2*i+1])<<8))
		}
		return int32(int8(xq[i]))
	}
	var acc [8]float32
	for u := range l.units {
		r := rec[u*(l.xqBytes+64) : (u+1)*(l.xqBytes+64)]
		d := (*[8]float32)(unsafe.Pointer(&r[l.xqBytes]))
		xs := (*[8]float32)(unsafe.Pointer(&r[l.xqBytes+32]))
		var isum [8]int32
		for c := range l.chunks {
			wb := row[(u*l.chunks+c)*32 : (u*l.chunks+c+1)*32]
			for k, q := range wb {
				lane := l.laneOf(k)
				if l.bits == 8 {
					isum[lane] += int32(q) * act(r, c*32+k)
					continue
				}
				lo, hi := l.position(c*64+2*k), l.position(c*64+2*k+1)
				isum[lane] += int32(q&15)*act(r, lo) + int32(q>>4)*act(r, hi)
			}
		}
		for k := range 8 {
			g := u*per + l.laneGroup(k)
			s, b := bf16(scales[g]), bf16(biases[g])
			c, p := float32(s*d[k]), float32(b*xs[k])
			acc[k] = float32(acc[k] + fma32(float32(isum[k]), c, p))
		}
	}
	h0, h1, h2, h3 := acc[0]+acc[4], acc[1]+acc[5], acc[2]+acc[6], acc[3]+acc[7]
	return (h0 + h1) + (h2 + h3)
}

// TestQ8NEONKernels runs each arm64 integer kernel this CPU has on every
// layout of q8Cases and a few more (4-bit groups of 256, four chunks a
// unit; 8-bit groups of 96, three), on 1 to 9 token rows in one tile (the
// kernels' token loop), one row with an all-zero group (scale 0), and
// requires q8RowFused's result bit for bit: the integer lanes are exact
// and the float steps the same, so any difference is a wrong lane,
// nibble, activation or scale.
func TestQ8NEONKernels(t *testing.T) {
	neon, err := kernelsFor(ISANEON)
	if err != nil {
		t.Fatal(err)
	}
	if neon.q8.w4 == nil || neon.q8.w4Split == nil || neon.q8.w8 == nil {
		t.Fatal("the neon level lacks an int16 kernel")
	}
	cases := append(q8Cases[:len(q8Cases):len(q8Cases)], []struct {
		dtype       model.DType
		bits, group int
		out, in     int
	}{{model.Affine, 4, 256, 5, 512}, {model.Affine, 8, 96, 7, 288}}...)
	rng := rand.New(rand.NewPCG(71, 72))
	ran := map[string]bool{}
	for _, c := range cases {
		if c.dtype != model.Affine {
			continue
		}
		tm := newTestMatrix(rng, c.dtype, c.out, c.in, c.bits, c.group)
		for _, wide := range []bool{true, false} {
			l, ok := newQ8Layout(&tm.m, wide)
			if !ok {
				continue
			}
			kern := neon.q8.kernel(&l)
			name := fmt.Sprintf("%d-bit g%d %dx%d wide=%v", c.bits, c.group, c.out, c.in, wide)
			if kern == nil {
				t.Logf("%s: no kernel on this CPU (the Go loops)", name)
				continue
			}
			ran[fmt.Sprintf("%d-bit split=%v wide=%v", c.bits, l.split, wide)] = true
			for _, rows := range []int{1, 2, 3, 5, 9} {
				x := randomVector(rng, rows*c.in)
				clear(x[:min(c.group, c.in)]) // token 0's first group: all zero
				p := &q8Input{layout: l, data: make([]byte, rows*l.recordBytes)}
				for r := range rows {
					l.quantize(p.data[r*l.recordBytes:(r+1)*l.recordBytes], x[r*c.in:(r+1)*c.in])
				}
				y := make([]float32, rows*c.out)
				neon.q8.q8Rows(y, rows, &tm.m, p, 0, c.out)
				for r := range rows {
					for o := range c.out {
						want := q8RowFused(&l, &tm.m, o, p.data[r*l.recordBytes:(r+1)*l.recordBytes])
						if got := y[r*c.out+o]; math.Float32bits(got) != math.Float32bits(want) {
							t.Fatalf("%s rows %d: [%d, %d] = %v, want %v", name, rows, r, o, got, want)
						}
					}
				}
			}
		}
	}
	t.Logf("kernels checked: %v", ran)
	for _, k := range []string{"4-bit split=false wide=true", "4-bit split=true wide=true", "8-bit split=false wide=true"} {
		if !ran[k] {
			t.Errorf("no case ran the %s kernel", k)
		}
	}
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
