package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"syscall"
	"testing"

	"github.com/suzuran-app/suzuran/engine/model"
)

// guardedBytes returns n bytes of their own mapping that end (atEnd) or
// start right at an inaccessible page, so that a kernel reading a byte
// past the end or before the start of them faults; free unmaps them.
func guardedBytes(t *testing.T, n int, atEnd bool) (b []byte, free func()) {
	page := syscall.Getpagesize()
	size := (n + page - 1) / page * page
	m, err := syscall.Mmap(-1, 0, size+2*page, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Skipf("no anonymous mapping: %v", err)
	}
	if err := syscall.Mprotect(m[:page], syscall.PROT_NONE); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mprotect(m[page+size:], syscall.PROT_NONE); err != nil {
		t.Fatal(err)
	}
	if atEnd {
		b = m[page+size-n : page+size]
	} else {
		b = m[page : page+n]
	}
	return b, func() { syscall.Munmap(m) }
}

// TestW4Rows1VNNI checks the one-token row-block kernel against the
// one-row kernel w4TileVNNI bit for bit (they share the lanes and the float
// chain), for rows of one, two, three and many units and groups of 64 to
// 256, with the scales and biases placed against inaccessible pages on
// either side: the kernel reads a unit's scale and bias as a dword with
// the previous unit's, and must read nothing outside the row's.
func TestW4Rows1VNNI(t *testing.T) {
	k, err := kernelsFor(ISAVNNI)
	if err != nil {
		t.Skipf("this machine does not run the AVX-512 VNNI kernels: %v", err)
	}
	rng := rand.New(rand.NewPCG(31, 32))
	for _, c := range []struct{ out, in, group int }{
		{1, 64, 64}, {3, 64, 64}, {5, 128, 64}, {7, 192, 64}, {17, 2048, 64},
		{4, 128, 128}, {6, 384, 128}, {3, 512, 256},
	} {
		for _, scalesAtEnd := range []bool{true, false} {
			name := fmt.Sprintf("%dx%d-g%d-scales-at-end-%v", c.out, c.in, c.group, scalesAtEnd)
			tm := newTestMatrix(rng, model.Affine, c.out, c.in, 4, c.group)
			w := tm.m
			scales, freeS := guardedBytes(t, len(w.Scales), scalesAtEnd)
			defer freeS()
			biases, freeB := guardedBytes(t, len(w.Biases), !scalesAtEnd)
			defer freeB()
			copy(scales, w.Scales)
			copy(biases, w.Biases)
			w.Scales, w.Biases = scales, biases
			l, ok := newQ8Layout(&w, true)
			if !ok {
				t.Fatalf("%s: no int16 layout", name)
			}
			rec := make([]byte, l.recordBytes)
			l.quantize(rec, randomVector(rng, c.in), &k.q8)
			groups := c.in / c.group
			want := make([]float32, c.out)
			for o := range c.out {
				k.q8.w4(&q8Tile{w: &w.Data[o*l.rowBytes], scales: &u16s(w.Scales)[o*groups], biases: &u16s(w.Biases)[o*groups],
					units: l.units, chunks: l.chunks, x: &rec[0], xStride: l.recordBytes, tokens: 1,
					out: &want[o], outStride: 4, rows: 1})
			}
			got := make([]float32, c.out)
			k.q8.w4Rows[0](&q8Tile{w: &w.Data[0], scales: &u16s(w.Scales)[0], biases: &u16s(w.Biases)[0],
				units: l.units, chunks: l.chunks, x: &rec[0], xStride: l.recordBytes, tokens: 1,
				out: &got[0], outStride: 4 * c.out, rows: c.out})
			for o := range c.out {
				if math.Float32bits(got[o]) != math.Float32bits(want[o]) {
					t.Fatalf("%s: row %d gives %v, the one-row kernel %v", name, o, got[o], want[o])
				}
			}
		}
	}
}
