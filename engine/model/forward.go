package model

import "fmt"

// Forward calls the model's blocks on p: embedding, then each layer
// (h = x + Mixer(norm_in(x)); x = h + MoE(norm_post(h))), then the head and
// the sample block as in asks. The residual add is fused with the norm that
// follows it, so the final norm is the last layer's AddRMSNorm.
func Forward(p Pass, w *Weights, in Input) {
	x := p.Embed(&w.Embed)
	p.Hidden(0, x)
	h := p.RMSNorm(x, w.Layers[0].InputNorm)
	for i := range w.Layers {
		layer := &w.Layers[i]
		var mixed Activation
		if layer.DeltaNet != nil {
			mixed = p.DeltaNet(i, layer.DeltaNet, h)
		} else {
			mixed = p.Attention(i, layer.Attention, h)
		}
		h = p.AddRMSNorm(x, mixed, layer.PostNorm)
		experts := p.MoE(i, &layer.MoE, h)
		next := w.FinalNorm
		if i+1 < len(w.Layers) {
			next = w.Layers[i+1].InputNorm
		}
		h = p.AddRMSNorm(x, experts, next)
		p.Hidden(i+1, x)
	}
	if in.Logits == LogitsNone && in.Sample == nil {
		return
	}
	if in.Logits != LogitsAll {
		h = p.LastRow(h)
	}
	logits := p.Head(h, &w.LMHead)
	if in.Logits != LogitsNone {
		p.Logits(logits)
	}
	if in.Sample != nil {
		p.Sample(logits, in.Sample)
	}
}

// Start begins a pass of b over seq, records the model into it and submits
// it; the caller collects the result with Wait. Starting the next decode step
// (with empty Input.IDs) before waiting on this one lets a GPU backend keep
// the device busy.
func Start(b Backend, w *Weights, seq Sequence, in Input) (Pass, error) {
	if n := in.Tokens(); seq.Pos()+n > seq.MaxTokens() {
		return nil, fmt.Errorf("sequence is full: %d tokens held, %d more would pass its capacity of %d",
			seq.Pos(), n, seq.MaxTokens())
	}
	p, err := b.Begin(seq, in)
	if err != nil {
		return nil, err
	}
	recorded := false
	defer func() {
		if !recorded {
			Abandon(p) // Forward panicked: release the recording, then let the panic go on
		}
	}()
	Forward(p, w, in)
	recorded = true
	p.Submit()
	return p, nil
}

// Abandoner is a Pass that holds resources while it records: a GPU pass
// holds a command buffer, and on Metal an autorelease pool on a locked OS
// thread, until Submit. Abandon ends a pass that will never be submitted:
// nothing of it runs, the sequence stays as it was before Begin, and the
// resources are released, so the backend can begin the next pass. It does
// nothing once the pass was submitted.
type Abandoner interface {
	Abandon()
}

// Abandon abandons p if it holds resources while recording. Code that
// records a pass itself calls it from a deferred function, so that a panic
// while recording does not leave the device recording (Start does).
func Abandon(p Pass) {
	if a, ok := p.(Abandoner); ok {
		a.Abandon()
	}
}

// Run is Start followed by Wait.
func Run(b Backend, w *Weights, seq Sequence, in Input) (Result, error) {
	p, err := Start(b, w, seq, in)
	if err != nil {
		return Result{Token: -1}, err
	}
	return p.Wait()
}

// Prefill feeds ids to seq in chunks of at most chunk tokens (0: one pass)
// and returns the last chunk's result, whose logits and sample follow in.
// Earlier chunks return nothing, which spares them the head. in.IDs is
// ignored; in.Hidden applies to the last chunk only.
func Prefill(b Backend, w *Weights, seq Sequence, ids []int, chunk int, in Input) (Result, error) {
	if len(ids) == 0 {
		return Result{Token: -1}, fmt.Errorf("prefill needs at least one token")
	}
	if chunk <= 0 || chunk > len(ids) {
		chunk = len(ids)
	}
	for len(ids) > chunk {
		if _, err := Run(b, w, seq, Input{IDs: ids[:chunk]}); err != nil {
			return Result{Token: -1}, err
		}
		ids = ids[chunk:]
	}
	in.IDs = ids
	return Run(b, w, seq, in)
}
