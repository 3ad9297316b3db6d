package cpu

import (
	"errors"
	"fmt"
	"runtime"
	"strings"

	"github.com/suzuran-app/suzuran/engine/model"
)

// Options configure the CPU backend. The zero value works.
type Options struct {
	// Threads is the number of goroutines a block uses; 0 means GOMAXPROCS.
	Threads int
	// Sampler chooses tokens for passes that sample with anything but
	// greedy parameters. Without one, such passes fail.
	Sampler model.Sampler
	// Precision of the products with quantized weights; "" is
	// PrecisionFast.
	Precision Precision
	// ISA forces a level of vector instructions (ISAAVX2, ISAGeneric, ...)
	// below the best this machine has; "" picks the best.
	ISA ISA
}

// Backend is the CPU implementation of model.Backend.
type Backend struct {
	cfg     model.Config
	w       *model.Weights
	pool    pool
	sampler model.Sampler
	kern    kernelSet
	// precision of the affine products: PrecisionFast and PrecisionInt8
	// run q8.go's kernels; "" (a Backend literal in the tests) is exact.
	precision Precision
}

// New makes a CPU backend for w, checking that every matrix holds what its
// shape says.
func New(w *model.Weights, opt Options) (*Backend, error) {
	threads := opt.Threads
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	precision, err := ParsePrecision(string(opt.Precision))
	if err != nil {
		return nil, err
	}
	kern, err := kernelsFor(opt.ISA)
	if err != nil {
		return nil, err
	}
	if err := checkWeights(w); err != nil {
		return nil, err
	}
	return &Backend{cfg: w.Config, w: w, pool: pool{threads: threads}, sampler: opt.Sampler,
		kern: kern, precision: precision}, nil
}

func checkWeights(w *model.Weights) error {
	c := &w.Config
	if len(w.Layers) != c.NumLayers || c.NumLayers == 0 {
		return fmt.Errorf("weights have %d layers, config says %d", len(w.Layers), c.NumLayers)
	}
	ms := []*model.Matrix{&w.Embed, &w.LMHead}
	for i := range w.Layers {
		l := &w.Layers[i]
		switch {
		case l.DeltaNet != nil:
			d := l.DeltaNet
			ms = append(ms, &d.QKV, &d.Z, &d.B, &d.A, &d.Out)
		case l.Attention != nil:
			a := l.Attention
			ms = append(ms, &a.Q, &a.K, &a.V, &a.O)
		default:
			return fmt.Errorf("layer %d has no mixer", i)
		}
		m := &l.MoE
		ms = append(ms, &m.Router, &m.SharedGate, &m.SharedUp, &m.SharedDown, &m.SharedExpert)
		for _, e := range [][]model.Matrix{m.Gate, m.Up, m.Down} {
			if len(e) != c.NumExperts {
				return fmt.Errorf("layer %d has %d experts, config says %d", i, len(e), c.NumExperts)
			}
			for j := range e {
				ms = append(ms, &e[j])
			}
		}
	}
	for _, m := range ms {
		if err := checkMatrix(m); err != nil {
			return err
		}
	}
	return checkShapes(w)
}

