package safetensors

import "fmt"

// DType is a safetensors element type.
type DType int

// The element types of the format. Only the first six are supported by the
// engine; the others are recognised so that an error can name them.
const (
	BF16 DType = iota
	F16
	F32
	U32
	I32
	U8
	// Known to the format but not used by any supported checkpoint.
	F64
	I64
	U64
	I16
	U16
	I8
	Bool
	F8E4M3
	F8E5M2
)

var dtypeNames = [...]string{
	BF16: "BF16", F16: "F16", F32: "F32", U32: "U32", I32: "I32", U8: "U8",
	F64: "F64", I64: "I64", U64: "U64", I16: "I16", U16: "U16", I8: "I8",
	Bool: "BOOL", F8E4M3: "F8_E4M3", F8E5M2: "F8_E5M2",
}

var dtypeSizes = [...]int{
	BF16: 2, F16: 2, F32: 4, U32: 4, I32: 4, U8: 1,
	F64: 8, I64: 8, U64: 8, I16: 2, U16: 2, I8: 1,
	Bool: 1, F8E4M3: 1, F8E5M2: 1,
}

func (d DType) String() string {
	if d >= 0 && int(d) < len(dtypeNames) {
		return dtypeNames[d]
	}
	return fmt.Sprintf("DType(%d)", int(d))
}

// Size is the number of bytes of one element.
func (d DType) Size() int {
	if d >= 0 && int(d) < len(dtypeSizes) {
		return dtypeSizes[d]
	}
	return 0
}

// Supported reports whether the engine reads tensors of this type.
func (d DType) Supported() bool { return d >= BF16 && d <= U8 }

// ParseDType maps the header's dtype string to a DType. Names the format
// defines but the engine does not use parse successfully (so that the error
// can come later and name the tensor); unknown names are an error.
func ParseDType(s string) (DType, error) {
	for i, n := range dtypeNames {
		if n == s {
			return DType(i), nil
		}
	}
	return 0, fmt.Errorf("unknown dtype %q", s)
}
