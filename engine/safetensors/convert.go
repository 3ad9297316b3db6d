package safetensors

import (
	"encoding/binary"
	"fmt"
	"math"
)

// BF16ToFloat32 widens one bfloat16 value (its 16 raw bits) exactly.
func BF16ToFloat32(b uint16) float32 { return math.Float32frombits(uint32(b) << 16) }

// Float32ToBF16 rounds to the nearest bfloat16, ties to even; NaN stays NaN.
func Float32ToBF16(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 {
		return uint16(u>>16) | 0x40 // quiet NaN
	}
	u += 0x7fff + (u>>16)&1
	return uint16(u >> 16)
}

// F16ToFloat32 widens one IEEE half-precision value exactly, subnormals,
// infinities and NaN included.
func F16ToFloat32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // inf or NaN
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case exp != 0:
		return math.Float32frombits(sign | (exp+112)<<23 | mant<<13)
	case mant == 0:
		return math.Float32frombits(sign)
	}
	// Subnormal half: value = mant · 2^-24, exact in float32.
	f := float32(mant) * (1.0 / (1 << 24))
	if sign != 0 {
		f = -f
	}
	return f
}

// Float32ToF16 rounds to the nearest half-precision value, ties to even.
func Float32ToF16(f float32) uint16 {
	u := math.Float32bits(f)
	sign := uint16(u>>16) & 0x8000
	exp := int32(u>>23) & 0xff
	mant := u & 0x7fffff
	if exp == 0xff {
		if mant != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 {
		if e < -10 {
			return sign
		}
		mant |= 0x800000
		shift := uint32(14 - e)
		half := uint32(1) << (shift - 1)
		r := mant >> shift
		rem := mant & (1<<shift - 1)
		if rem > half || (rem == half && r&1 == 1) {
			r++
		}
		return sign | uint16(r)
	}
	r := uint32(e)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && r&1 == 1) {
		r++ // may carry into the exponent, which is the correct rounding
	}
	return sign | uint16(r)
}

// ToFloat32 converts a whole tensor of a floating-point type to f32. It
// copies, so it is meant for small vectors (norms, biases, conv kernels),
// never for weight matrices.
func ToFloat32(t Tensor) ([]float32, error) {
	n := t.NumElements()
	out := make([]float32, n)
	if err := DecodeFloat32(out, t.DType, t.Data); err != nil {
		return nil, fmt.Errorf("%s: tensor %s: %w", t.File, t.Name, err)
	}
	return out, nil
}

// DecodeFloat32 converts len(dst) elements of src, stored as dtype, to f32.
func DecodeFloat32(dst []float32, dtype DType, src []byte) error {
	if len(src) < len(dst)*dtype.Size() || dtype.Size() == 0 {
		return fmt.Errorf("need %d %s elements, have %d bytes", len(dst), dtype, len(src))
	}
	switch dtype {
	case BF16:
		for i := range dst {
			dst[i] = BF16ToFloat32(binary.LittleEndian.Uint16(src[2*i:]))
		}
	case F16:
		for i := range dst {
			dst[i] = F16ToFloat32(binary.LittleEndian.Uint16(src[2*i:]))
		}
	case F32:
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
		}
	default:
		if !dtype.Supported() {
			return fmt.Errorf("%w %s: the engine reads BF16, F16, F32, U32, I32 and U8", ErrUnsupportedDType, dtype)
		}
		return fmt.Errorf("dtype %s is not a floating-point type (BF16, F16, F32)", dtype)
	}
	return nil
}

// EncodeFloat32 writes src as dtype (BF16, F16 or F32) into dst, rounding to
// nearest even; dst must hold len(src)·dtype.Size() bytes.
func EncodeFloat32(dst []byte, dtype DType, src []float32) error {
	if len(dst) < len(src)*dtype.Size() || dtype.Size() == 0 {
		return fmt.Errorf("need %d bytes for %d %s elements, have %d", len(src)*dtype.Size(), len(src), dtype, len(dst))
	}
	switch dtype {
	case BF16:
		for i, f := range src {
			binary.LittleEndian.PutUint16(dst[2*i:], Float32ToBF16(f))
		}
	case F16:
		for i, f := range src {
			binary.LittleEndian.PutUint16(dst[2*i:], Float32ToF16(f))
		}
	case F32:
		for i, f := range src {
			binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(f))
		}
	default:
		return fmt.Errorf("cannot encode float32 as %s", dtype)
	}
	return nil
}
