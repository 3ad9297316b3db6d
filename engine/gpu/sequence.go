package gpu

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/suzuran-app/suzuran/engine/gpu/device"
	"github.com/suzuran-app/suzuran/engine/model"
)

// tokenSlots is the length of a sequence's ring of sampled ids. A step
// writes its token to the next slot and the step after reads it there; four
// slots let the host keep reading token N while steps N+1 and N+2 run.
const tokenSlots = 4

// sequence is one sequence's state in device memory.
type sequence struct {
	b        *Backend
	maxToks  int
	pos      int
	kCache   map[int]device.Buffer // per full-attention layer, [kv_heads, max, head_dim] bf16 or f32
	vCache   map[int]device.Buffer
	conv     map[int]device.Buffer // per DeltaNet layer, [kernel−1, channels] f32
	state    map[int]device.Buffer // per DeltaNet layer, [Hv, Dv, Dk] f32
	tokens   device.Buffer         // [tokenSlots] int32 ring of sampled ids
	history  device.Buffer         // [maxTokens] int32: every consumed id, for the penalties
	ring     int                   // slot the next sampler writes
	lastSlot int                   // slot of the latest sampled id, -1 when none
	// lastSampled is that id once the host has read it, else -1.
	lastSampled int
	// ids are the consumed tokens; a token sampled on the device and
	// consumed before the host read it is -1 until that pass's Wait.
	ids      []int
	inFlight int
	closed   bool
	// hostPending is a submitted pass whose token the host samples at Wait.
	hostPending *pass
}

var _ model.Sequence = (*sequence)(nil)

// NewSequence implements model.Backend.
func (b *Backend) NewSequence(maxTokens int) (model.Sequence, error) {
	if maxTokens <= 0 {
		return nil, fmt.Errorf("sequence capacity %d: must be positive", maxTokens)
	}
	s := &sequence{b: b, maxToks: maxTokens, lastSlot: -1, lastSampled: -1,
		kCache: map[int]device.Buffer{}, vCache: map[int]device.Buffer{},
		conv: map[int]device.Buffer{}, state: map[int]device.Buffer{}}
	alloc := func(n int) (device.Buffer, error) {
		buf, err := b.dev.NewBuffer(n)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("sequence of %d tokens: %w", maxTokens, err)
		}
		return buf, nil
	}
	var err error
	sz := b.sequenceSizes(maxTokens)
	for i := range b.w.Layers {
		l := &b.w.Layers[i]
		if l.Attention != nil {
			if s.kCache[i], err = alloc(sz.cache); err != nil {
				return nil, err
			}
			if s.vCache[i], err = alloc(sz.cache); err != nil {
				return nil, err
			}
		}
		if l.DeltaNet != nil {
			if s.conv[i], err = alloc(sz.conv); err != nil {
				return nil, err
			}
			if s.state[i], err = alloc(sz.state); err != nil {
				return nil, err
			}
		}
	}
	if s.tokens, err = alloc(4 * tokenSlots); err != nil {
		return nil, err
	}
	if s.history, err = alloc(sz.history); err != nil {
		return nil, err
	}
	return s, nil
}

// sequenceSizes are the device buffers of a sequence of maxTokens tokens:
// per attention layer a K and a V cache, per DeltaNet layer a conv and a
// recurrent state, and the token ring and history.
type sequenceSizes struct {
	cache, conv, state, history int
}

func (b *Backend) sequenceSizes(maxTokens int) sequenceSizes {
	c := &b.cfg
	elem := 2
	if b.opt.KVCacheF32 {
		elem = 4
	}
	channels := 2*c.LinearKeyHeads*c.LinearKeyHeadDim + c.LinearValueHeads*c.LinearValueHeadDim
	return sequenceSizes{
		cache:   elem * c.NumKVHeads * maxTokens * c.HeadDim,
		conv:    4 * max(c.ConvKernel-1, 1) * channels,
		state:   4 * c.LinearValueHeads * c.LinearValueHeadDim * c.LinearKeyHeadDim,
		history: 4 * maxTokens,
	}
}

// SequenceBytes implements model.SequenceSizer: the device memory
// NewSequence(tokens) allocates (KV caches in the configured element type,
// DeltaNet conv and recurrent state, token ring and history).
func (b *Backend) SequenceBytes(tokens int) int64 {
	sz := b.sequenceSizes(tokens)
	n := int64(4*tokenSlots + sz.history)
	for i := range b.w.Layers {
		if b.w.Layers[i].Attention != nil {
			n += 2 * int64(sz.cache)
		}
		if b.w.Layers[i].DeltaNet != nil {
			n += int64(sz.conv + sz.state)
		}
	}
	return n
}

