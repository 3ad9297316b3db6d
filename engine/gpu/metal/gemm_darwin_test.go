//go:build darwin

package metal

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/suzuran-app/suzuran/engine/gpu/device"
)

// TestHalfGEMMKeepsLowPart runs the half-operand GEMM on the GPU with
// activations that need both halves of the hi + lo pair.
func TestHalfGEMMKeepsLowPart(t *testing.T) {
	d, err := NewDefault()
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	requireSupportedGPU(t, d)
	halfGEMMKeepsLowPart(t, d)
}

// halfGEMMKeepsLowPart runs gemm_half_f32_f32 on dev with activations that
// half cannot hold, x = b·(1 + 2⁻¹³) with b of 4 significant bits: hi is b,
// lo is b·2⁻¹³. Weights are positive quarters (exact in half), so a kernel
// that kept only hi would be low by 2⁻¹³ ≈ 1.2e-4 of every output, while
// one that keeps hi + lo is off only by its f32 sums: 1e-6 of the output.
// On a Mac this checks that Apple's compiler (fast math) keeps the split.
func halfGEMMKeepsLowPart(t *testing.T, dev device.Device) {
	t.Helper()
	const in, out, rows = 40, 33, 70 // none a tile multiple
	p, err := dev.Pipeline("gemm_half_f32_f32")
	if err != nil {
		t.Fatal(err)
	}
	buf := func(n int) device.Buffer {
		b, err := dev.NewBuffer(n)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(b.Release)
		return b
	}
	w, x, y := buf(4*out*in), buf(4*rows*in), buf(4*rows*out)
	wv := make([]float32, out*in)
	for i := range wv {
		wv[i] = 0.25 * float32(1+(i/in+i%in)%3)
	}
	xv := make([]float32, rows*in)
	for i := range xv {
		b := 1 + float32((i/in)%7)/8 + float32(i%in%4)
		xv[i] = b * (1 + 1.0/8192)
	}
	put := func(dst []byte, v []float32) {
		for i, f := range v {
			binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(f))
		}
	}
	put(w.Bytes(), wv)
	put(x.Bytes(), xv)
	params := make([]byte, 24)
	for i, v := range []uint32{in, out, rows, in, out, 0} {
		binary.LittleEndian.PutUint32(params[4*i:], v)
	}
	cb, err := dev.NewCommandBuffer()
	if err != nil {
		t.Fatal(err)
	}
	cb.Dispatch(device.Dispatch{Pipeline: p,
		Threadgroups: device.Size3{X: (out + 31) / 32, Y: (rows + 63) / 64, Z: 1},
		Threads:      device.Size3{X: 128, Y: 1, Z: 1},
		Args: []device.Arg{{Index: 0, Bytes: params}, {Index: 1, Buffer: w}, {Index: 2, Buffer: w},
			{Index: 3, Buffer: w}, {Index: 4, Buffer: x}, {Index: 5, Buffer: y}}})
	cb.Commit()
	if err := cb.Wait(); err != nil {
		t.Fatal(err)
	}
	worst := 0.0
	for m := 0; m < rows; m++ {
		for n := 0; n < out; n++ {
			var want float64
			for k := 0; k < in; k++ {
				want += float64(wv[n*in+k]) * float64(xv[m*in+k])
			}
			got := float64(math.Float32frombits(binary.LittleEndian.Uint32(y.Bytes()[4*(m*out+n):])))
			rel := math.Abs(got-want) / want
			if rel > 1e-6 {
				t.Fatalf("y[%d,%d] = %v, want %v (relative error %.3g > 1e-6: the low halves of x were lost)", m, n, got, want, rel)
			}
			worst = max(worst, rel)
		}
	}
	t.Logf("%s: half GEMM with hi + lo activations, max relative error %.3g", dev.Name(), worst)
}
