// Package stateio writes and reads the little-endian fields of a backend's
// snapshot format (model.StateCodec): integers, id lists, f32 slices and
// byte blocks, each length checked by the reader against what the caller
// expects, so that a file that does not fit the model fails to read
// instead of making a state of the wrong shape.
package stateio

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"unsafe"
)

// little reports whether the machine stores numbers little-endian, so that
// f32 slices can be written as their memory.
var little = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// Writer writes fields to w, remembering the first error.
type Writer struct {
	w   io.Writer
	err error
	buf [8]byte
}

func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Err is the first write error.
func (w *Writer) Err() error { return w.err }

func (w *Writer) write(p []byte) {
	if w.err == nil {
		_, w.err = w.w.Write(p)
	}
}

func (w *Writer) Uint64(v uint64) {
	binary.LittleEndian.PutUint64(w.buf[:], v)
	w.write(w.buf[:8])
}

func (w *Writer) Int(v int) { w.Uint64(uint64(int64(v))) }

// String writes a length and the bytes.
func (w *Writer) String(s string) {
	w.Int(len(s))
	w.write([]byte(s))
}

// Ints writes a length and each id as 4 bytes (ids are vocabulary entries,
// or −1 for one not read back).
func (w *Writer) Ints(v []int) {
	w.Int(len(v))
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(int32(x)))
	}
	w.write(b)
}

// Floats writes a length and the values.
func (w *Writer) Floats(v []float32) {
	w.Int(len(v))
	if little {
		if len(v) > 0 {
			w.write(unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v)))
		}
		return
	}
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	w.write(b)
}

// Bytes writes a length and the bytes.
func (w *Writer) Bytes(p []byte) {
	w.Int(len(p))
	w.write(p)
}

// Reader reads fields from r, remembering the first error.
type Reader struct {
	r   io.Reader
	err error
	buf [8]byte
}

func NewReader(r io.Reader) *Reader { return &Reader{r: r} }

// Err is the first read error; a file cut short is io.ErrUnexpectedEOF.
func (r *Reader) Err() error { return r.err }

// Fail records err unless an error is recorded already.
func (r *Reader) Fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

func (r *Reader) read(p []byte) {
	if r.err != nil {
		return
	}
	if _, err := io.ReadFull(r.r, p); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		r.err = err
	}
}

func (r *Reader) Uint64() uint64 {
	r.read(r.buf[:8])
	if r.err != nil {
		return 0
	}
	return binary.LittleEndian.Uint64(r.buf[:8])
}

func (r *Reader) Int() int {
	v := int64(r.Uint64())
	if v > math.MaxInt32 || v < math.MinInt32 {
		r.Fail(fmt.Errorf("field value %d out of range", v))
		return 0
	}
	return int(v)
}

// length reads a length and checks it against want (−1: any up to max).
func (r *Reader) length(what string, want, max int) int {
	n := r.Int()
	if r.err != nil {
		return 0
	}
	if (want >= 0 && n != want) || n < 0 || n > max {
		if want >= 0 {
			r.Fail(fmt.Errorf("%s holds %d entries, the model's shapes give %d", what, n, want))
		} else {
			r.Fail(fmt.Errorf("%s holds %d entries, at most %d fit", what, n, max))
		}
		return 0
	}
	return n
}

// String reads a string of at most max bytes.
func (r *Reader) String(what string, max int) string {
	n := r.length(what, -1, max)
	b := make([]byte, n)
	r.read(b)
	return string(b)
}

// Ints reads an id list of exactly want entries (−1: at most max).
func (r *Reader) Ints(what string, want, max int) []int {
	n := r.length(what, want, max)
	b := make([]byte, 4*n)
	r.read(b)
	if r.err != nil {
		return nil
	}
	v := make([]int, n)
	for i := range v {
		v[i] = int(int32(binary.LittleEndian.Uint32(b[4*i:])))
	}
	return v
}

// Floats reads exactly want values.
func (r *Reader) Floats(what string, want int) []float32 {
	n := r.length(what, want, want)
	v := make([]float32, n)
	if n == 0 || r.err != nil {
		return v
	}
	if little {
		r.read(unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*n))
		return v
	}
	b := make([]byte, 4*n)
	r.read(b)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

// Bytes reads exactly want bytes into a new slice.
func (r *Reader) Bytes(what string, want int) []byte {
	n := r.length(what, want, want)
	b := make([]byte, n)
	r.read(b)
	return b
}
