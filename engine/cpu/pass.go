package cpu

import (
	"errors"
	"fmt"

	"github.com/suzuran-app/suzuran/engine/model"
)

// pass runs each block as the model calls it.
type pass struct {
	b   *Backend
	seq *sequence
	in  model.Input
	ids []int // the pass's tokens
	pos int   // position of ids[0]
	res model.Result
	err error // first failure; later blocks do nothing
}

// Begin implements model.Backend.
func (b *Backend) Begin(s model.Sequence, in model.Input) (model.Pass, error) {
	seq, ok := s.(*sequence)
	if !ok || seq.b != b {
		return nil, errors.New("sequence comes from another backend")
	}
	if seq.layers == nil {
		return nil, errors.New("sequence is closed")
	}
	if seq.busy {
		return nil, errors.New("a pass is already recording on this sequence")
	}
	if seq.broken {
		return nil, errors.New("an earlier pass on this sequence failed: restore a snapshot or start a new sequence")
	}
	ids := in.IDs
	if len(ids) == 0 {
		if seq.sampled < 0 {
			return nil, errors.New("pass has no token ids and the sequence's previous pass sampled none")
		}
		ids = []int{seq.sampled}
	}
	if seq.Pos()+len(ids) > seq.max {
		return nil, fmt.Errorf("sequence is full: %d tokens held, %d more would pass its capacity of %d",
			seq.Pos(), len(ids), seq.max)
	}
	for _, id := range ids {
		if id < 0 || id >= b.w.Embed.Out {
			return nil, fmt.Errorf("token id %d is outside the vocabulary [0, %d)", id, b.w.Embed.Out)
		}
	}
	if in.Sample != nil && !in.Sample.Greedy() && b.sampler == nil {
		return nil, errors.New("the CPU backend was made without a sampler: only greedy sampling is available")
	}
	seq.busy = true
	p := &pass{b: b, seq: seq, in: in, ids: append([]int(nil), ids...), pos: seq.Pos(), res: model.Result{Token: -1}}
	if in.Hidden {
		p.res.Hidden = make([][]float32, len(b.w.Layers)+1)
	}
	return p, nil
}

// tensor unwraps an activation of this backend.
func (p *pass) tensor(a model.Activation) *tensor {
	t, ok := a.(*tensor)
	if !ok {
		p.fail(fmt.Errorf("activation %T does not come from the CPU backend", a))
		return newTensor(0, 0)
	}
	return t
}

func (p *pass) fail(err error) {
	if p.err == nil {
		p.err = err
	}
}

// Embed implements model.Pass.
func (p *pass) Embed(table *model.Matrix) model.Activation {
	x := newTensor(len(p.ids), table.In)
	if p.err != nil {
		return x
	}
	for t, id := range p.ids {
		dequantRow(table, id, x.row(t))
	}
	return x
}

// RMSNorm implements model.Pass.
func (p *pass) RMSNorm(xa model.Activation, weight []float32) model.Activation {
	x := p.tensor(xa)
	y := newTensor(x.rows, x.width)
	if p.err != nil {
		return y
	}
	if len(weight) != x.width {
		p.fail(fmt.Errorf("norm weight has %d elements, activation width is %d", len(weight), x.width))
		return y
	}
	for t := range x.rows {
		rmsNorm(y.row(t), x.row(t), weight, p.b.cfg.RMSNormEps)
	}
	return y
}

// AddRMSNorm implements model.Pass.
func (p *pass) AddRMSNorm(ra, da model.Activation, weight []float32) model.Activation {
	r, d := p.tensor(ra), p.tensor(da)
	if p.err == nil && (r.rows != d.rows || r.width != d.width) {
		p.fail(fmt.Errorf("residual [%d, %d] and update [%d, %d] differ in shape", r.rows, r.width, d.rows, d.width))
	}
	if p.err == nil {
		for i, v := range d.data {
			r.data[i] += v
		}
	}
	return p.RMSNorm(r, weight)
}

