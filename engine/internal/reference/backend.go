package reference

import (
	"errors"
	"fmt"

	"github.com/suzuran-app/suzuran/engine/model"
)

// Backend is the float64 model as a model.Backend: each block is the
// function of model.go of the same name, on float64 rows, so that a test
// runs it through model.Run as it runs the CPU and GPU backends. It is
// slow (every weight row is decoded for every pass) and meant for the
// test models only.
type Backend struct {
	w       *model.Weights
	sampler model.Sampler
}

// New is the reference backend over w. Passes that sample with anything
// but greedy parameters use sampler; with none, they fail.
func New(w *model.Weights, sampler model.Sampler) *Backend {
	return &Backend{w: w, sampler: sampler}
}

// Name says what this backend is.
func (b *Backend) Name() string { return "reference: float64" }

// Close does nothing: the backend holds no resources.
func (b *Backend) Close() error { return nil }

// NewSequence is an empty sequence with room for maxTokens tokens.
func (b *Backend) NewSequence(maxTokens int) (model.Sequence, error) {
	if maxTokens <= 0 {
		return nil, fmt.Errorf("a sequence needs room for at least one token, asked for %d", maxTokens)
	}
	return &sequence{state: NewState(b.w), max: maxTokens, next: -1}, nil
}

// sequence is one sequence's State and the tokens it has consumed.
type sequence struct {
	state  *State
	max    int
	tokens []int
	next   int // the token the last pass sampled, −1 when none
}

func (s *sequence) Pos() int       { return s.state.Pos }
func (s *sequence) MaxTokens() int { return s.max }
func (s *sequence) Close() error   { return nil }

func (s *sequence) Snapshot() (model.Snapshot, error) {
	return &snapshot{state: s.state.Clone(), tokens: append([]int(nil), s.tokens...)}, nil
}

func (s *sequence) Restore(snap model.Snapshot) error {
	sn, ok := snap.(*snapshot)
	if !ok {
		return fmt.Errorf("the snapshot is %T, not one of the reference backend", snap)
	}
	s.state, s.tokens, s.next = sn.state.Clone(), append([]int(nil), sn.tokens...), -1
	return nil
}

type snapshot struct {
	state  *State
	tokens []int
}

func (s *snapshot) Pos() int      { return s.state.Pos }
func (s *snapshot) Tokens() []int { return s.tokens }
func (s *snapshot) Bytes() int64  { return 0 }

// rows is an Activation: a block of float64 rows.
type rows [][]float64

func (r rows) Rows() int  { return len(r) }
func (r rows) Width() int { return len(r[0]) }

// Begin starts a pass over one segment: the reference runs one sequence
// per pass.
func (b *Backend) Begin(segs []model.Segment) (model.Pass, error) {
	if len(segs) != 1 {
		return nil, fmt.Errorf("the reference backend runs one sequence per pass, not %d", len(segs))
	}
	seq, in := segs[0].Seq, segs[0].In
	s, ok := seq.(*sequence)
	if !ok {
		return nil, fmt.Errorf("the sequence is %T, not one of the reference backend", seq)
	}
	ids := in.IDs
	if len(ids) == 0 {
		if s.next < 0 {
			return nil, errors.New("a pass without ids feeds the token the previous pass sampled, and none did")
		}
		ids = []int{s.next}
	}
	pos := in.Positions
	if pos == nil {
		for t := range ids {
			pos = append(pos, model.TextPosition(s.state.RopeNext+t))
		}
	}
	return &pass{b: b, seq: s, in: in, ids: ids, pos: pos, res: model.Result{Token: -1}}, nil
}

// ImageInputs implements model.ImageInputs: passes take embeddings and
// M-RoPE positions.
func (b *Backend) ImageInputs() {}

// EncodeImage implements model.VisionEncoder with VisionTower.
func (b *Backend) EncodeImage(w *model.VisionWeights, im *model.Image) ([]float32, error) {
	if err := w.Config.CheckImage(im); err != nil {
		return nil, err
	}
	return float32s(VisionTower(w, im)), nil
}

