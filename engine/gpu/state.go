package gpu

import (
	"errors"
	"fmt"
	"io"

	"github.com/suzuran-app/suzuran/engine/internal/stateio"
	"github.com/suzuran-app/suzuran/engine/model"
)

// stateVersion is the version of the GPU backend's snapshot format
// (WriteSnapshot); a change to stateRanges' order or contents needs a new
// one.
const stateVersion = 1

// maxStateTokens bounds the token count a snapshot may claim before its
// lengths are checked against the config.
const maxStateTokens = 1 << 24

// StateFormat implements model.StateCodec: the device (its kernels'
// arithmetic), the KV cache's element type and the GEMM operands, all of
// which change the values a prefix leaves behind.
func (b *Backend) StateFormat() string {
	kv := "bf16"
	if b.opt.KVCacheF32 {
		kv = "f32"
	}
	return fmt.Sprintf("gpu/v%d/%s/kv-%s/gemm-%s", stateVersion, b.dev.Name(), kv, b.opt.GEMMOperands)
}

// WriteSnapshot implements model.StateCodec: the position, the consumed
// ids, the token ring's slots and the last sampled id, then the device
// bytes of stateRanges as they are.
func (b *Backend) WriteSnapshot(w io.Writer, m model.Snapshot) error {
	sn, ok := m.(*snapshot)
	if !ok || sn.b != b {
		return errors.New("snapshot comes from another backend")
	}
	sw := stateio.NewWriter(w)
	sw.Int(stateVersion)
	sw.Int(sn.pos)
	sw.Ints(sn.ids)
	sw.Int(sn.lastSlot)
	sw.Int(sn.ring)
	sw.Int(sn.sampled)
	sw.Bytes(sn.data)
	return sw.Err()
}

// ReadSnapshot implements model.StateCodec.
func (b *Backend) ReadSnapshot(r io.Reader) (model.Snapshot, error) {
	sr := stateio.NewReader(r)
	if v := sr.Int(); sr.Err() == nil && v != stateVersion {
		return nil, fmt.Errorf("gpu snapshot format version %d, this build reads %d", v, stateVersion)
	}
	limit := maxStateTokens
	if b.cfg.MaxPositions > 0 {
		limit = b.cfg.MaxPositions
	}
	sn := &snapshot{b: b, pos: sr.Int()}
	if sr.Err() == nil && (sn.pos < 0 || sn.pos > limit) {
		return nil, fmt.Errorf("gpu snapshot at position %d, at most %d fit", sn.pos, limit)
	}
	sn.ids = sr.Ints("the token list", sn.pos, limit)
	sn.lastSlot, sn.ring, sn.sampled = sr.Int(), sr.Int(), sr.Int()
	if sr.Err() != nil {
		return nil, sr.Err()
	}
	if sn.lastSlot < -1 || sn.lastSlot >= tokenSlots || sn.ring < 0 || sn.ring >= tokenSlots {
		return nil, fmt.Errorf("gpu snapshot's token ring slots %d and %d are outside [0, %d)", sn.lastSlot, sn.ring, tokenSlots)
	}
	for _, id := range sn.ids {
		if id < -1 || id >= b.w.Embed.Out {
			return nil, fmt.Errorf("gpu snapshot holds token %d, outside the vocabulary", id)
		}
	}
	sn.data = sr.Bytes("the device state", b.stateBytes(sn.pos))
	if sr.Err() != nil {
		return nil, sr.Err()
	}
	return sn, nil
}

// stateBytes is the length of stateRanges(pos) together, from the config.
func (b *Backend) stateBytes(pos int) int {
	c := &b.cfg
	elem := 2
	if b.opt.KVCacheF32 {
		elem = 4
	}
	sz := b.sequenceSizes(1)
	n := 4*tokenSlots + 4*pos
	for i := range b.w.Layers {
		if b.w.Layers[i].Attention != nil {
			n += 2 * c.NumKVHeads * pos * c.HeadDim * elem
		}
		if b.w.Layers[i].DeltaNet != nil {
			n += sz.conv + sz.state
		}
	}
	return n
}

var _ model.StateCodec = (*Backend)(nil)
