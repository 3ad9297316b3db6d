package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// Stream is a submitted request's output.
//
// The engine never waits for a reader: it hands each token to the stream,
// and a goroutine per stream passes them on to Events as the reader takes
// them. While the reader is behind, the tokens waiting for it merge into
// one event (their ids, text and log-probabilities appended in order), so a
// slow reader gets fewer, larger events with the same content, and a
// stream holds the text not yet read rather than an event per token. The
// request's Progress and QueuePosition callbacks run on the same
// goroutine, before the events that follow them, and are told only the
// latest value: a slow callback delays its own stream and nothing else. A
// slow reader therefore slows nobody else; a reader that takes nothing for
// Options.ReaderTimeout while events wait has its request cancelled (it
// vanished without cancelling its context).
type Stream struct {
	// Events delivers the generated tokens, one event per token while the
	// reader keeps up and merged while it is behind (Event), then a final
	// event (Token −1, Stats set), and is closed after it. The reader must
	// keep reading until Events is closed or cancel the request's context;
	// once the context has ended, tokens not yet taken are dropped, so a
	// reader that cancels sees at most one more event of tokens.
	Events <-chan Event

	events chan Event
	// ctx is the request's context (its caller's, the engine's, and the
	// reader timeout's); cancel ends it.
	ctx    context.Context
	cancel context.CancelCauseFunc
	// caller is the submitter's context, watched directly too: the
	// request's context follows it a moment later (context.AfterFunc), and
	// a reader that cancels must not be handed tokens meanwhile.
	caller context.Context
	// onPosition and onProgress are the request's callbacks (nil: none).
	onPosition func(int)
	onProgress func(PrefillProgress)

	mu sync.Mutex
	// tokens are the tokens the reader has not been handed yet, merged.
	tokens pendingTokens
	// final is the final event once queued: nothing follows; finalTaken
	// once the forwarder took it.
	final      *Event
	finalTaken bool
	// position and progress are the latest values not yet told.
	position     int
	tellPosition bool
	progress     *PrefillProgress
	wake         chan struct{} // something was queued (capacity 1)
	stats        Stats
	err          error
	timeout      time.Duration
	// dropped is set when tokens the engine produced were dropped because
	// the request ended before the reader took them: the request then
	// ended as cancelled for its reader, whatever the engine saw after.
	dropped bool
}

// pendingTokens are tokens waiting for the reader, as one event.
type pendingTokens struct {
	ids      []int
	text     strings.Builder
	logprobs []*TokenLogprob
}

// errReaderGone is the cause of a request cancelled because its reader
// stopped reading.
var errReaderGone = errors.New("the reader stopped taking events")

func newStream(ctx, caller context.Context, cancel context.CancelCauseFunc, timeout time.Duration,
	position func(int), progress func(PrefillProgress)) *Stream {
	events := make(chan Event)
	s := &Stream{Events: events, events: events, ctx: ctx, caller: caller, cancel: cancel,
		onPosition: position, onProgress: progress, wake: make(chan struct{}, 1), timeout: timeout}
	go s.forward()
	return s
}

// Result returns the final statistics and error once Events is closed. A
// cancelled request's reader may miss the final event; Result always has
// it.
func (s *Stream) Result() (Stats, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.statsLocked(), s.err
}

// statsLocked are the final statistics as the reader saw the request.
func (s *Stream) statsLocked() Stats {
	st := s.stats
	if s.dropped && st.FinishReason != FinishError {
		st.FinishReason = FinishCancelled
	}
	return st
}

// push queues a token event for the reader, merging it into the tokens
// the reader has not taken yet; it never blocks. The engine goroutine
// calls it.
func (s *Stream) push(ev Event) {
	s.mu.Lock()
	if s.final != nil {
		s.mu.Unlock()
		return
	}
	t := &s.tokens
	t.ids = append(t.ids, ev.IDs...)
	t.text.WriteString(ev.Text)
	t.logprobs = append(t.logprobs, ev.Logprobs...)
	s.mu.Unlock()
	s.signal()
}

// tellPositionLater queues the request's queue position for its
// QueuePosition callback, replacing one not told yet.
func (s *Stream) tellPositionLater(n int) {
	if s.onPosition == nil {
		return
	}
	s.mu.Lock()
	s.position, s.tellPosition = n, true
	s.mu.Unlock()
	s.signal()
}

