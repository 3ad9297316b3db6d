package model

import (
	"errors"
	"fmt"
)

// checkSegments verifies what every backend requires of a pass: at least
// one segment, each sequence once and with room for its tokens, LogitsAll
// only in a pass of one segment, and image inputs only on a backend that
// takes them, one entry per row. An error about one segment of several
// names it.
func checkSegments(b Backend, segs []Segment) error {
	if len(segs) == 0 {
		return errors.New("a pass needs at least one segment")
	}
	for i := range segs {
		err := checkSegment(b, segs, i)
		if err != nil && len(segs) > 1 {
			err = fmt.Errorf("segment %d: %w", i, err)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// checkSegment is checkSegments' check of segs[i].
func checkSegment(b Backend, segs []Segment, i int) error {
	s := &segs[i]
	if s.Seq == nil {
		return errors.New("the segment has no sequence")
	}
	if n := s.In.Tokens(); s.Seq.Pos()+n > s.Seq.MaxTokens() {
		return fmt.Errorf("sequence is full: %d tokens held, %d more would pass its capacity of %d",
			s.Seq.Pos(), n, s.Seq.MaxTokens())
	}
	if s.In.Logits == LogitsAll && len(segs) > 1 {
		return errors.New("the segment asks for every row's logits, which only a pass of its own returns")
	}
	for j := range i {
		if segs[j].Seq == s.Seq {
			return fmt.Errorf("the sequence is segment %d's too", j)
		}
	}
	return checkImageInput(b, s.In)
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

// StartBatch begins one pass of b over every segment, records the model
// into it and submits it; the caller collects the results with Wait.
// Starting the next decode step (with empty Input.IDs) before waiting on
// this one lets a GPU backend keep the device busy.
func StartBatch(b Backend, w *Weights, segs []Segment) (Pass, error) {
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
func StartBatchUntil(b Backend, w *Weights, segs []Segment, stop func() bool) (Pass, error) {
	if err := checkSegments(b, segs); err != nil {
		return nil, err
	}
	p, err := b.Begin(segs)
	if err != nil {
		return nil, err
	}
	if s, ok := p.(Stopper); ok && stop != nil {
		s.StopWhen(stop)
	}
	recorded := false
	defer func() {
		if !recorded {
			Abandon(p) // Forward panicked or was stopped: release the recording, then let a panic go on
		}
	}()
	if !forward(p, w, segs, stop) {
		return nil, ErrStopped
	}
	recorded = true
	p.Submit()
	return p, nil
}

// Abandoner is a Pass that holds resources while it records: a GPU pass
// holds a command buffer, and on Metal an autorelease pool on a locked OS
// thread, until Submit. Abandon ends a pass that will never be submitted:
// nothing of it runs, the sequences stay as they were before Begin, and the
// resources are released, so the backend can begin the next pass. It does
// nothing once the pass was submitted.
type Abandoner interface {
	Abandon()
}

// Abandon abandons p if it holds resources while recording. Code that
// records a pass itself calls it from a deferred function, so that a panic
// while recording does not leave the device recording (StartBatch does).
func Abandon(p Blocks) {
	if a, ok := p.(Abandoner); ok {
		a.Abandon()
	}
}

// RunBatch is StartBatch followed by Wait.
func RunBatch(b Backend, w *Weights, segs []Segment) ([]Result, error) {
	p, err := StartBatch(b, w, segs)
	if err != nil {
		return nil, err
	}
	return p.Wait()
}

// Run is RunBatch over the one segment of seq and in.
func Run(b Backend, w *Weights, seq Sequence, in Input) (Result, error) {
	res, err := RunBatch(b, w, []Segment{{Seq: seq, In: in}})
	if err != nil {
		return Result{Token: -1}, err
	}
	return res[0], nil
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
