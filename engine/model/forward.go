package model

// Forward calls the model's blocks on p, a pass over segs: the embedding,
// then each layer (h = x + Mixer(norm_in(x)); x = h + MoE(norm_post(h))) on
// every row, then the head on the last row of each segment that wants an
// output, then each segment's logits and sample. A lone segment may ask for
// LogitsAll, and the head then runs on all its rows. The residual add is
// fused with the norm that follows it, so the final norm is the last
// layer's AddRMSNorm.
func Forward(p Pass, w *Weights, segs []Segment) {
	forward(p, w, segs, nil)
}

// forward is Forward that asks stop before each layer's mixer and MoE and
// returns false, leaving the rest unrecorded, once it says yes.
func forward(p Pass, w *Weights, segs []Segment, stop func() bool) bool {
	h, ok := layers(p, w, stop)
	if !ok {
		return false
	}
	logits, sample, all := false, false, false
	for i := range segs {
		logits = logits || segs[i].In.Logits != LogitsNone
		sample = sample || segs[i].In.Sample != nil
		all = all || segs[i].In.Logits == LogitsAll
	}
	if !logits && !sample {
		return true
	}
	if !all {
		h = p.LastRow(h)
	}
	out := p.Head(h, &w.LMHead)
	if logits {
		p.Logits(out)
	}
	if sample {
		p.Sample(out)
	}
	return true
}

// layers runs the embedding and every layer, returning the final-normed
// rows; false when stop (if any) said yes before a layer's mixer or MoE.
func layers(p Blocks, w *Weights, stop func() bool) (Activation, bool) {
	x := p.Embed(&w.Embed)
	p.Hidden(0, x)
	h := p.RMSNorm(x, w.Layers[0].InputNorm)
	for i := range w.Layers {
		if stop != nil && stop() {
			return h, false
		}
		layer := &w.Layers[i]
		var mixed Activation
		if layer.DeltaNet != nil {
			mixed = p.DeltaNet(i, layer.DeltaNet, h)
		} else {
			mixed = p.Attention(i, layer.Attention, h)
		}
		h = p.AddRMSNorm(x, mixed, layer.PostNorm)
		if stop != nil && stop() {
			return h, false
		}
		experts := p.MoE(i, &layer.MoE, h)
		next := w.FinalNorm
		if i+1 < len(w.Layers) {
			next = w.Layers[i+1].InputNorm
		}
		h = p.AddRMSNorm(x, experts, next)
		p.Hidden(i+1, x)
	}
	return h, true
}
