package model

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/suzuran-app/suzuran/engine/safetensors"
)

// This file is the plain reference for reading a Matrix element by element.
// It is written for clarity, not speed: backends have their own kernels that
// read the packed data in place, and tests compare them against Row and At.

// RowBytes is the number of bytes of Data one row occupies.
func (m *Matrix) RowBytes() int {
	switch m.DType {
	case BF16, F16:
		return 2 * m.In
	case F32:
		return 4 * m.In
	case Affine:
		return m.In * m.Bits / 8
	}
	return 0
}

// Validate checks that the slices are as long as the shape and format need,
// so that Row and At cannot index out of range.
func (m *Matrix) Validate() error {
	if m.Out <= 0 || m.In <= 0 {
		return fmt.Errorf("matrix %s: shape [%d,%d] is empty", m.Name, m.Out, m.In)
	}
	if m.DType == Affine {
		if m.Bits != 4 && m.Bits != 8 {
			return fmt.Errorf("matrix %s: %d-bit affine quantization is not supported (4 or 8)", m.Name, m.Bits)
		}
		if m.GroupSize <= 0 || m.In%m.GroupSize != 0 {
			return fmt.Errorf("matrix %s: group size %d does not divide the input width %d", m.Name, m.GroupSize, m.In)
		}
		g := m.Out * (m.In / m.GroupSize) * 2
		if len(m.Scales) != g || len(m.Biases) != g {
			return fmt.Errorf("matrix %s: scales/biases are %d/%d bytes, want %d", m.Name, len(m.Scales), len(m.Biases), g)
		}
	}
	rb := m.RowBytes()
	if rb == 0 {
		return fmt.Errorf("matrix %s: unknown dtype %v", m.Name, m.DType)
	}
	if len(m.Data) != m.Out*rb {
		return fmt.Errorf("matrix %s: data is %d bytes, shape [%d,%d] of %v needs %d", m.Name, len(m.Data), m.Out, m.In, m.DType, m.Out*rb)
	}
	return nil
}

// At returns element (i, j) as f32, dequantizing when the matrix is Affine.
func (m *Matrix) At(i, j int) float32 {
	if i < 0 || i >= m.Out || j < 0 || j >= m.In {
		panic(fmt.Sprintf("matrix %s: index (%d,%d) outside [%d,%d]", m.Name, i, j, m.Out, m.In))
	}
	row := m.Data[i*m.RowBytes():]
	switch m.DType {
	case BF16:
		return safetensors.BF16ToFloat32(binary.LittleEndian.Uint16(row[2*j:]))
	case F16:
		return safetensors.F16ToFloat32(binary.LittleEndian.Uint16(row[2*j:]))
	case F32:
		return math.Float32frombits(binary.LittleEndian.Uint32(row[4*j:]))
	case Affine:
		per := 32 / m.Bits
		word := binary.LittleEndian.Uint32(row[4*(j/per):])
		q := (word >> (uint(m.Bits) * uint(j%per))) & (1<<uint(m.Bits) - 1)
		g := i*(m.In/m.GroupSize) + j/m.GroupSize
		scale := safetensors.BF16ToFloat32(binary.LittleEndian.Uint16(m.Scales[2*g:]))
		bias := safetensors.BF16ToFloat32(binary.LittleEndian.Uint16(m.Biases[2*g:]))
		return scale*float32(q) + bias
	}
	panic(fmt.Sprintf("matrix %s: unknown dtype %v", m.Name, m.DType))
}

// Row writes row i, dequantized to f32, into dst[:In].
func (m *Matrix) Row(i int, dst []float32) {
	if len(dst) < m.In {
		panic(fmt.Sprintf("matrix %s: Row needs %d floats, dst has %d", m.Name, m.In, len(dst)))
	}
	if i < 0 || i >= m.Out {
		panic(fmt.Sprintf("matrix %s: row %d outside [0,%d)", m.Name, i, m.Out))
	}
	rb := m.RowBytes()
	row := m.Data[i*rb : (i+1)*rb]
	switch m.DType {
	case BF16, F16, F32:
		var dt safetensors.DType
		switch m.DType {
		case BF16:
			dt = safetensors.BF16
		case F16:
			dt = safetensors.F16
		default:
			dt = safetensors.F32
		}
		if err := safetensors.DecodeFloat32(dst[:m.In], dt, row); err != nil {
			panic(err)
		}
	case Affine:
		per := 32 / m.Bits
		mask := uint32(1)<<uint(m.Bits) - 1
		groups := m.In / m.GroupSize
		var scale, bias float32
		for j := 0; j < m.In; j++ {
			if j%m.GroupSize == 0 {
				g := i*groups + j/m.GroupSize
				scale = safetensors.BF16ToFloat32(binary.LittleEndian.Uint16(m.Scales[2*g:]))
				bias = safetensors.BF16ToFloat32(binary.LittleEndian.Uint16(m.Biases[2*g:]))
			}
			word := binary.LittleEndian.Uint32(row[4*(j/per):])
			q := (word >> (uint(m.Bits) * uint(j%per))) & mask
			dst[j] = scale*float32(q) + bias
		}
	default:
		panic(fmt.Sprintf("matrix %s: unknown dtype %v", m.Name, m.DType))
	}
}

// MulVec computes y = W·x (y[i] = Σ_j W[i,j]·x[j]) in f64 accumulation, row
// by row through Row. It is the slow reference against which kernels are
// tested, not a kernel.
func (m *Matrix) MulVec(y, x []float32) {
	row := make([]float32, m.In)
	for i := 0; i < m.Out; i++ {
		m.Row(i, row)
		var s float64
		for j, w := range row {
			s += float64(w) * float64(x[j])
		}
		y[i] = float32(s)
	}
}
