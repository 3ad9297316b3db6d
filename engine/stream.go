package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Stream is a submitted request's output.
//
// The engine never waits for a reader: it puts each event in the stream's
// own queue and a goroutine per stream hands them to Events as the reader
// takes them. A slow reader therefore slows nobody else; a reader that takes
// nothing for Options.ReaderTimeout while events wait has its request
// cancelled (it vanished without cancelling its context), and the queue
// holds at most one request's events, a few bytes each per token.
type Stream struct {
	// Events delivers one event per generated token, then a final event
	// (Token −1, Stats set), and is closed after it. The reader must keep
	// reading until Events is closed or cancel the request's context; once
	// the context has ended, events not yet taken are dropped, so a reader
	// that cancels sees at most one more token.
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

	mu      sync.Mutex
	queue   []Event
	final   bool          // the final event is queued: nothing follows
	wake    chan struct{} // a new event is queued (capacity 1)
	stats   Stats
	err     error
	timeout time.Duration
	// dropped is set when tokens the engine produced were dropped because
	// the request ended before the reader took them: the request then
	// ended as cancelled for its reader, whatever the engine saw after.
	dropped bool
}

// errReaderGone is the cause of a request cancelled because its reader
// stopped reading.
var errReaderGone = errors.New("the reader stopped taking events")

func newStream(ctx, caller context.Context, cancel context.CancelCauseFunc, timeout time.Duration) *Stream {
	events := make(chan Event)
	s := &Stream{Events: events, events: events, ctx: ctx, caller: caller, cancel: cancel, wake: make(chan struct{}, 1), timeout: timeout}
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

// push queues an event for the reader; it never blocks. The engine
// goroutine calls it.
func (s *Stream) push(ev Event) {
	s.mu.Lock()
	if s.final {
		s.mu.Unlock()
		return
	}
	s.queue = append(s.queue, ev)
	s.mu.Unlock()
	s.signal()
}

// finish queues the final event with the request's statistics and error.
func (s *Stream) finish(stats Stats, err error, tail string) {
	s.mu.Lock()
	if s.final {
		s.mu.Unlock()
		return
	}
	s.stats, s.err = stats, err
	final := stats
	s.queue = append(s.queue, Event{Token: -1, Text: tail, Stats: &final, Err: err})
	s.final = true
	s.mu.Unlock()
	s.signal()
}

func (s *Stream) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// forward hands queued events to the reader until the final one, then
// closes Events.
func (s *Stream) forward() {
	defer close(s.events)
	timer := time.NewTimer(s.timeout)
	defer timer.Stop()
	for {
		s.mu.Lock()
		if len(s.queue) == 0 {
			final := s.final
			s.mu.Unlock()
			if final {
				return
			}
			<-s.wake
			continue
		}
		ev := s.queue[0]
		if s.ended() && ev.Token >= 0 {
			// The request ended: tokens nobody may be waiting for are
			// dropped, only the final event is offered.
			s.queue = s.queue[1:]
			s.dropped = true
			s.mu.Unlock()
			continue
		}
		if ev.Stats != nil {
			st := s.statsLocked()
			ev.Stats = &st
		}
		s.mu.Unlock()
		if !s.deliver(ev, timer) {
			s.mu.Lock()
			s.queue = nil
			final := s.final
			s.mu.Unlock()
			if final {
				return
			}
			// Wait for the engine's final event (it sees the request
			// cancelled at its next step), dropping everything.
			for {
				<-s.wake
				s.mu.Lock()
				s.queue, final = nil, s.final
				s.mu.Unlock()
				if final {
					return
				}
			}
		}
		s.mu.Lock()
		s.queue = s.queue[1:]
		s.mu.Unlock()
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