// LastRow implements model.Pass.
func (p *pass) LastRow(xa model.Activation) model.Activation {
	x := p.tensor(xa)
	y := newTensor(1, x.width)
	if p.err == nil && x.rows > 0 {
		copy(y.data, x.row(x.rows-1))
	}
	return y
}

// Head implements model.Pass.
func (p *pass) Head(xa model.Activation, lmHead *model.Matrix) model.Activation {
	x := p.tensor(xa)
	y := newTensor(x.rows, lmHead.Out)
	if p.err == nil {
		p.matMul(y.data, x, lmHead)
	}
	return y
}

// matMul is the backend's matMul with the shape checked against x.
func (p *pass) matMul(y []float32, x *tensor, w *model.Matrix) {
	if x.width != w.In {
		p.fail(fmt.Errorf("%s: input width %d, the matrix takes %d", w.Name, x.width, w.In))
		return
	}
	p.b.matMul(y, x.data, x.rows, w)
}

// projection is one matrix applied to a shared input by project.
type projection struct {
	y []float32
	w *model.Matrix
}

// project computes y = x·wᵀ for each projection of the same input x: in one
// parallel region for a few token rows, one matrix product each otherwise.
func (p *pass) project(x *tensor, outs ...projection) {
	for _, o := range outs {
		if x.width != o.w.In {
			p.fail(fmt.Errorf("%s: input width %d, the matrix takes %d", o.w.Name, x.width, o.w.In))
			return
		}
	}
	if x.rows >= gemmMinTokens {
		for _, o := range outs {
			p.b.matMul(o.y, x.data, x.rows, o.w)
		}
		return
	}
	jobs := make([]vecJob, len(outs))
	for i, o := range outs {
		jobs[i] = vecJob{y: o.y, x: x.data, rows: x.rows, w: o.w}
	}
	p.b.matVecs(jobs)
}

// Sample implements model.Pass.
func (p *pass) Sample(la model.Activation, s *model.Sampling) {
	l := p.tensor(la)
	if p.err != nil || l.rows == 0 {
		return
	}
	row := l.row(l.rows - 1)
	if s.Greedy() {
		p.res.Token = model.ArgMax(row)
		return
	}
	history := make([]int, 0, len(p.seq.tokens)+len(p.ids))
	history = append(append(history, p.seq.tokens...), p.ids...)
	p.res.Token = p.b.sampler.Sample(row, s, history)
}

// Hidden implements model.Pass.
func (p *pass) Hidden(index int, ra model.Activation) {
	if !p.in.Hidden || p.err != nil {
		return
	}
	r := p.tensor(ra)
	if index < 0 || index >= len(p.res.Hidden) {
		p.fail(fmt.Errorf("hidden state index %d outside [0, %d)", index, len(p.res.Hidden)))
		return
	}
	p.res.Hidden[index] = append([]float32(nil), r.data...)
}

// Logits implements model.Pass. The logits tensor is not used after this,
// so the result takes its memory.
func (p *pass) Logits(la model.Activation) {
	if p.err == nil {
		p.res.Logits = p.tensor(la).data
	}
}

// Submit implements model.Pass: the work is done, so the sequence advances.
func (p *pass) Submit() {
	if !p.seq.busy {
		return
	}
	p.seq.busy = false
	if p.err != nil {
		// Some layers may have advanced and others not: the state is no
		// longer a state of any token prefix.
		p.seq.broken = true
		return
	}
	p.seq.tokens = append(p.seq.tokens, p.ids...)
	p.seq.sampled = p.res.Token
}

// Wait implements model.Pass.
func (p *pass) Wait() (model.Result, error) {
	if p.seq.busy {
		p.Submit()
	}
	if p.err != nil {
		return model.Result{Token: -1}, p.err
	}
	return p.res, nil
}
