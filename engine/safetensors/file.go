package safetensors

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Tensor is a view of one tensor's bytes inside a mapped file. Data stays
// valid until the File (or Set) that produced it is closed.
type Tensor struct {
	Name  string
	File  string // base name of the file it lives in, for error messages
	DType DType
	Shape []int
	Data  []byte
}

// NumElements is the product of the shape (1 for a scalar).
func (t Tensor) NumElements() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// File is one mapped safetensors file.
type File struct {
	Path    string
	Header  *Header
	mapping []byte
	tensors map[string]Tensor
}

// Open maps path read-only and validates its header. The tensors' bytes are
// never copied: they are read from the page cache on first touch.
func Open(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close() // the mapping outlives the descriptor
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	size := st.Size()
	if size < 8 {
		return nil, fmt.Errorf("%s: %w: file is %d bytes, shorter than the 8-byte header length: the file is truncated", path, ErrInvalid, size)
	}
	if size > int64(^uint(0)>>1) {
		return nil, fmt.Errorf("%s: file of %d bytes cannot be mapped on this platform", path, size)
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("%s: mmap: %w", path, err)
	}
	h, err := ParseHeader(m, size)
	if err != nil {
		_ = unix.Munmap(m)
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	sf := &File{Path: path, Header: h, mapping: m, tensors: make(map[string]Tensor, len(h.Tensors))}
	base := filepath.Base(path)
	for _, ti := range h.Tensors {
		sf.tensors[ti.Name] = Tensor{
			Name:  ti.Name,
			File:  base,
			DType: ti.DType,
			Shape: ti.Shape,
			// Full slice expression: a view can never be appended into
			// its neighbour's bytes.
			Data: m[h.DataOffset+ti.Begin : h.DataOffset+ti.End : h.DataOffset+ti.End],
		}
	}
	return sf, nil
}

// Tensor returns the named tensor.
func (f *File) Tensor(name string) (Tensor, bool) {
	t, ok := f.tensors[name]
	return t, ok
}

// Names lists the tensors in data order.
func (f *File) Names() []string {
	out := make([]string, len(f.Header.Tensors))
	for i, t := range f.Header.Tensors {
		out[i] = t.Name
	}
	return out
}

// Mapping is the whole mapped file: one region of the address space. A GPU
// that wraps host memory without copying (Metal's newBufferWithBytesNoCopy)
// must keep each buffer inside one such region, and two files' mappings may
// lie next to each other without being one region.
func (f *File) Mapping() []byte { return f.mapping }

// Size is the length of the mapped file in bytes.
func (f *File) Size() int64 { return int64(len(f.mapping)) }

// Close unmaps the file; every Tensor.Data from it becomes invalid.
func (f *File) Close() error {
	if f.mapping == nil {
		return nil
	}
	err := unix.Munmap(f.mapping)
	f.mapping = nil
	f.tensors = nil
	return err
}
