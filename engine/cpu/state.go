package cpu

import (
	"errors"
	"fmt"
	"io"

	"github.com/suzuran-app/suzuran/engine/internal/stateio"
	"github.com/suzuran-app/suzuran/engine/model"
)

// stateVersion is the version of the CPU backend's snapshot format
// (WriteSnapshot); a change to the layout of the fields, or to what a
// layer's state holds, needs a new one.
const stateVersion = 2

// maxStateTokens bounds the token count a snapshot may claim before its
// lengths are checked against the config.
const maxStateTokens = 1 << 24

// StateFormat implements model.StateCodec. The kernels and precision are
// part of it: the values a prefix leaves behind depend on them, and a
// snapshot must give the logits this backend would compute.
func (b *Backend) StateFormat() string {
	k := b.Kernels()
	return fmt.Sprintf("cpu/v%d/%s/%s", stateVersion, k.ISA, k.Precision)
}

// WriteSnapshot implements model.StateCodec: the tokens, the sampled id,
// the M-RoPE position of the next text row (past the images),
// then per layer its K and V rows in use (attention) or its conv and
// recurrent state (DeltaNet), as f32.
func (b *Backend) WriteSnapshot(w io.Writer, m model.Snapshot) error {
	p, ok := m.(*snapshot)
	if !ok || p.b != b {
		return errors.New("snapshot comes from another backend")
	}
	sw := stateio.NewWriter(w)
	sw.Int(stateVersion)
	sw.Ints(p.tokens)
	sw.Int(p.sampled)
	sw.Int(p.ropeNext)
	sw.Int(len(p.layers))
	for i := range p.layers {
		p.layers[i].write(sw)
	}
	return sw.Err()
}

// ReadSnapshot implements model.StateCodec.
func (b *Backend) ReadSnapshot(r io.Reader) (model.Snapshot, error) {
	sr := stateio.NewReader(r)
	if v := sr.Int(); sr.Err() == nil && v != stateVersion {
		return nil, fmt.Errorf("cpu snapshot format version %d, this build reads %d", v, stateVersion)
	}
	limit := maxStateTokens
	if b.cfg.MaxPositions > 0 {
		limit = b.cfg.MaxPositions
	}
	p := &snapshot{b: b}
	p.tokens = sr.Ints("the token list", -1, limit)
	p.sampled = sr.Int()
	p.ropeNext = sr.Int()
	n := sr.Int()
	if sr.Err() == nil && n != len(b.w.Layers) {
		return nil, fmt.Errorf("cpu snapshot of %d layers, the model has %d", n, len(b.w.Layers))
	}
	if sr.Err() != nil {
		return nil, sr.Err()
	}
	if sr.Err() == nil && (p.ropeNext < 0 || p.ropeNext > limit) {
		return nil, fmt.Errorf("cpu snapshot's next position %d is outside 0..%d", p.ropeNext, limit)
	}
	for _, id := range p.tokens {
		if id < 0 || id >= b.w.Embed.Out {
			return nil, fmt.Errorf("cpu snapshot holds token %d, outside the vocabulary", id)
		}
	}
	p.layers = make([]layerState, n)
	for i := range p.layers {
		p.layers[i] = b.readLayer(sr, i, len(p.tokens))
	}
	if sr.Err() != nil {
		return nil, sr.Err()
	}
	return p, nil
}

// write writes one layer's state: every field, the empty ones as empty.
func (l *layerState) write(w *stateio.Writer) {
	w.Floats(l.k)
	w.Floats(l.v)
	w.Floats(l.conv)
	w.Floats(l.recurrent)
}

// readLayer reads layer i's state at pos tokens, each length the one the
// config gives.
func (b *Backend) readLayer(r *stateio.Reader, i, pos int) layerState {
	c := &b.cfg
	kv, conv, rec := pos*b.kvWidth(), 0, 0
	if b.w.Layers[i].DeltaNet != nil {
		kv = 0
		conv = (c.ConvKernel - 1) * deltaNetChannels(c)
		rec = c.LinearValueHeads * c.LinearKeyHeadDim * c.LinearValueHeadDim
	}
	what := fmt.Sprintf("layer %d's ", i)
	return layerState{
		k:         r.Floats(what+"keys", kv),
		v:         r.Floats(what+"values", kv),
		conv:      r.Floats(what+"conv state", conv),
		recurrent: r.Floats(what+"recurrent state", rec),
	}
}

var _ model.StateCodec = (*Backend)(nil)
