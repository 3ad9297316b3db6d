package model

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/suzuran-app/suzuran/engine/safetensors"
)

// packAffine quantizes codes q [out][in] by hand: element j of a row goes to
// bits [bits·(j%per), …) of word j/per, low bits first.
func packAffine(q [][]uint32, bits, group int, scale, bias []float32) Matrix {
	out, in := len(q), len(q[0])
	per := 32 / bits
	m := Matrix{Name: "test", Out: out, In: in, DType: Affine, Bits: bits, GroupSize: group}
	m.Data = make([]byte, out*in*bits/8)
	for i := range q {
		for j, c := range q[i] {
			w := (i*in + j) / per
			v := binary.LittleEndian.Uint32(m.Data[4*w:])
			v |= c << (uint(bits) * uint(j%per))
			binary.LittleEndian.PutUint32(m.Data[4*w:], v)
		}
	}
	m.Scales = make([]byte, 2*len(scale))
	m.Biases = make([]byte, 2*len(bias))
	safetensors.EncodeFloat32(m.Scales, safetensors.BF16, scale)
	safetensors.EncodeFloat32(m.Biases, safetensors.BF16, bias)
	return m
}

func TestAffineRow(t *testing.T) {
	for _, bits := range []int{4, 8} {
		const out, in, group = 3, 128, 64
		q := make([][]uint32, out)
		for i := range q {
			q[i] = make([]uint32, in)
			for j := range q[i] {
				q[i][j] = uint32(i*7+j*5) % (1 << bits)
			}
		}
		// One scale and bias per (row, group); powers of two keep the
		// expected values exact in bf16 and f32.
		scale := []float32{0.5, 0.25, 1, 2, 0.125, 4}
		bias := []float32{-1, 2, 0, -8, 0.5, 16}
		m := packAffine(q, bits, group, scale, bias)
		if err := m.Validate(); err != nil {
			t.Fatal(err)
		}
		row := make([]float32, in)
		for i := 0; i < out; i++ {
			m.Row(i, row)
			for j := 0; j < in; j++ {
				g := i*(in/group) + j/group
				want := scale[g]*float32(q[i][j]) + bias[g]
				if row[j] != want || m.At(i, j) != want {
					t.Fatalf("%d-bit (%d,%d): Row %v At %v, want %v", bits, i, j, row[j], m.At(i, j), want)
				}
			}
		}
		x := make([]float32, in)
		for j := range x {
			x[j] = float32(j%3) - 1
		}
		y := make([]float32, out)
		m.MulVec(y, x)
		for i := 0; i < out; i++ {
			var want float64
			for j := 0; j < in; j++ {
				want += float64(m.At(i, j)) * float64(x[j])
			}
			// The weights are multiples of 1/8 below 2¹¹ and x is -1, 0
			// or 1, so every partial sum is exact in f32 whatever the
			// order: 1e-6 relative (plus 1e-6 for rows summing to zero)
			// admits nothing but the float64 reference's own rounding.
			if math.Abs(float64(y[i])-want) > 1e-6*math.Abs(want)+1e-6 {
				t.Errorf("%d-bit MulVec row %d: %v, want %v", bits, i, y[i], want)
			}
		}
	}
}

func TestFloatRow(t *testing.T) {
	vals := []float32{1, -2, 0.5, 3, 0.25, -0.125}
	for _, c := range []struct {
		dt  DType
		sdt safetensors.DType
	}{{BF16, safetensors.BF16}, {F16, safetensors.F16}, {F32, safetensors.F32}} {
		m := Matrix{Name: "f", Out: 2, In: 3, DType: c.dt, Data: make([]byte, len(vals)*c.sdt.Size())}
		safetensors.EncodeFloat32(m.Data, c.sdt, vals)
		if err := m.Validate(); err != nil {
			t.Fatal(err)
		}
		row := make([]float32, 3)
		m.Row(1, row)
		if row[0] != 3 || row[1] != 0.25 || row[2] != -0.125 || m.At(0, 1) != -2 {
			t.Errorf("%v: row %v, At(0,1) %v", c.dt, row, m.At(0, 1))
		}
	}
}

func TestValidateRejects(t *testing.T) {
	good := packAffine([][]uint32{make([]uint32, 64)}, 4, 64, []float32{1}, []float32{0})
	cases := map[string]func(m *Matrix){
		"short data":   func(m *Matrix) { m.Data = m.Data[:4] },
		"bits":         func(m *Matrix) { m.Bits = 3 },
		"group":        func(m *Matrix) { m.GroupSize = 48 },
		"short scales": func(m *Matrix) { m.Scales = nil },
		"empty":        func(m *Matrix) { m.Out = 0 },
	}
	for name, edit := range cases {
		m := good
		edit(&m)
		if m.Validate() == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
