package model

import (
	"errors"
	"fmt"
)

// Forward calls the model's blocks on p: embedding, then each layer
// (h = x + Mixer(norm_in(x)); x = h + MoE(norm_post(h))), then the head and
// the sample block as in asks. The residual add is fused with the norm that
// follows it, so the final norm is the last layer's AddRMSNorm.
func Forward(p Pass, w *Weights, in Input) {
	h, _ := layers(p, w, nil)
	head(p, w, in, h)
}

// head is Forward after the layers.
func head(p Pass, w *Weights, in Input, h Activation) {
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

// ForwardBatch is Forward over a batched pass: the layers on every row, then
// the head on the last row of each segment that wants an output, then each
// segment's logits and sample. A lone segment may ask for LogitsAll, and the
// head then runs on all its rows.
func ForwardBatch(p BatchPass, w *Weights, segs []Segment) {
	forwardBatch(p, w, segs, nil)
}

// forwardBatch is ForwardBatch that asks stop before each layer and returns
// false, leaving the rest unrecorded, once it says yes.
func forwardBatch(p BatchPass, w *Weights, segs []Segment, stop func() bool) bool {
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
		p.SampleEach(out)
	}
	return true
}

// layers runs the embedding and every layer, returning the final-normed
// rows; false when stop (if any) said yes before a layer.
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

// CheckBatch verifies what every backend requires of a batch: at least one
// segment, each sequence once and with room for its tokens, and LogitsAll
// only in a batch of one.
func CheckBatch(segs []Segment) error {
	if len(segs) == 0 {
		return fmt.Errorf("a batched pass needs at least one segment")
	}
	for i := range segs {
		s := &segs[i]
		if s.Seq == nil {
			return fmt.Errorf("segment %d has no sequence", i)
		}
		if n := s.In.Tokens(); s.Seq.Pos()+n > s.Seq.MaxTokens() {
			return fmt.Errorf("segment %d: sequence is full: %d tokens held, %d more would pass its capacity of %d",
				i, s.Seq.Pos(), n, s.Seq.MaxTokens())
		}
		if s.In.Logits == LogitsAll && len(segs) > 1 {
			return fmt.Errorf("segment %d asks for every row's logits, which only a pass of its own returns", i)
		}
		for j := range i {
			if segs[j].Seq == s.Seq {
				return fmt.Errorf("segments %d and %d are the same sequence", j, i)
			}
		}
	}
	return nil
}

// StartBatch begins one pass over every segment, records the model into it
// and submits it; the caller collects the results with Wait. On a backend
// without batching (not a Batcher) it runs one pass per segment in turn
// instead, with the same results.
func StartBatch(b Backend, w *Weights, segs []Segment) (Batch, error) {
	return StartBatchUntil(b, w, segs, nil)
}

// ErrStopped is returned by StartBatchUntil when its stop function ended
// the pass.
var ErrStopped = errors.New("pass stopped before its end")

// Stopper is a pass that asks a stop function inside its blocks as well,
// between runs of work of bounded size, so that a long pass ends soon after
// its cancellation (the CPU backend: see engine/cpu's pass.go for the runs
// and what lies between them). Once stop says yes, the pass's remaining blocks
// do nothing and Wait returns ErrStopped. stop may be called from several
// threads at once.
type Stopper interface {
	StopWhen(stop func() bool)
}

// StartBatchUntil is StartBatch that asks stop before each layer's mixer
// and MoE, and inside the blocks of a pass that is a Stopper; once it says
// yes the pass is abandoned unsubmitted (see Abandoner) and ErrStopped
// returned, or, when it said yes in the pass's last blocks, Wait returns
// ErrStopped. A host backend has then run part of the pass on the
// sequences, so they must be restored from a snapshot before further use.
// It lets a long prefill pass end soon after its cancellation.
func StartBatchUntil(b Backend, w *Weights, segs []Segment, stop func() bool) (Batch, error) {
	if err := CheckBatch(segs); err != nil {
		return nil, err
	}
	for i := range segs {
		if err := checkImageInput(b, segs[i].In); err != nil {
			return nil, fmt.Errorf("segment %d: %w", i, err)
		}
	}
	bb, ok := b.(Batcher)
	if !ok {
		return serialBatch(b, w, segs, stop)
	}
	p, err := bb.BeginBatch(segs)
	if err != nil {
		return nil, err
	}
	stopWhen(p, stop)
	recorded := false
	defer func() {
		if !recorded {
			Abandon(p) // ForwardBatch panicked or was stopped: as in Start
		}
	}()
	if !forwardBatch(p, w, segs, stop) {
		return nil, ErrStopped
	}
	recorded = true
	p.Submit()
	return p, nil
}