// tellProgressLater queues prefill progress for the request's Progress
// callback, replacing what was not told yet.
func (s *Stream) tellProgressLater(p PrefillProgress) {
	if s.onProgress == nil {
		return
	}
	s.mu.Lock()
	s.progress = &p
	s.mu.Unlock()
	s.signal()
}

// finish queues the final event with the request's statistics and error.
func (s *Stream) finish(stats Stats, err error, tail string) {
	s.mu.Lock()
	if s.final != nil {
		s.mu.Unlock()
		return
	}
	s.stats, s.err = stats, err
	final := stats
	s.final = &Event{Token: -1, Text: tail, Stats: &final, Err: err}
	s.mu.Unlock()
	s.signal()
}

func (s *Stream) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// nextLocked takes the next event to hand on: the waiting tokens as one
// event, else the final event; false when there is none yet.
func (s *Stream) nextLocked() (Event, bool) {
	if t := &s.tokens; len(t.ids) > 0 {
		ev := Event{Token: t.ids[len(t.ids)-1], IDs: t.ids, Text: t.text.String(), Logprobs: t.logprobs}
		s.tokens = pendingTokens{} // the event owns what it holds
		return ev, true
	}
	if s.final != nil && !s.finalTaken {
		s.finalTaken = true
		ev := *s.final
		st := s.statsLocked()
		ev.Stats = &st
		return ev, true
	}
	return Event{}, false
}

// forward tells the callbacks and hands queued events to the reader until
// the final one, then closes Events.
func (s *Stream) forward() {
	defer close(s.events)
	timer := time.NewTimer(s.timeout)
	defer timer.Stop()
	for {
		s.mu.Lock()
		position, tellPosition := s.position, s.tellPosition
		progress := s.progress
		s.tellPosition, s.progress = false, nil
		ev, ok := s.nextLocked()
		if ok && ev.Token >= 0 && s.ended() {
			// The request ended: tokens nobody may be waiting for are
			// dropped, only the final event is offered.
			s.dropped = true
			ok = false
		}
		// Nothing to do until the engine queues more (a final event not
		// taken yet, after dropped tokens, is taken next time round).
		idle := !ok && !tellPosition && progress == nil && len(s.tokens.ids) == 0 && s.final == nil
		s.mu.Unlock()
		if tellPosition {
			s.onPosition(position)
		}
		if progress != nil {
			s.onProgress(*progress)
		}
		if !ok {
			if idle {
				<-s.wake
			}
			continue
		}
		if !s.deliver(ev, timer) {
			if ev.Token < 0 {
				return
			}
			// Wait for the engine's final event (it sees the request
			// cancelled at its next step), dropping everything.
			for {
				s.mu.Lock()
				s.tokens = pendingTokens{}
				final := s.final != nil
				s.mu.Unlock()
				if final {
					return
				}
				<-s.wake
			}
		}
		if ev.Token < 0 {
			return
		}
	}
}

// deliver hands ev to the reader, and reports false when the request ended
// or the reader took nothing for the timeout (which cancels the request).
// Once the request has ended the final event is offered for a moment
// only: the reader may have left.
func (s *Stream) deliver(ev Event, timer *time.Timer) bool {
	if s.ended() {
		select {
		case s.events <- ev:
			return true
		case <-time.After(finalGrace):
			return false
		}
	}
	timer.Reset(s.timeout)
	select {
	case s.events <- ev:
		return true
	case <-timer.C:
		s.cancel(fmt.Errorf("%w for %v", errReaderGone, s.timeout))
		return false
	case <-s.ctx.Done():
		return s.deliverEnded(ev)
	case <-s.caller.Done():
		return s.deliverEnded(ev)
	}
}

// deliverEnded handles ev once the request has ended: a token is dropped,
// the final event offered for a moment.
func (s *Stream) deliverEnded(ev Event) bool {
	if ev.Token >= 0 {
		s.mu.Lock()
		s.dropped = true
		s.mu.Unlock()
		return true // dropped: the request ended
	}
	select {
	case s.events <- ev:
		return true
	case <-time.After(finalGrace):
		return false
	}
}

// ended reports whether the request's or its caller's context ended.
func (s *Stream) ended() bool { return s.ctx.Err() != nil || s.caller.Err() != nil }

// finalGrace is how long a cancelled request's final event waits for a
// reader that may still be reading.
const finalGrace = 100 * time.Millisecond
