package safetensors

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// TensorSpec declares one tensor of a file about to be written.
type TensorSpec struct {
	Name  string
	DType DType
	Shape []int
}

func (s TensorSpec) byteSize() int64 {
	n := int64(s.DType.Size())
	for _, d := range s.Shape {
		n *= int64(d)
	}
	return n
}

// Writer streams a safetensors file: the header (from the specs given to
// Create) goes first, then the tensors' bytes in the declared order, in as
// many Write calls as the caller likes. Nothing appears under the final path
// until Close succeeds.
type Writer struct {
	path  string
	tmp   *os.File
	bw    *bufio.Writer
	specs []TensorSpec
	ends  []int64 // cumulative end offset of each tensor in the data section
	index map[string]int
	pos   int64 // bytes of tensor data written so far
	err   error
}

// Create starts writing path. The tensors are laid out in the order of
// specs; metadata (may be nil) becomes the header's __metadata__.
func Create(path string, specs []TensorSpec, metadata map[string]string) (*Writer, error) {
	header := make(map[string]any, len(specs)+1)
	if len(metadata) > 0 {
		header["__metadata__"] = metadata
	}
	ends := make([]int64, len(specs))
	index := make(map[string]int, len(specs))
	var off int64
	for i, s := range specs {
		if s.Name == "" || s.Name == "__metadata__" {
			return nil, fmt.Errorf("%s: invalid tensor name %q", path, s.Name)
		}
		if _, dup := header[s.Name]; dup {
			return nil, fmt.Errorf("%s: tensor %s declared twice", path, s.Name)
		}
		if s.DType.Size() == 0 {
			return nil, fmt.Errorf("%s: tensor %s has invalid dtype %v", path, s.Name, s.DType)
		}
		for _, d := range s.Shape {
			if d < 0 {
				return nil, fmt.Errorf("%s: tensor %s has negative dimension in shape %v", path, s.Name, s.Shape)
			}
		}
		shape := s.Shape
		if shape == nil {
			shape = []int{}
		}
		size := s.byteSize()
		header[s.Name] = map[string]any{
			"dtype":        s.DType.String(),
			"shape":        shape,
			"data_offsets": [2]int64{off, off + size},
		}
		off += size
		ends[i] = off
		index[s.Name] = i
	}
	js, err := json.Marshal(header)
	if err != nil {
		return nil, err
	}
	// Pad with spaces so the data section starts 8-byte aligned, as the
	// reference implementation does: mapped U32/F32 tensors are then aligned
	// whenever their offsets are.
	for len(js)%8 != 0 {
		js = append(js, ' ')
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		// The temporary name means nothing to the caller; name the target.
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("writing %s: %w", path, err)
	}
	w := &Writer{path: path, tmp: tmp, bw: bufio.NewWriterSize(tmp, 1<<20), specs: specs, ends: ends, index: index}
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(js)))
	if _, err := w.bw.Write(n[:]); err != nil {
		w.Abort()
		return nil, err
	}
	if _, err := w.bw.Write(js); err != nil {
		w.Abort()
		return nil, err
	}
	return w, nil
}

// Write appends tensor bytes. It refuses to write past the last declared
// tensor.
func (w *Writer) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	total := int64(0)
	if len(w.ends) > 0 {
		total = w.ends[len(w.ends)-1]
	}
	if w.pos+int64(len(p)) > total {
		w.err = fmt.Errorf("%s: write of %d bytes runs past the %d declared bytes of tensor data", w.path, len(p), total)
		return 0, w.err
	}
	n, err := w.bw.Write(p)
	w.pos += int64(n)
	if err != nil {
		w.err = err
	}
	return n, err
}

// WriteTensor writes the whole of the named tensor, which must be the next
// one in the declared order.
func (w *Writer) WriteTensor(name string, data []byte) error {
	i, ok := w.index[name]
	if !ok {
		return fmt.Errorf("%s: tensor %s was not declared", w.path, name)
	}
	begin := int64(0)
	if i > 0 {
		begin = w.ends[i-1]
	}
	if w.pos != begin {
		return fmt.Errorf("%s: tensor %s written out of order (%d bytes of data written, it starts at %d)", w.path, name, w.pos, begin)
	}
	if int64(len(data)) != w.ends[i]-begin {
		return fmt.Errorf("%s: tensor %s: got %d bytes, its spec needs %d", w.path, name, len(data), w.ends[i]-begin)
	}
	_, err := w.Write(data)
	return err
}

// Close checks that every declared byte was written, flushes, syncs and
// renames the file into place. On any error the temporary file is removed.
func (w *Writer) Close() error {
	if w.tmp == nil {
		return fmt.Errorf("%s: writer already closed", w.path)
	}
	if w.err != nil {
		w.Abort()
		return w.err
	}
	total := int64(0)
	if len(w.ends) > 0 {
		total = w.ends[len(w.ends)-1]
	}
	if w.pos != total {
		w.Abort()
		return fmt.Errorf("%s: only %d of %d bytes of tensor data were written; nothing was saved", w.path, w.pos, total)
	}
	if err := w.bw.Flush(); err != nil {
		w.Abort()
		return err
	}
	if err := w.tmp.Sync(); err != nil {
		w.Abort()
		return err
	}
	name := w.tmp.Name()
	if err := w.tmp.Close(); err != nil {
		w.tmp = nil
		os.Remove(name)
		return err
	}
	w.tmp = nil
	if err := os.Chmod(name, 0o644); err != nil {
		os.Remove(name)
		return err
	}
	if err := os.Rename(name, w.path); err != nil {
		os.Remove(name)
		return err
	}
	return nil
}

// Abort discards the file. It is safe to call after Close.
func (w *Writer) Abort() {
	if w.tmp == nil {
		return
	}
	name := w.tmp.Name()
	w.tmp.Close()
	os.Remove(name)
	w.tmp = nil
	if w.err == nil {
		w.err = fmt.Errorf("%s: writer aborted", w.path)
	}
}

// WriteFile writes a whole file from in-memory tensors, for small outputs
// such as logits. data[i] holds the bytes of specs[i].
func WriteFile(path string, specs []TensorSpec, data [][]byte, metadata map[string]string) error {
	if len(specs) != len(data) {
		return fmt.Errorf("%s: %d specs but %d data buffers", path, len(specs), len(data))
	}
	w, err := Create(path, specs, metadata)
	if err != nil {
		return err
	}
	for i, s := range specs {
		if err := w.WriteTensor(s.Name, data[i]); err != nil {
			w.Abort()
			return err
		}
	}
	return w.Close()
}
