package gpu

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"unsafe"

	"github.com/suzuran-app/suzuran/engine/gpu/device"
	"github.com/suzuran-app/suzuran/engine/model"
)

// pageSize is the alignment Metal's newBufferWithBytesNoCopy needs (16 KiB
// pages on Apple Silicon; wrapping 16 KiB-aligned regions also satisfies 4
// KiB pages).
const pageSize = 16 << 10

// loc is a place in device memory: a buffer and a byte offset into it.
type loc struct {
	buf device.Buffer
	off int
}

func (l loc) arg(index int) device.Arg {
	return device.Arg{Index: index, Buffer: l.buf, Offset: l.off}
}

// devMatrix is a model.Matrix as the kernels see it.
type devMatrix struct {
	m                    *model.Matrix
	format               string // kernel name part: f32, f16, bf16, q4, q8
	data, scales, biases loc
	bytes                int64 // data + scales + biases: what one full read costs
	// aligned: every row starts on 8 bytes, so kernels may load rows in
	// 8-byte vectors (safetensors does not align tensors).
	aligned bool
}

// devExperts is one projection of the routed experts, read by expert id:
// three buffers (codes, scales, biases) and a table of each expert's offsets
// into them.
type devExperts struct {
	format               string
	out, in, groupSize   int
	data, scales, biases device.Buffer
	table                device.Buffer // [E][3]uint64 byte offsets
	expertBytes          int64         // one expert's data + scales + biases
	aligned              bool          // every expert's rows start on 8 bytes
}

// matrixFormat names the kernel variant that reads m.
func matrixFormat(m *model.Matrix) (string, error) {
	switch m.DType {
	case model.F32:
		return "f32", nil
	case model.F16:
		return "f16", nil
	case model.BF16:
		return "bf16", nil
	case model.Affine:
		switch m.Bits {
		case 4:
			return "q4", nil
		case 8:
			return "q8", nil
		}
		return "", fmt.Errorf("matrix %s: %d-bit affine quantization has no kernel (4 or 8)", m.Name, m.Bits)
	}
	return "", fmt.Errorf("matrix %s: dtype %v has no kernel", m.Name, m.DType)
}

// span is one host byte range that must end up inside a single device buffer.
// p keeps the real pointer so that the wrapped region can be derived from
// it with unsafe.Add rather than rebuilt from an integer.
type span struct {
	p          unsafe.Pointer
	start, end uintptr
}

func sliceSpan(b []byte) span {
	p := unsafe.Pointer(unsafe.SliceData(b))
	return span{p, uintptr(p), uintptr(p) + uintptr(len(b))}
}

// wrapped is one device buffer made over host memory [start, end).
type wrapped struct {
	base       unsafe.Pointer // == start
	start, end uintptr
	buf        device.Buffer
}

// weightMap wraps the checkpoint's mapped memory in as few device buffers as
// the device's maximum length allows and finds each tensor in them.
type weightMap struct {
	regions  []wrapped
	mappings mappingIndex
	// gatheredBytes is what gatherStack copied: expert stacks that lie in
	// no single mapped file.
	gatheredBytes int64
}

// mappingIndex finds which of the checkpoint's mapped files holds a span.
type mappingIndex []span // the mappings, by address

func newMappingIndex(mappings [][]byte) mappingIndex {
	regions := make(mappingIndex, 0, len(mappings))
	for _, m := range mappings {
		if len(m) > 0 {
			regions = append(regions, sliceSpan(m))
		}
	}
	slices.SortFunc(regions, func(a, b span) int { return cmp.Compare(a.start, b.start) })
	return regions
}

// of is the index of the mapping that holds all of s, or -1: s is outside
// every mapping (Go's heap) or straddles two.
func (mi mappingIndex) of(s span) int {
	i, _ := slices.BinarySearchFunc(mi, s.start, func(r span, p uintptr) int { return cmp.Compare(r.start, p+1) })
	if i > 0 && s.start >= mi[i-1].start && s.end <= mi[i-1].end {
		return i - 1
	}
	return -1
}

