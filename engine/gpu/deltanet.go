package gpu

import (
	"fmt"

	"github.com/suzuran-app/suzuran/engine/model"
)

// DeltaNet implements model.Blocks: the projections over every row, the
// conv and the recurrence per segment on its sequence's state.
func (p *pass) DeltaNet(layer int, w *model.DeltaNet, x model.Activation) model.Activation {
	in := p.input(x, "deltanet")
	p.startBlock()
	c := &p.b.cfg
	out := p.newAct(x.Rows(), c.HiddenSize, false)
	dd := p.b.deltas[w]
	if in == nil || dd == nil || p.segs[0].seq.state[layer] == nil {
		p.enc.fail(fmt.Errorf("layer %d: no DeltaNet prepared for it", layer))
		return out
	}
	t := in.rows
	shape := deltaNetShape{keyHeads: c.LinearKeyHeads, valueHeads: c.LinearValueHeads,
		keyDim: c.LinearKeyHeadDim, valueDim: c.LinearValueHeadDim}
	channels := w.QKV.Out
	vw := shape.valueHeads * shape.valueDim
	qkv := p.newAct(t, channels, false)
	z := p.newAct(t, vw, false)
	a := p.newAct(t, shape.valueHeads, false)
	bb := p.newAct(t, shape.valueHeads, false)
	mixed := p.newAct(t, channels, false)
	o := p.newAct(t, vw, false)
	p.enc.independent(func() {
		p.project(&w.QKV, in, qkv)
		p.project(&w.Z, in, z)
		p.project(&w.A, in, a)
		p.project(&w.B, in, bb)
	})
	// The decode steps' conv and recurrence run together, each sequence on
	// its own state; every other segment's on its own rows. They read and
	// advance disjoint state, so they may overlap.
	var convStates, states []loc
	for i := range p.segs {
		if s := &p.segs[i]; s.rows == 1 {
			convStates = append(convStates, loc{buf: s.seq.conv[layer]})
			states = append(states, loc{buf: s.seq.state[layer]})
		}
	}
	p.enc.independent(func() {
		if p.steps > 0 {
			p.enc.convSteps(qkv.rowsOf(0, p.steps), loc{buf: dd.conv}, convStates, c.ConvKernel, mixed.rowsOf(0, p.steps))
		}
		for i := range p.segs {
			if s := &p.segs[i]; s.rows > 1 {
				p.enc.conv(qkv.rowsOf(s.row0, s.rows), loc{buf: dd.conv}, loc{buf: s.seq.conv[layer]}, c.ConvKernel,
					mixed.rowsOf(s.row0, s.rows))
			}
		}
	})
	p.enc.independent(func() {
		if p.steps > 0 {
			p.enc.deltaNetSteps(shape, deltaNetBufs{conv: mixed.loc, a: a.loc, b: bb.loc,
				aLog: loc{buf: dd.aLog}, dtBias: loc{buf: dd.dtBias}, o: o.loc}, states)
		}
		for i := range p.segs {
			if s := &p.segs[i]; s.rows > 1 {
				p.enc.deltaNetScan(shape, s.rows, deltaNetBufs{conv: mixed.rowsOf(s.row0, s.rows).loc,
					a: a.rowsOf(s.row0, s.rows).loc, b: bb.rowsOf(s.row0, s.rows).loc,
					aLog: loc{buf: dd.aLog}, dtBias: loc{buf: dd.dtBias}, state: loc{buf: s.seq.state[layer]},
					o: o.rowsOf(s.row0, s.rows).loc})
			}
		}
	})
	p.enc.gatedNorm(gatedNormBufs{o: o.loc, z: z.loc, w: loc{buf: dd.norm}, y: o.loc}, t*shape.valueHeads, shape.valueDim, c.DeltaNetNormEps)
	p.project(&w.Out, o, out)
	return out
}
