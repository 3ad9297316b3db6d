package gpu

import (
	"fmt"

	"github.com/suzuran-app/suzuran/engine/model"
)

// LastRow implements model.Blocks: the last row of each segment that wants
// an output, in segment order. A pass of one sequence views its last row;
// a batch copies the rows into a block of their own (unless they already
// are one, as in a step where every sequence decodes).
func (p *pass) LastRow(x model.Activation) model.Activation {
	in := p.input(x, "last row")
	if in == nil {
		return x
	}
	if in.rows != p.rows {
		p.enc.fail(fmt.Errorf("LastRow of %d rows in a pass of %d", in.rows, p.rows))
		return x
	}
	if len(p.segs) == 1 {
		r := in.row(in.rows - 1)
		p.gens[r] = p.gens[in]
		return r
	}
	inPlace := p.outputs == p.rows
	for i := range p.segs {
		s := &p.segs[i]
		inPlace = inPlace && s.rows == 1 && s.out == s.row0
	}
	if inPlace {
		return in
	}
	p.startBlock()
	y := p.newAct(p.outputs, in.width, false)
	p.enc.independent(func() {
		for i := range p.segs {
			if s := &p.segs[i]; s.out >= 0 {
				p.enc.copyF32(in.row(s.row0+s.rows-1).loc, y.row(s.out).loc, in.width)
			}
		}
	})
	return y
}

// Head implements model.Blocks.
func (p *pass) Head(x model.Activation, lmHead *model.Matrix) model.Activation {
	in := p.input(x, "head")
	p.startBlock()
	logits := p.newAct(x.Rows(), lmHead.Out, true)
	if in == nil {
		return logits
	}
	p.project(lmHead, in, logits)
	return logits
}

// outputRow is segment i's row of logits: its LastRow row, or the last row
// when a lone segment asked for every row.
func (p *pass) outputRow(l *act, i int) *act {
	s := &p.segs[i]
	switch {
	case l.rows == p.outputs && s.out >= 0:
		return l.row(s.out)
	case len(p.segs) == 1 && l.rows == p.rows:
		return l.row(l.rows - 1)
	}
	p.enc.fail(fmt.Errorf("logits of %d rows do not hold segment %d's row", l.rows, i))
	return nil
}

// Sample implements model.Pass. The greedy choices without penalties —
// every sequence of a plain greedy decode step — run as one argmax over
// their rows (two dispatches for up to stepMaxSeqs sequences); the other
// choices as sample records them.
func (p *pass) Sample(logits model.Activation) {
	var g greedyRows
	for i := range p.segs {
		if s := p.segs[i].in.Sample; s != nil {
			p.sample(logits, i, s, &g)
		}
	}
	if len(g.rows) == 0 {
		return
	}
	vocab := logits.Width()
	chunks := ceilDiv(vocab, argmaxChunk)
	n := min(len(g.rows), stepMaxSeqs)
	p.enc.argmaxSteps(g.rows, vocab, p.scratch(4*n*chunks), p.scratch(4*n*chunks), g.outs)
}

// greedyRows collects the plain greedy choices of a batch: each row of
// logits and the ring slot its id goes to.
type greedyRows struct {
	rows, outs []loc
}

// sample records segment i's choice: the chosen id goes to the sequence's
// next ring slot, where the next pass's embedding gather finds it. Greedy
// and top-k draws (1 ≤ TopK ≤ 256, below the vocabulary) run on the device
// with the penalties; other parameters (top-k off, which walks the whole
// vocabulary in id order) are sampled on the host after the pass, and the
// sequence's next pass may begin only once this one has been waited on. A
// greedy choice without penalties is left to the caller's one argmax over
// every such row, collected in g.
func (p *pass) sample(logits model.Activation, i int, s *model.Sampling, g *greedyRows) {
	in := p.input(logits, "sample")
	if in == nil {
		return
	}
	last := p.outputRow(in, i)
	if last == nil {
		return
	}
	sg := &p.segs[i]
	slot := sg.seq.ring
	sg.sampleSlot = slot
	vocab := in.width
	position := sg.pos0 + sg.rows // the history's length: the position of the chosen token
	greedy := s.Temperature <= 0
	if !greedy && (s.TopK <= 0 || s.TopK > topkMax || s.TopK >= vocab) {
		sg.hostSample = s
		sg.hostRow = last
		return
	}
	row := last.loc
	if penaltiesOn(s) {
		work, err := p.sc.pass.alloc(4 * vocab)
		if err != nil {
			p.enc.fail(err)
			return
		}
		p.enc.copyF32(row, work, vocab)
		p.enc.penalties(s, loc{buf: sg.seq.history}, position, p.scratch(4*vocab), p.scratch(4*vocab), work)
		row = work
	}
	if greedy && !penaltiesOn(s) {
		g.rows = append(g.rows, row)
		g.outs = append(g.outs, sg.seq.tokenLoc(slot))
		return
	}
	if greedy {
		chunks := ceilDiv(vocab, argmaxChunk)
		p.enc.argmax(row, vocab, p.scratch(4*chunks), p.scratch(4*chunks), sg.seq.tokenLoc(slot))
		return
	}
	chunks := ceilDiv(vocab, topkChunk)
	p.enc.topK(s, topKBufs{logits: row, candVal: p.scratch(4 * chunks * s.TopK), candID: p.scratch(4 * chunks * s.TopK),
		out: sg.seq.tokenLoc(slot)}, vocab, position)
}

// penaltiesOn is engine/sample's rule for when penalties change logits.
func penaltiesOn(s *model.Sampling) bool {
	return (s.RepetitionPenalty != 0 && s.RepetitionPenalty != 1) || s.PresencePenalty != 0 || s.FrequencyPenalty != 0
}