// checkShapes verifies that every matrix and vector has the shape the
// config implies. The loader checks this against the checkpoint; the
// backend checks it again because its assembly kernels index without
// bounds checks, so weights built any other way must not reach them wrong.
func checkShapes(w *model.Weights) error {
	c := &w.Config
	H := c.HiddenSize
	if c.NumKVHeads <= 0 || c.NumHeads%c.NumKVHeads != 0 || c.LinearKeyHeads <= 0 ||
		c.LinearValueHeads%c.LinearKeyHeads != 0 || c.RotaryDim%2 != 0 || c.RotaryDim > c.HeadDim ||
		c.ConvKernel < 1 || c.ExpertsPerToken < 1 || c.ExpertsPerToken > c.NumExperts {
		return fmt.Errorf("config: inconsistent head counts, rotary dims, conv kernel or experts per token: %+v", *c)
	}
	var errs []string
	mat := func(m *model.Matrix, out, in int) {
		if m.Out != out || m.In != in {
			errs = append(errs, fmt.Sprintf("%s is [%d, %d], the config implies [%d, %d]", m.Name, m.Out, m.In, out, in))
		}
	}
	vec := func(name string, v []float32, n int) {
		if len(v) != n {
			errs = append(errs, fmt.Sprintf("%s has %d elements, the config implies %d", name, len(v), n))
		}
	}
	mat(&w.Embed, w.Embed.Out, H)
	mat(&w.LMHead, w.LMHead.Out, H)
	vec("final norm", w.FinalNorm, H)
	for i := range w.Layers {
		l := &w.Layers[i]
		name := fmt.Sprintf("layer %d ", i)
		vec(name+"input norm", l.InputNorm, H)
		vec(name+"post-attention norm", l.PostNorm, H)
		if d := l.DeltaNet; d != nil {
			C, Hv, Dv := deltaNetChannels(c), c.LinearValueHeads, c.LinearValueHeadDim
			mat(&d.QKV, C, H)
			mat(&d.Z, Hv*Dv, H)
			mat(&d.B, Hv, H)
			mat(&d.A, Hv, H)
			mat(&d.Out, H, Hv*Dv)
			vec(name+"A_log", d.ALog, Hv)
			vec(name+"dt_bias", d.DtBias, Hv)
			vec(name+"DeltaNet norm", d.Norm, Dv)
			if len(d.Conv) != C {
				errs = append(errs, fmt.Sprintf("%sconv1d has %d channels, the config implies %d", name, len(d.Conv), C))
			}
			for ch, taps := range d.Conv {
				if len(taps) != c.ConvKernel {
					errs = append(errs, fmt.Sprintf("%sconv1d channel %d has %d taps, the config implies %d", name, ch, len(taps), c.ConvKernel))
					break
				}
			}
		}
		if a := l.Attention; a != nil {
			D := c.HeadDim
			mat(&a.Q, 2*c.NumHeads*D, H)
			mat(&a.K, c.NumKVHeads*D, H)
			mat(&a.V, c.NumKVHeads*D, H)
			mat(&a.O, H, c.NumHeads*D)
			vec(name+"q_norm", a.QNorm, D)
			vec(name+"k_norm", a.KNorm, D)
		}
		m := &l.MoE
		mat(&m.Router, c.NumExperts, H)
		mat(&m.SharedGate, c.SharedIntermediate, H)
		mat(&m.SharedUp, c.SharedIntermediate, H)
		mat(&m.SharedDown, H, c.SharedIntermediate)
		mat(&m.SharedExpert, 1, H)
		for e := range m.Gate {
			mat(&m.Gate[e], c.MoEIntermediate, H)
			mat(&m.Up[e], c.MoEIntermediate, H)
			mat(&m.Down[e], H, c.MoEIntermediate)
		}
	}
	if len(errs) > 0 {
		if len(errs) > 5 {
			errs = append(errs[:5], fmt.Sprintf("and %d more", len(errs)-5))
		}
		return fmt.Errorf("weights do not match the config: %s", strings.Join(errs, "; "))
	}
	return nil
}

// Name implements model.Backend.
func (b *Backend) Name() string {
	return fmt.Sprintf("cpu: %d threads, %s", b.pool.threads, b.Kernels())
}

// Kernels says which kernels the backend runs.
func (b *Backend) Kernels() KernelInfo {
	k := KernelInfo{ISA: b.kern.isa, Precision: b.precision}
	if k.Precision == "" {
		k.Precision = PrecisionExact
	}
	return k
}

// Close implements model.Backend; the CPU backend holds nothing to release.
func (b *Backend) Close() error { return nil }

// tensor is the CPU's activation: [rows, width] float32, row-major.
type tensor struct {
	rows, width int
	data        []float32
}

func (t *tensor) Rows() int  { return t.rows }
func (t *tensor) Width() int { return t.width }

func newTensor(rows, width int) *tensor {
	return &tensor{rows: rows, width: width, data: make([]float32, rows*width)}
}

func (t *tensor) row(i int) []float32 { return t.data[i*t.width : (i+1)*t.width] }

// sequence is one sequence's state.
type sequence struct {
	b      *Backend
	max    int
	tokens []int // every token consumed, in order; len is the position
	// sampled is the token the last pass chose, fed to a pass without IDs;
	// -1 when there is none.
	sampled int
	layers  []layerState
	// ropeNext is the M-RoPE position of the next text row: Pos, plus the
	// rope delta once a pass had images.
	ropeNext int
	busy     bool // a pass is recording
	// broken is set when a pass failed halfway: its state is then no
	// token prefix's state until a snapshot is restored.
	broken bool
}

// layerState is one layer's part of a sequence: the KV cache of an
// attention layer, or the conv and recurrent state of a DeltaNet layer.
type layerState struct {
	// k and v are [positions, KVHeads·HeadDim]; k after norm and RoPE.
	k, v []float32
	// conv is the last ConvKernel-1 pre-conv rows, [K-1, channels].
	conv []float32
	// recurrent is S per value head, stored transposed: [Hv, Dv, Dk].
	recurrent []float32
}