var _ model.SequenceSizer = (*Backend)(nil)

func (s *sequence) Pos() int       { return s.pos }
func (s *sequence) MaxTokens() int { return s.maxToks }

func (s *sequence) buffers() []device.Buffer {
	var out []device.Buffer
	for i := range s.b.w.Layers {
		for _, m := range []map[int]device.Buffer{s.kCache, s.vCache, s.conv, s.state} {
			if buf, ok := m[i]; ok {
				out = append(out, buf)
			}
		}
	}
	return append(out, s.tokens, s.history)
}

// byteRange is a span of one device buffer.
type byteRange struct {
	buf    device.Buffer
	off, n int
}

// stateRanges lists, in a fixed order, the device bytes that hold the
// sequence's state at position pos: per layer the cached keys and values of
// positions [0, pos) of each kv head, or the conv and recurrent state; then
// the token ring and history[:pos]. The order and lengths depend only on
// the model and pos, not on the sequence's capacity, so a snapshot restores
// into any sequence that can hold pos tokens.
func (s *sequence) stateRanges(pos int) []byteRange {
	c := &s.b.cfg
	elem := 2
	if s.b.opt.KVCacheF32 {
		elem = 4
	}
	row := c.HeadDim * elem
	var out []byteRange
	for i := range s.b.w.Layers {
		if k, ok := s.kCache[i]; ok {
			for _, buf := range []device.Buffer{k, s.vCache[i]} {
				for h := 0; h < c.NumKVHeads; h++ {
					out = append(out, byteRange{buf, h * s.maxToks * row, pos * row})
				}
			}
		}
		for _, m := range []map[int]device.Buffer{s.conv, s.state} {
			if buf, ok := m[i]; ok {
				out = append(out, byteRange{buf, 0, buf.Len()})
			}
		}
	}
	return append(out, byteRange{s.tokens, 0, s.tokens.Len()}, byteRange{s.history, 0, 4 * pos})
}

// snapshot is a host copy of a sequence's device state at pos.
type snapshot struct {
	b        *Backend
	pos      int
	ids      []int
	data     []byte // the stateRanges(pos) of the sequence, back to back
	lastSlot int
	ring     int
	sampled  int
}

func (sn *snapshot) Pos() int      { return sn.pos }
func (sn *snapshot) Tokens() []int { return sn.ids }
func (sn *snapshot) Bytes() int64  { return int64(len(sn.data)) + 8*int64(len(sn.ids)) }

// Snapshot implements model.Sequence. It reads device memory, so no pass
// may be in flight. Only the cache rows in use are copied.
func (s *sequence) Snapshot() (model.Snapshot, error) {
	if s.inFlight > 0 {
		return nil, errors.New("snapshot while a pass is in flight: wait for it first")
	}
	sn := &snapshot{b: s.b, pos: s.pos, ids: append([]int(nil), s.ids...),
		lastSlot: s.lastSlot, ring: s.ring, sampled: s.lastSampled}
	ranges := s.stateRanges(s.pos)
	n := 0
	for _, r := range ranges {
		n += r.n
	}
	sn.data = make([]byte, 0, n)
	for _, r := range ranges {
		sn.data = append(sn.data, r.buf.Bytes()[r.off:r.off+r.n]...)
	}
	return sn, nil
}

// Restore implements model.Sequence.
func (s *sequence) Restore(m model.Snapshot) error {
	sn, ok := m.(*snapshot)
	if !ok || sn.b != s.b {
		return errors.New("snapshot comes from another backend")
	}
	if sn.pos > s.maxToks {
		return fmt.Errorf("a snapshot at position %d cannot restore a sequence of %d tokens", sn.pos, s.maxToks)
	}
	if s.inFlight > 0 {
		return errors.New("restore while a pass is in flight: wait for it first")
	}
	data := sn.data
	for _, r := range s.stateRanges(sn.pos) {
		copy(r.buf.Bytes()[r.off:r.off+r.n], data[:r.n])
		data = data[r.n:]
	}
	s.pos, s.ids, s.lastSlot, s.ring = sn.pos, append([]int(nil), sn.ids...), sn.lastSlot, sn.ring
	s.lastSampled = sn.sampled
	return nil
}

// Close implements model.Sequence.
func (s *sequence) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	for _, buf := range s.buffers() {
		if buf != nil {
			buf.Release()
		}
	}
	return nil
}

// tokenLoc is where ring slot i lives.
func (s *sequence) tokenLoc(i int) loc { return loc{buf: s.tokens, off: 4 * i} }

// readToken reads ring slot i; the caller has waited for the pass.
func (s *sequence) readToken(i int) int {
	return int(int32(binary.LittleEndian.Uint32(s.tokens.Bytes()[4*i:])))
}