// wrapWeights wraps the memory behind every span. Spans of one mapped file
// (one of mappings) that overlap or touch after rounding to pages are
// merged into one buffer; spans of different files never are, even when
// the files are mapped next to each other, because
// newBufferWithBytesNoCopy needs memory inside one VM region, which a
// mapping is and two adjacent mappings are not. A span in no single
// mapping (weights in Go's heap, made by a test) cannot be wrapped: Metal
// wraps only whole pages of one VM region, and rounding the span to pages
// could reach outside its memory. It is copied into a buffer of its own.
// A merged range longer than the device's maximum buffer is cut between
// spans, never through one, so every tensor (and every expert stack, which
// the caller passes as one span) lands whole in one buffer.
func wrapWeights(dev device.Device, spans []span, mappings [][]byte) (*weightMap, error) {
	mi := newMappingIndex(mappings)
	mappingOf := mi.of
	type placed struct {
		span
		mapping int
	}
	ps := make([]placed, 0, len(spans))
	for _, s := range spans {
		if s.end > s.start {
			ps = append(ps, placed{s, mappingOf(s)})
		}
	}
	slices.SortFunc(ps, func(a, b placed) int {
		if a.mapping != b.mapping {
			return a.mapping - b.mapping
		}
		return cmp.Compare(a.start, b.start)
	})
	down := func(p uintptr) uintptr { return p &^ (pageSize - 1) }
	up := func(p uintptr) uintptr { return (p + pageSize - 1) &^ (pageSize - 1) }
	maxLen := uintptr(dev.MaxBufferLength()) &^ (pageSize - 1)
	wm := &weightMap{mappings: mi}
	var cur *wrapped
	curMapping := -1
	flush := func() error {
		if cur == nil {
			return nil
		}
		mem := unsafe.Slice((*byte)(cur.base), int(cur.end-cur.start))
		buf, err := dev.WrapBytes(mem)
		if err != nil {
			return fmt.Errorf("wrapping %d bytes of weights for the device: %w", len(mem), err)
		}
		cur.buf = buf
		wm.regions = append(wm.regions, *cur)
		cur = nil
		return nil
	}
	for _, s := range ps {
		if s.mapping < 0 {
			if err := flush(); err != nil {
				return nil, err
			}
			buf, err := upload(dev, unsafe.Slice((*byte)(s.p), int(s.end-s.start)))
			if err != nil {
				return nil, fmt.Errorf("copying %d bytes of weights that lie in no mapped file to the device: %w", s.end-s.start, err)
			}
			wm.regions = append(wm.regions, wrapped{base: s.p, start: s.start, end: s.end, buf: buf})
			cur = nil
			continue
		}
		a, b := down(s.start), up(s.end)
		if b-a > maxLen {
			return nil, fmt.Errorf("a weight tensor of %d bytes is longer than the device's largest buffer (%d bytes)",
				s.end-s.start, maxLen)
		}
		if cur != nil && s.mapping >= 0 && s.mapping == curMapping && a <= cur.end && b-cur.start <= maxLen {
			cur.end = max(cur.end, b)
			continue
		}
		// A new buffer. When the span shares its first page with the
		// previous buffer, the two buffers overlap by that page, which
		// wrapping allows.
		if err := flush(); err != nil {
			return nil, err
		}
		cur = &wrapped{base: unsafe.Add(s.p, -int(s.start-a)), start: a, end: b}
		curMapping = s.mapping
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return wm, nil
}

// find returns where b lies in the wrapped buffers. Regions may overlap by a
// page (see wrapWeights); the first that holds all of b wins.
func (wm *weightMap) find(b []byte) (loc, error) {
	return wm.findSpan(sliceSpan(b))
}

func (wm *weightMap) findSpan(s span) (loc, error) {
	for _, r := range wm.regions {
		if s.start >= r.start && s.end <= r.end {
			return loc{buf: r.buf, off: int(s.start - r.start)}, nil
		}
	}
	return loc{}, fmt.Errorf("a %d-byte weight range was not wrapped for the device", s.end-s.start)
}

// matrixSpans lists the byte ranges of m.
func matrixSpans(m *model.Matrix) []span {
	out := []span{sliceSpan(m.Data)}
	if m.DType == model.Affine {
		out = append(out, sliceSpan(m.Scales), sliceSpan(m.Biases))
	}
	return out
}

// stackComponents are the parts of an expert's matrix that the expert
// kernels read from a buffer each: codes (or plain weights), scales and
// biases.
var stackComponents = []func(m *model.Matrix) []byte{
	func(m *model.Matrix) []byte { return m.Data },
	func(m *model.Matrix) []byte { return m.Scales },
	func(m *model.Matrix) []byte { return m.Biases },
}

// componentsOf is how many of stackComponents a stack of experts has.
func componentsOf(es model.Experts) int {
	if len(es) > 0 && es[0].DType == model.Affine {
		return 3
	}
	return 1
}

// stackSpans returns, for a stack of experts, one span per component
// covering all experts, so the whole stack lands in one buffer.
func stackSpans(es model.Experts) []span {
	var out []span
	for _, g := range stackComponents[:componentsOf(es)] {
		s := sliceSpan(g(&es[0]))
		for i := range es {
			t := sliceSpan(g(&es[i]))
			if t.start < s.start {
				s.p, s.start = t.p, t.start
			}
			s.end = max(s.end, t.end)
		}
		out = append(out, s)
	}
	return out
}

// wrappableStackSpans is stackSpans less the components that lie in no
// single mapped file: per-expert tensors of a sharded checkpoint whose
// experts fall on both sides of a file boundary (or weights in Go's heap).
// No wrapped buffer can hold such a stack (see wrapWeights), and the
// expert kernels read a component's experts from one buffer, so
// weightMap.experts gathers it instead.
func wrappableStackSpans(es model.Experts, mi mappingIndex) []span {
	var out []span
	for _, s := range stackSpans(es) {
		if mi.of(s) >= 0 {
			out = append(out, s)
		}
	}
	return out
}

// expertAlign keeps each gathered expert on a 16-byte boundary, more than
// the kernels' widest load (8 bytes).
const expertAlign = 16

// gatherStack copies one component of a stack of experts into a buffer of
// the device's own, expert after expert, for a stack that no wrapped buffer
// holds whole; offs[e] is where expert e's part starts in it. The copy
// costs the component's size in memory; checkpoints whose experts are one
// stacked tensor (MLX's switch_mlp, the hub's fused experts) never need
// it, since a tensor lies in one file.
func (wm *weightMap) gatherStack(dev device.Device, es model.Experts, get func(m *model.Matrix) []byte) (device.Buffer, []int, error) {
	offs := make([]int, len(es))
	total := 0
	for e := range es {
		offs[e] = total
		total += (len(get(&es[e])) + expertAlign - 1) &^ (expertAlign - 1)
	}
	buf, err := dev.NewBuffer(max(total, 4))
	if err != nil {
		return nil, nil, fmt.Errorf("copying a stack of %d experts that spans two files (%d bytes) to the device: %w", len(es), total, err)
	}
	for e := range es {
		copy(buf.Bytes()[offs[e]:], get(&es[e]))
	}
	wm.gatheredBytes += int64(total)
	return buf, offs, nil
}

func (wm *weightMap) matrix(m *model.Matrix) (*devMatrix, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	format, err := matrixFormat(m)
	if err != nil {
		return nil, err
	}
	d := &devMatrix{m: m, format: format, bytes: int64(len(m.Data))}
	if d.data, err = wm.find(m.Data); err != nil {
		return nil, fmt.Errorf("matrix %s: %w", m.Name, err)
	}
	d.scales, d.biases = d.data, d.data
	// Buffers start at least 16-byte aligned, so offsets decide alignment.
	elem := 2
	if m.DType == model.F32 || m.DType == model.Affine {
		elem = 4
	}
	if d.data.off%elem != 0 {
		return nil, fmt.Errorf("matrix %s: data at byte %d of its file region is not %d-byte aligned, which GPU loads need", m.Name, d.data.off, elem)
	}
	d.aligned = d.data.off%8 == 0 && m.RowBytes()%8 == 0
	if m.DType == model.Affine {
		if m.GroupSize%(32/m.Bits) != 0 {
			return nil, fmt.Errorf("matrix %s: group size %d is not a multiple of the %d codes in a word", m.Name, m.GroupSize, 32/m.Bits)
		}
		if d.scales, err = wm.find(m.Scales); err != nil {
			return nil, fmt.Errorf("matrix %s scales: %w", m.Name, err)
		}
		if d.biases, err = wm.find(m.Biases); err != nil {
			return nil, fmt.Errorf("matrix %s biases: %w", m.Name, err)
		}
		if d.scales.off%2 != 0 || d.biases.off%2 != 0 {
			return nil, fmt.Errorf("matrix %s: scales or biases are not 2-byte aligned", m.Name)
		}
		d.bytes += int64(len(m.Scales) + len(m.Biases))
	}
	return d, nil
}

func (wm *weightMap) experts(dev device.Device, es model.Experts) (*devExperts, error) {
	if len(es) == 0 {
		return nil, fmt.Errorf("no experts")
	}
	first := &es[0]
	format, err := matrixFormat(first)
	if err != nil {
		return nil, err
	}
	d := &devExperts{format: format, out: first.Out, in: first.In, groupSize: first.GroupSize, aligned: true}
	for e := range es {
		if err := es[e].Validate(); err != nil {
			return nil, err
		}
	}
	// Each component's whole stack must lie in one buffer: the buffer is
	// found by the stack, not by each expert, since buffers may overlap by
	// a page and an expert near the edge would otherwise land in another.
	// A stack in no single mapped file is gathered into a buffer instead.
	n := componentsOf(es)
	stacks := stackSpans(es)
	var bufs [3]device.Buffer
	var offsets [3][]int // [component][expert]
	for i := 0; i < n; i++ {
		get := stackComponents[i]
		if wm.mappings.of(stacks[i]) < 0 {
			if bufs[i], offsets[i], err = wm.gatherStack(dev, es, get); err != nil {
				return nil, fmt.Errorf("experts %s: %w", first.Name, err)
			}
			continue
		}
		base, err := wm.findSpan(stacks[i])
		if err != nil {
			return nil, fmt.Errorf("experts %s: %w", first.Name, err)
		}
		bufs[i], offsets[i] = base.buf, make([]int, len(es))
		for e := range es {
			offsets[i][e] = base.off + int(sliceSpan(get(&es[e])).start-stacks[i].start)
		}
	}
	if n == 1 {
		// Plain weights: the kernels bind the data buffer in the scales'
		// and biases' places, at offset 0.
		bufs[1], bufs[2] = bufs[0], bufs[0]
		offsets[1], offsets[2] = make([]int, len(es)), make([]int, len(es))
	}
	d.data, d.scales, d.biases = bufs[0], bufs[1], bufs[2]
	table := make([]byte, 24*len(es))
	for e := range es {
		m := &es[e]
		f, err := matrixFormat(m)
		if err != nil {
			return nil, err
		}
		if f != format || m.Out != d.out || m.In != d.in || m.GroupSize != d.groupSize {
			return nil, fmt.Errorf("expert %s is %s [%d,%d] group %d, expert %s is %s [%d,%d] group %d: experts must share one format",
				m.Name, f, m.Out, m.In, m.GroupSize, first.Name, format, d.out, d.in, d.groupSize)
		}
		offs := [3]int{offsets[0][e], offsets[1][e], offsets[2][e]}
		elem := 2
		if m.DType == model.F32 || m.DType == model.Affine {
			elem = 4
		}
		if offs[0]%elem != 0 || offs[1]%2 != 0 || offs[2]%2 != 0 {
			return nil, fmt.Errorf("expert %s: data, scales or biases are not aligned for GPU loads", m.Name)
		}
		d.aligned = d.aligned && offs[0]%8 == 0 && m.RowBytes()%8 == 0
		if e == 0 {
			d.expertBytes = int64(len(m.Data) + len(m.Scales) + len(m.Biases))
		}
		for i, off := range offs {
			binary.LittleEndian.PutUint64(table[24*e+8*i:], uint64(off))
		}
	}
	if d.table, err = upload(dev, table); err != nil {
		return nil, err
	}
	return d, nil
}

// upload copies small host data (norm vectors, offset tables) into a new
// device buffer.
func upload(dev device.Device, b []byte) (device.Buffer, error) {
	buf, err := dev.NewBuffer(max(len(b), 4))
	if err != nil {
		return nil, err
	}
	copy(buf.Bytes(), b)
	return buf, nil
}

func f32Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}