// pass runs each block as it is called.
type pass struct {
	b   *Backend
	seq *sequence
	in  model.Input
	ids []int
	pos [][3]int // each row's M-RoPE position
	res model.Result
	err error
}

func (p *pass) cfg() *model.Config { return &p.b.w.Config }

func (p *pass) Embed(table *model.Matrix) model.Activation {
	for _, id := range p.ids {
		if id < 0 || id >= table.Out {
			p.err = fmt.Errorf("token id %d outside the vocabulary [0, %d)", id, table.Out)
			return rows(make([][]float64, len(p.ids)))
		}
	}
	x := Embed(table, p.ids)
	for t, e := range p.in.Embeds {
		if e != nil {
			x[t] = Float64(e)
		}
	}
	return rows(x)
}

func (p *pass) RMSNorm(x model.Activation, weight []float32) model.Activation {
	return rows(RMSNormRows(x.(rows), weight, float64(p.cfg().RMSNormEps)))
}

func (p *pass) AddRMSNorm(residual, delta model.Activation, weight []float32) model.Activation {
	r, d := residual.(rows), delta.(rows)
	copy(r, Add(r, d))
	return p.RMSNorm(r, weight)
}

func (p *pass) DeltaNet(layer int, w *model.DeltaNet, x model.Activation) model.Activation {
	return rows(GatedDeltaNet(p.cfg(), w, &p.seq.state.Layers[layer], x.(rows)))
}

func (p *pass) Attention(layer int, w *model.Attention, x model.Activation) model.Activation {
	return rows(AttentionAt(p.cfg(), w, &p.seq.state.Layers[layer], x.(rows), p.pos))
}

func (p *pass) MoE(layer int, w *model.MoE, x model.Activation) model.Activation {
	return rows(SparseMoE(p.cfg(), w, x.(rows)))
}

func (p *pass) LastRow(x model.Activation) model.Activation {
	r := x.(rows)
	return r[len(r)-1:]
}

func (p *pass) Head(x model.Activation, lmHead *model.Matrix) model.Activation {
	return rows(LinearRows(lmHead, x.(rows)))
}

func (p *pass) Hidden(index int, residual model.Activation) {
	if p.in.Hidden {
		p.res.Hidden = append(p.res.Hidden, float32s(residual.(rows)))
	}
}

func (p *pass) Logits(logits model.Activation) {
	p.res.Logits = append(p.res.Logits, float32s(logits.(rows))...)
}

func (p *pass) Sample(logits model.Activation) {
	s := p.in.Sample
	if s == nil {
		return
	}
	r := logits.(rows)
	last := float32s(r[len(r)-1:])
	switch {
	case s.Greedy():
		p.res.Token = model.ArgMax(last)
	case p.b.sampler != nil:
		history := append(append([]int(nil), p.seq.tokens...), p.ids...)
		p.res.Token = p.b.sampler.Sample(last, s, history)
	default:
		p.err = errors.New("the reference backend samples greedily only unless it is given a sampler")
	}
}

// Submit records that the sequence has consumed the pass's tokens (the
// blocks have already advanced its state).
func (p *pass) Submit() {
	p.seq.state.Pos += len(p.ids)
	for _, q := range p.pos {
		p.seq.state.RopeNext = max(p.seq.state.RopeNext, q[0]+1, q[1]+1, q[2]+1)
	}
	p.seq.tokens = append(p.seq.tokens, p.ids...)
	p.seq.next = p.res.Token
}

func (p *pass) Wait() ([]model.Result, error) {
	if p.err != nil {
		return nil, p.err
	}
	return []model.Result{p.res}, nil
}

// float32s flattens rows into f32, as a Result holds them.
func float32s(x [][]float64) []float32 {
	var out []float32
	for _, r := range x {
		for _, v := range r {
			out = append(out, float32(v))
		}
	}
	return out
}