// RunBatch is StartBatch followed by Wait.
func RunBatch(b Backend, w *Weights, segs []Segment) ([]Result, error) {
	p, err := StartBatch(b, w, segs)
	if err != nil {
		return nil, err
	}
	return p.Wait()
}

// finished is a Batch whose passes have already run.
type finished struct {
	results []Result
	err     error
}

func (f *finished) Wait() ([]Result, error) { return f.results, f.err }

// serialBatch runs segs one pass each, the way a backend without batching
// serves a batch.
func serialBatch(b Backend, w *Weights, segs []Segment, stop func() bool) (Batch, error) {
	f := &finished{results: make([]Result, len(segs))}
	for i := range segs {
		p, err := start(b, w, segs[i].Seq, segs[i].In, stop)
		var res Result
		if err == nil {
			res, err = p.Wait()
		}
		if err != nil {
			if i == 0 {
				return nil, err
			}
			f.err = fmt.Errorf("segment %d of the batch: %w", i, err)
			return f, nil
		}
		f.results[i] = res
	}
	return f, nil
}

// Start begins a pass of b over seq, records the model into it and submits
// it; the caller collects the result with Wait. Starting the next decode step
// (with empty Input.IDs) before waiting on this one lets a GPU backend keep
// the device busy.
func Start(b Backend, w *Weights, seq Sequence, in Input) (Pass, error) {
	return start(b, w, seq, in, nil)
}

// start is Start that asks stop before each layer, as StartBatchUntil.
func start(b Backend, w *Weights, seq Sequence, in Input, stop func() bool) (Pass, error) {
	if n := in.Tokens(); seq.Pos()+n > seq.MaxTokens() {
		return nil, fmt.Errorf("sequence is full: %d tokens held, %d more would pass its capacity of %d",
			seq.Pos(), n, seq.MaxTokens())
	}
	if err := checkImageInput(b, in); err != nil {
		return nil, err
	}
	p, err := b.Begin(seq, in)
	if err != nil {
		return nil, err
	}
	stopWhen(p, stop)
	recorded := false
	defer func() {
		if !recorded {
			Abandon(p) // Forward panicked or was stopped: release the recording, then let a panic go on
		}
	}()
	h, ok := layers(p, w, stop)
	if !ok {
		return nil, ErrStopped
	}
	head(p, w, in, h)
	recorded = true
	p.Submit()
	return p, nil
}

// stopWhen hands stop to p when p asks it inside its blocks.
func stopWhen(p Blocks, stop func() bool) {
	if s, ok := p.(Stopper); ok && stop != nil {
		s.StopWhen(stop)
	}
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
func Abandon(p Blocks) {
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

// checkImageInput refuses image inputs on a backend without ImageInputs and
// checks that they have one entry per row.
func checkImageInput(b Backend, in Input) error {
	if !in.HasImages() {
		return nil
	}
	if _, ok := b.(ImageInputs); !ok {
		return fmt.Errorf("the %s backend does not take images yet: use the CPU backend for prompts with images", b.Name())
	}
	if in.Embeds != nil && len(in.Embeds) != len(in.IDs) {
		return fmt.Errorf("input has %d embedding entries for %d ids", len(in.Embeds), len(in.IDs))
	}
	if in.Positions != nil && len(in.Positions) != len(in.IDs) {
		return fmt.Errorf("input has %d positions for %d ids", len(in.Positions), len(in.IDs))
	}
	return nil
}
