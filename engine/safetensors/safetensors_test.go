package safetensors

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// rawFile builds a file from a header string and a data section.
func rawFile(header string, data []byte) []byte {
	var b bytes.Buffer
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(header)))
	b.Write(n[:])
	b.WriteString(header)
	b.Write(data)
	return b.Bytes()
}

func TestWriteRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.safetensors")
	f32 := make([]byte, 4*6)
	if err := EncodeFloat32(f32, F32, []float32{1, -2, 3.5, 0, 1e-3, -7}); err != nil {
		t.Fatal(err)
	}
	bf := make([]byte, 2*3)
	if err := EncodeFloat32(bf, BF16, []float32{1, -0.5, 256}); err != nil {
		t.Fatal(err)
	}
	ids := []byte{1, 0, 0, 0, 255, 255, 255, 255}
	specs := []TensorSpec{
		{Name: "a", DType: F32, Shape: []int{2, 3}},
		{Name: "b", DType: BF16, Shape: []int{3}},
		{Name: "empty", DType: F32, Shape: []int{0, 4}},
		{Name: "ids", DType: I32, Shape: []int{2}},
	}
	if err := WriteFile(path, specs, [][]byte{f32, bf, nil, ids}, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Header.DataOffset%8 != 0 {
		t.Errorf("data section at %d, want 8-byte aligned", f.Header.DataOffset)
	}
	if f.Header.Metadata["format"] != "pt" {
		t.Errorf("metadata %v", f.Header.Metadata)
	}
	a, ok := f.Tensor("a")
	if !ok || a.DType != F32 || len(a.Shape) != 2 || a.Shape[1] != 3 {
		t.Fatalf("a = %+v", a)
	}
	v, err := ToFloat32(a)
	if err != nil || v[2] != 3.5 || v[5] != -7 {
		t.Fatalf("a values %v %v", v, err)
	}
	b, _ := f.Tensor("b")
	v, _ = ToFloat32(b)
	if v[0] != 1 || v[1] != -0.5 || v[2] != 256 {
		t.Errorf("b values %v", v)
	}
	id, _ := f.Tensor("ids")
	if int32(binary.LittleEndian.Uint32(id.Data[4:])) != -1 {
		t.Errorf("ids %v", id.Data)
	}
	if e, _ := f.Tensor("empty"); len(e.Data) != 0 {
		t.Errorf("empty tensor has %d bytes", len(e.Data))
	}
	// No temporary file is left beside the result.
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries, want only the file", len(entries))
	}
}

func TestWriterAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.safetensors")
	w, err := Create(path, []TensorSpec{{Name: "a", DType: F32, Shape: []int{4}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(make([]byte, 8)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err == nil {
		t.Fatal("Close of a half-written file succeeded")
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("half-written file exists under the final name: %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("temporary file left behind: %v", entries)
	}
	w, err = Create(path, []TensorSpec{{Name: "a", DType: F32, Shape: []int{1}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(make([]byte, 8)); err == nil {
		t.Error("writing past the declared size succeeded")
	}
	w.Abort()
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("aborted file left behind: %v", entries)
	}
	// A folder that does not exist is reported under the name the caller
	// gave, not the temporary file's.
	missing := filepath.Join(dir, "no-such-folder", "x.safetensors")
	_, err = Create(missing, []TensorSpec{{Name: "a", DType: F32, Shape: []int{1}}}, nil)
	if err == nil || !strings.Contains(err.Error(), missing) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Create in a missing folder: %v, want an error naming %s", err, missing)
	}
}

func TestParseHeaderErrors(t *testing.T) {
	ok := `{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`
	cases := []struct {
		name string
		file []byte
		want string
	}{
		{"short", []byte{1, 2, 3}, "shorter than"},
		{"huge length", append([]byte{0, 0, 0, 0, 0, 0, 0, 1}, make([]byte, 16)...), "exceeds"},
		{"length past end", rawFile(ok, make([]byte, 8))[:20], "past the end"},
		{"not json", rawFile(`{"a":`, nil), "JSON"},
		{"not object", rawFile(`[1,2]`, nil), "JSON object"},
		{"data truncated", rawFile(ok, make([]byte, 4)), "truncated"},
		{"size mismatch", rawFile(`{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}`, make([]byte, 8)), "needs 12 bytes"},
		{"overlap", rawFile(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, make([]byte, 8)), "overlap"},
		{"descending", rawFile(`{"a":{"dtype":"F32","shape":[0],"data_offsets":[8,4]}}`, make([]byte, 8)), "ascending"},
		{"bad dtype", rawFile(`{"a":{"dtype":"F31","shape":[2],"data_offsets":[0,8]}}`, make([]byte, 8)), "unknown dtype"},
		{"negative dim", rawFile(`{"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}}`, make([]byte, 8)), "invalid dimension"},
		{"overflow", rawFile(`{"a":{"dtype":"F32","shape":[2147483647,2147483647,2147483647],"data_offsets":[0,8]}}`, make([]byte, 8)), "too large"},
		{"offsets", rawFile(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0]}}`, make([]byte, 8)), "two integers"},
		{"metadata", rawFile(`{"__metadata__":{"x":1}}`, nil), "__metadata__"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseHeader(tc.file, int64(len(tc.file)))
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want ErrInvalid mentioning %q", err, tc.want)
			}
		})
	}
	if _, err := ParseHeader(rawFile(ok, make([]byte, 8)), 8+int64(len(ok))+8); err != nil {
		t.Errorf("valid header rejected: %v", err)
	}
}

func TestOpenTruncated(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.safetensors")
	if err := WriteFile(path, []TensorSpec{{Name: "a", DType: BF16, Shape: []int{64}}}, [][]byte{make([]byte, 128)}, nil); err != nil {
		t.Fatal(err)
	}
	full, _ := os.ReadFile(path)
	for _, n := range []int{0, 5, 8, 20, len(full) - 1} {
		p := filepath.Join(dir, "t.safetensors")
		os.WriteFile(p, full[:n], 0o644)
		if f, err := Open(p); err == nil {
			f.Close()
			t.Errorf("truncated to %d bytes: no error", n)
		} else if !errors.Is(err, ErrInvalid) {
			t.Errorf("truncated to %d bytes: %v is not ErrInvalid", n, err)
		}
	}
}

func TestConversions(t *testing.T) {
	// F16 special values and a subnormal, against their IEEE definitions.
	for _, c := range []struct {
		h uint16
		f float32
	}{{0x3c00, 1}, {0xc000, -2}, {0x7bff, 65504}, {0x0001, float32(math.Ldexp(1, -24))}, {0x0400, float32(math.Ldexp(1, -14))}, {0x3555, 0.333251953125}} {
		if got := F16ToFloat32(c.h); got != c.f {
			t.Errorf("F16ToFloat32(%#x) = %v, want %v", c.h, got, c.f)
		}
		if got := Float32ToF16(c.f); got != c.h {
			t.Errorf("Float32ToF16(%v) = %#x, want %#x", c.f, got, c.h)
		}
	}
	if !math.IsInf(float64(F16ToFloat32(0x7c00)), 1) || !math.IsNaN(float64(F16ToFloat32(0x7e00))) {
		t.Error("f16 inf/nan")
	}
	// Every bf16 value round-trips exactly; rounding is to nearest even.
	for b := 0; b < 1<<16; b++ {
		f := BF16ToFloat32(uint16(b))
		if math.IsNaN(float64(f)) {
			continue
		}
		if Float32ToBF16(f) != uint16(b) {
			t.Fatalf("bf16 %#x does not round-trip", b)
		}
	}
	if got := Float32ToBF16(math.Float32frombits(0x3f808000)); got != 0x3f80 {
		t.Errorf("tie rounds to %#x, want even 0x3f80", got)
	}
	if got := Float32ToBF16(math.Float32frombits(0x3f818000)); got != 0x3f82 {
		t.Errorf("tie rounds to %#x, want even 0x3f82", got)
	}
	// Every finite f16 round-trips through f32.
	for h := 0; h < 1<<16; h++ {
		f := F16ToFloat32(uint16(h))
		if math.IsNaN(float64(f)) {
			continue
		}
		if Float32ToF16(f) != uint16(h) {
			t.Fatalf("f16 %#x → %v → %#x", h, f, Float32ToF16(f))
		}
	}
}

func FuzzParseHeader(f *testing.F) {
	f.Add(rawFile(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, make([]byte, 8)))
	f.Add(rawFile(`{"__metadata__":{"format":"pt"},"a":{"dtype":"BF16","shape":[2,2],"data_offsets":[0,8]},"b":{"dtype":"U32","shape":[1],"data_offsets":[8,12]}}`, make([]byte, 12)))
	f.Add(rawFile(`{"a":{"dtype":"F32","shape":[],"data_offsets":[0,4]}}  `, make([]byte, 4)))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := ParseHeader(data, int64(len(data)))
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not match ErrInvalid", err)
			}
			return
		}
		// Whatever parses must describe tensors inside the data section
		// whose sizes match their shapes, so slicing can never panic.
		dataLen := int64(len(data)) - h.DataOffset
		var prevEnd int64
		for _, ti := range h.Tensors {
			if ti.Begin < 0 || ti.End < ti.Begin || ti.End > dataLen {
				t.Fatalf("tensor %s [%d,%d) outside %d bytes", ti.Name, ti.Begin, ti.End, dataLen)
			}
			if int64(ti.NumElements()*ti.DType.Size()) != ti.End-ti.Begin {
				t.Fatalf("tensor %s size mismatch", ti.Name)
			}
			if ti.End > ti.Begin && ti.Begin < prevEnd {
				t.Fatalf("tensor %s overlaps", ti.Name)
			}
			if ti.End > ti.Begin {
				prevEnd = ti.End
			}
			_ = data[h.DataOffset+ti.Begin : h.DataOffset+ti.End]
		}
	})
}

func TestOverlapAcrossEmptyTensor(t *testing.T) {
	file := rawFile(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"z":{"dtype":"F32","shape":[0],"data_offsets":[4,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, make([]byte, 8))
	if _, err := ParseHeader(file, int64(len(file))); err == nil || !strings.Contains(err.Error(), "overlap") {
		t.Errorf("overlap hidden behind an empty tensor: err = %v", err)
	}
}

func TestUnsupportedDType(t *testing.T) {
	file := rawFile(`{"d":{"dtype":"F64","shape":[1],"data_offsets":[0,8]},"e":{"dtype":"F8_E4M3","shape":[2],"data_offsets":[8,10]}}`, make([]byte, 10))
	h, err := ParseHeader(file, int64(len(file)))
	if err != nil {
		t.Fatalf("a header with F64 and F8_E4M3 must parse (the dtypes are known): %v", err)
	}
	for _, ti := range h.Tensors {
		if ti.DType.Supported() {
			t.Errorf("%s: %v reported as supported", ti.Name, ti.DType)
		}
		tn := Tensor{Name: ti.Name, File: "x.safetensors", DType: ti.DType, Shape: ti.Shape, Data: file[h.DataOffset+ti.Begin : h.DataOffset+ti.End]}
		if _, err := ToFloat32(tn); !errors.Is(err, ErrUnsupportedDType) || !strings.Contains(err.Error(), ti.DType.String()) {
			t.Errorf("%s: error %v, want ErrUnsupportedDType naming %v", ti.Name, err, ti.DType)
		}
	}
}