// NewSequence implements model.Backend.
func (b *Backend) NewSequence(maxTokens int) (model.Sequence, error) {
	c := &b.cfg
	if maxTokens <= 0 {
		return nil, fmt.Errorf("a sequence needs room for at least one token, asked for %d", maxTokens)
	}
	if c.MaxPositions > 0 && maxTokens > c.MaxPositions {
		return nil, fmt.Errorf("asked for %d tokens, the model's max_position_embeddings is %d", maxTokens, c.MaxPositions)
	}
	s := &sequence{b: b, max: maxTokens, sampled: -1, layers: make([]layerState, c.NumLayers)}
	for i := range s.layers {
		if b.w.Layers[i].DeltaNet != nil {
			ch := deltaNetChannels(c)
			s.layers[i].conv = make([]float32, (c.ConvKernel-1)*ch)
			s.layers[i].recurrent = make([]float32, c.LinearValueHeads*c.LinearKeyHeadDim*c.LinearValueHeadDim)
		}
	}
	return s, nil
}

// SequenceBytes implements model.SequenceSizer: f32 K and V rows of every
// attention layer per token, the token ids, and the DeltaNet conv and
// recurrent state.
func (b *Backend) SequenceBytes(tokens int) int64 {
	c := &b.cfg
	var perToken, state int64 = 8, 0
	for i := range b.w.Layers {
		if b.w.Layers[i].DeltaNet != nil {
			state += 4 * int64((c.ConvKernel-1)*deltaNetChannels(c)+c.LinearValueHeads*c.LinearKeyHeadDim*c.LinearValueHeadDim)
		} else {
			perToken += 2 * 4 * int64(b.kvWidth())
		}
	}
	return state + perToken*int64(tokens)
}

// kvWidth is the width of one position's K (or V) row in an attention
// layer's cache.
func (b *Backend) kvWidth() int { return b.cfg.NumKVHeads * b.cfg.HeadDim }

func deltaNetChannels(c *model.Config) int {
	return 2*c.LinearKeyHeads*c.LinearKeyHeadDim + c.LinearValueHeads*c.LinearValueHeadDim
}

func (s *sequence) Pos() int       { return len(s.tokens) }
func (s *sequence) MaxTokens() int { return s.max }
func (s *sequence) Close() error {
	s.layers, s.tokens = nil, nil
	return nil
}

// snapshot is a deep copy of a sequence's state.
type snapshot struct {
	b        *Backend
	tokens   []int
	sampled  int
	ropeNext int
	layers   []layerState
}

func (p *snapshot) Pos() int      { return len(p.tokens) }
func (p *snapshot) Tokens() []int { return p.tokens }
func (p *snapshot) Bytes() int64 {
	n := int64(8 * len(p.tokens))
	for _, l := range p.layers {
		n += 4 * int64(len(l.k)+len(l.v)+len(l.conv)+len(l.recurrent))
	}
	return n
}

// copyLayers copies the state of the first pos positions: an attention
// layer's first pos K and V rows (the cache grows by appending, so nothing
// past them is in use), and every DeltaNet state whole.
func copyLayers(src []layerState, pos, kvWidth int) []layerState {
	dst := make([]layerState, len(src))
	n := pos * kvWidth
	for i, l := range src {
		dst[i] = layerState{
			k:         append([]float32(nil), l.k[:min(n, len(l.k))]...),
			v:         append([]float32(nil), l.v[:min(n, len(l.v))]...),
			conv:      append([]float32(nil), l.conv...),
			recurrent: append([]float32(nil), l.recurrent...),
		}
	}
	return dst
}

func (s *sequence) Snapshot() (model.Snapshot, error) {
	if s.busy {
		return nil, errors.New("cannot snapshot a sequence while a pass is recording on it")
	}
	if s.broken {
		// A pass that failed halfway may have appended K and V rows
		// for tokens it never consumed: the state is no prefix's.
		return nil, errors.New("cannot snapshot a sequence whose last pass failed; restore a snapshot first")
	}
	return &snapshot{b: s.b, tokens: append([]int(nil), s.tokens...), sampled: s.sampled, ropeNext: s.ropeNext,
		layers: copyLayers(s.layers, len(s.tokens), s.b.kvWidth())}, nil
}

func (s *sequence) Restore(m model.Snapshot) error {
	p, ok := m.(*snapshot)
	if !ok || p.b != s.b {
		return errors.New("snapshot comes from another backend")
	}
	if s.busy {
		return errors.New("cannot restore a sequence while a pass is recording on it")
	}
	if len(p.tokens) > s.max {
		return fmt.Errorf("snapshot holds %d tokens, the sequence only has room for %d", len(p.tokens), s.max)
	}
	s.tokens = append(s.tokens[:0], p.tokens...)
	s.sampled = p.sampled
	s.ropeNext = p.ropeNext
	s.layers = copyLayers(p.layers, len(p.tokens), s.b.kvWidth())
	s.broken = false
	return nil
}
