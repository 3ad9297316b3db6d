package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/suzuran-app/suzuran/engine/model"
)

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
					l.quantize(p.data[r*l.recordBytes:(r+1)*l.recordBytes], x[r*c.in:(r+1)*c.in], &neon.q8)
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
