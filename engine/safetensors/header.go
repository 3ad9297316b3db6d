package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strings"
)

// ErrInvalid is matched (errors.Is) by every error that reports a malformed
// file: a header that is too short or too long, JSON that does not parse,
// offsets outside the data section, overlapping tensors, sizes that disagree
// with shapes.
var ErrInvalid = errors.New("invalid safetensors file")

// ErrUnsupportedDType is matched by the error for a tensor whose dtype the
// format defines but the engine does not read (F64, I64, F8_E4M3, …).
var ErrUnsupportedDType = errors.New("unsupported dtype")

// MaxHeaderSize bounds the JSON header. Real checkpoints stay far below it
// (the 4-bit Qwen3.6-35B-A3B shard headers are about 200 KB); the bound keeps
// a corrupt length field from making the reader allocate gigabytes.
const MaxHeaderSize = 100 << 20

// TensorInfo is one header entry. Begin and End are byte offsets relative to
// the start of the data section.
type TensorInfo struct {
	Name       string
	DType      DType
	Shape      []int
	Begin, End int64
}

// NumElements is the product of the shape (1 for a scalar).
func (t TensorInfo) NumElements() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Header is a parsed and validated safetensors header.
type Header struct {
	Tensors    []TensorInfo // in data order (ascending Begin)
	Metadata   map[string]string
	DataOffset int64 // file offset of the data section: 8 + header length
}

type headerEntry struct {
	DType       string          `json:"dtype"`
	Shape       []int64         `json:"shape"`
	DataOffsets json.RawMessage `json:"data_offsets"`
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// ParseHeader parses and validates the header of a safetensors file whose
// complete contents (or at least its first 8+N bytes, with fileSize the real
// length) are in file. It never panics on any input.
func ParseHeader(file []byte, fileSize int64) (*Header, error) {
	if fileSize < 8 || int64(len(file)) < 8 {
		return nil, invalid("file is %d bytes, shorter than the 8-byte header length", fileSize)
	}
	n := binary.LittleEndian.Uint64(file)
	if n < 2 {
		return nil, invalid("header length %d is too small for a JSON object", n)
	}
	if n > MaxHeaderSize {
		return nil, invalid("header length %d exceeds %d bytes: the file is corrupt or not safetensors", n, MaxHeaderSize)
	}
	if int64(n) > fileSize-8 {
		return nil, invalid("header length %d runs past the end of the %d-byte file: the file is truncated", n, fileSize)
	}
	if uint64(len(file)) < 8+n {
		return nil, invalid("only %d of the %d header bytes are available", len(file)-8, n)
	}
	raw := file[8 : 8+n]
	// Writers pad the JSON with trailing spaces to align the data section.
	raw = bytes.TrimRight(raw, " \x00")
	if len(raw) == 0 || raw[0] != '{' {
		return nil, invalid("header does not start with a JSON object")
	}
	var entries map[string]json.RawMessage
	if err := json.Unmarshal(raw, &entries); err != nil {
		return nil, invalid("header JSON: %v", err)
	}
	h := &Header{DataOffset: int64(8 + n)}
	dataSize := fileSize - h.DataOffset
	for name, msg := range entries {
		if name == "__metadata__" {
			if err := json.Unmarshal(msg, &h.Metadata); err != nil {
				return nil, invalid("__metadata__ must be an object of strings: %v", err)
			}
			continue
		}
		info, err := parseEntry(name, msg, dataSize)
		if err != nil {
			return nil, err
		}
		h.Tensors = append(h.Tensors, info)
	}
	slices.SortFunc(h.Tensors, func(a, b TensorInfo) int {
		if a.Begin != b.Begin {
			if a.Begin < b.Begin {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Name, b.Name)
	})
	// Zero-length tensors occupy no bytes and cannot overlap anything; the
	// others must not start before the furthest end seen so far.
	var last *TensorInfo
	for i := range h.Tensors {
		cur := &h.Tensors[i]
		if cur.End == cur.Begin {
			continue
		}
		if last != nil && cur.Begin < last.End {
			return nil, invalid("tensors %s [%d,%d) and %s [%d,%d) overlap", last.Name, last.Begin, last.End, cur.Name, cur.Begin, cur.End)
		}
		last = cur
	}
	return h, nil
}

func parseEntry(name string, msg json.RawMessage, dataSize int64) (TensorInfo, error) {
	var e headerEntry
	dec := json.NewDecoder(bytes.NewReader(msg))
	if err := dec.Decode(&e); err != nil {
		return TensorInfo{}, invalid("tensor %s: header entry: %v", name, err)
	}
	if e.DType == "" {
		return TensorInfo{}, invalid("tensor %s: header entry has no dtype", name)
	}
	dt, err := ParseDType(e.DType)
	if err != nil {
		return TensorInfo{}, invalid("tensor %s: %v", name, err)
	}
	var offs []int64
	if err := json.Unmarshal(e.DataOffsets, &offs); err != nil || len(offs) != 2 {
		return TensorInfo{}, invalid("tensor %s: data_offsets must be two integers, got %s", name, clip(e.DataOffsets))
	}
	begin, end := offs[0], offs[1]
	if begin < 0 || end < begin {
		return TensorInfo{}, invalid("tensor %s: data_offsets [%d,%d] are not an ascending pair", name, begin, end)
	}
	if end > dataSize {
		return TensorInfo{}, invalid("tensor %s: data_offsets [%d,%d] run past the %d-byte data section: the file is truncated", name, begin, end, dataSize)
	}
	shape := make([]int, len(e.Shape))
	elems := uint64(1)
	for i, d := range e.Shape {
		if d < 0 || d > math.MaxInt32 {
			return TensorInfo{}, invalid("tensor %s: shape %v has an invalid dimension", name, e.Shape)
		}
		shape[i] = int(d)
		hi, lo := bits.Mul64(elems, uint64(d))
		if hi != 0 || lo > math.MaxInt64/8 {
			return TensorInfo{}, invalid("tensor %s: shape %v is too large", name, e.Shape)
		}
		elems = lo
	}
	if want := int64(elems) * int64(dt.Size()); want != end-begin {
		return TensorInfo{}, invalid("tensor %s: shape %v of %s needs %d bytes, data_offsets give %d", name, e.Shape, dt, want, end-begin)
	}
	return TensorInfo{Name: name, DType: dt, Shape: shape, Begin: begin, End: end}, nil
}

func clip(b []byte) string {
	if len(b) > 64 {
		return string(b[:64]) + "…"
	}
	if len(b) == 0 {
		return "nothing"
	}
	return string(b)
}
