package service

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/suzuran-app/suzuran/app/modelhost"
	"github.com/suzuran-app/suzuran/app/server"
	"github.com/suzuran-app/suzuran/app/store"
	"github.com/suzuran-app/suzuran/engine"
	"github.com/suzuran-app/suzuran/engine/chat"
	"github.com/suzuran-app/suzuran/engine/model"
)

// How often a reply's new text goes to the window, and how often it is
// written to the database while it grows. 30 ms batches stream smoothly
// without one event per token; saving every 250 ms bounds what a crash
// loses to a quarter of a second of text.
const (
	flushEvery = 30 * time.Millisecond
	saveEvery  = 250 * time.Millisecond
)

// generation is a reply being written for one conversation.
type generation struct {
	replyID int64
	cancel  context.CancelFunc
	done    chan struct{}
}

// start runs the reply message reply for its conversation in the
// background. With resume, reply already holds text that the model goes on
// from (Continue).
func (s *Service) start(reply store.Message, think, resume bool) {
	ctx, cancel := context.WithCancel(context.Background())
	g := &generation{replyID: reply.ID, cancel: cancel, done: make(chan struct{})}
	s.mu.Lock()
	s.running[reply.ConversationID] = g
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer close(g.done)
		defer cancel()
		s.generate(ctx, reply, think, resume)
		s.mu.Lock()
		if s.running[reply.ConversationID] == g {
			delete(s.running, reply.ConversationID)
		}
		s.mu.Unlock()
	}()
}

// stopAndWait stops the conversation's reply, if one runs, and waits until
// it is saved.
func (s *Service) stopAndWait(conversation int64) {
	s.mu.Lock()
	g := s.running[conversation]
	s.mu.Unlock()
	if g != nil {
		g.cancel()
		<-g.done
	}
}

// generate writes one reply, saving it as it grows and publishing its text.
func (s *Service) generate(ctx context.Context, reply store.Message, think, resume bool) {
	finish := func(status string, err error, stats *store.Stats) {
		reply.Status, reply.Stats = status, stats
		if err != nil {
			reply.Error = err.Error()
		}
		// The reply is saved even when the request was cancelled.
		if err := s.store.UpdateMessage(context.Background(), reply); err != nil {
			s.log.Error().Err(err).Int64("message", reply.ID).Msg("saving a reply")
		}
		m := reply
		s.events.publish(Event{Type: EventMessage, ConversationID: reply.ConversationID, MessageID: reply.ID, Message: &m})
	}
	e, err := s.models.Acquire(ctx)
	if err != nil {
		if ctx.Err() != nil {
			finish(store.StatusStopped, nil, nil)
		} else {
			finish(store.StatusError, fmt.Errorf("the model could not load: %w", err), nil)
		}
		return
	}
	defer s.models.Release()
	turn, err := s.startTurn(ctx, e, reply, think, resume)
	if err != nil {
		if ctx.Err() != nil {
			finish(store.StatusStopped, nil, nil)
			return
		}
		finish(store.StatusError, err, nil)
		return
	}
	defer s.clearLive(reply.ID)
	w := &replyWriter{s: s, reply: &reply}
	thinking := w.stream(turn)
	res := turn.Result()
	st := res.Stats
	stats := &store.Stats{
		PromptTokens:    st.PromptTokens,
		CachedTokens:    st.CachedTokens,
		GeneratedTokens: st.GeneratedTokens,
		TimeToFirstMS:   float64((st.QueueWait + st.PrefillDuration).Microseconds()) / 1000,
		TokensPerSecond: st.DecodeTokensPerSecond(),
		FinishReason:    st.FinishReason,
		Model:           modelhost.Name(e.Dir()),
		ThinkingMS:      float64(thinking.Microseconds()) / 1000,
	}
	switch {
	case res.Err != nil && st.FinishReason != engine.FinishCancelled:
		finish(store.StatusError, res.Err, stats)
	case st.FinishReason == engine.FinishCancelled || ctx.Err() != nil:
		finish(store.StatusStopped, nil, stats)
	default:
		finish(store.StatusComplete, nil, stats)
	}
}

// startTurn submits the reply's conversation with the conversation's own
// settings over the app's, as a window request (submitWindow).
func (s *Service) startTurn(ctx context.Context, e *engine.Engine, reply store.Message, think, resume bool) (*engine.Turn, error) {
	c, history, err := s.store.Conversation(ctx, reply.ConversationID)
	if err != nil {
		return nil, err
	}
	settings := s.Settings().For(c.Settings, think)
	// A model that cannot think (the demo model, trained without it)
	// writes template text where the thinking goes.
	think = modelhost.Think(e.Dir(), settings.Think)
	render := chat.RenderRequest{Messages: promptMessages(settings.SystemPrompt, history, reply.ID),
		AddGenerationPrompt: true, EnableThinking: &think}
	samp := settings.Sampling(think)
	req := engine.TurnRequest{Render: render, Owner: prefixOwner(reply.ConversationID), Pace: s.pace,
		Priority: engine.PriorityInteractive} // the user is waiting in the window
	if samp.Temperature > 0 {
		req.Sampling = model.Sampling{
			Temperature: float32(samp.Temperature), TopP: float32(samp.TopP), TopK: samp.TopK,
			MinP: float32(samp.MinP), PresencePenalty: float32(samp.PresencePenalty),
		}
	}
	if req.Prompt, err = server.EncodePrompt(e, render); err != nil {
		return nil, err
	}
	if resume {
		if req.Prompt, err = continuation(e, req.Prompt, reply); err != nil {
			return nil, err
		}
	}
	return submitWindow(ctx, e, req)
}

// replyWriter publishes a reply's text as it streams, and saves it as it
// grows.
type replyWriter struct {
	s     *Service
	reply *store.Message
	// pending is the text not yet published; contentAt and reasoningAt
	// where it goes, in UTF-16 code units.
	pendingContent, pendingReasoning strings.Builder
	contentAt, reasoningAt           int
	// The thinking lasts from its first text to the answer's first text
	// (or the end, for a reply that is all thoughts).
	thinkFrom, thinkTo time.Time
	lastSave           time.Time
}

// stream reads the turn to its end; it returns how long the model thought.
func (w *replyWriter) stream(turn *engine.Turn) time.Duration {
	w.contentAt, w.reasoningAt = utf16Len(w.reply.Content), utf16Len(w.reply.Reasoning)
	w.lastSave = time.Now()
	flushTick := time.NewTicker(flushEvery)
	defer flushTick.Stop()
	for events := turn.Events; events != nil; {
		select {
		case ev, ok := <-events:
			switch {
			case !ok:
				events = nil
			case ev.Progress != nil:
				w.s.events.publish(Event{Type: EventPrefill, ConversationID: w.reply.ConversationID, MessageID: w.reply.ID,
					PromptTokens: ev.Progress.Total, PromptDone: ev.Progress.Done})
			default:
				w.take(ev.Parsed)
				w.take(ev.Closing)
			}
		case <-flushTick.C:
			w.tick()
		}
	}
	w.flush()
	if w.thinkFrom.IsZero() {
		return 0
	}
	if w.thinkTo.IsZero() {
		w.thinkTo = time.Now()
	}
	return w.thinkTo.Sub(w.thinkFrom)
}

// take adds parsed events to the reply.
func (w *replyWriter) take(events []chat.Event) {
	for _, ev := range events {
		switch ev.Kind {
		case chat.ReasoningDelta:
			if w.thinkFrom.IsZero() && ev.Text != "" {
				w.thinkFrom = time.Now()
			}
			w.reply.Reasoning += ev.Text
			w.pendingReasoning.WriteString(ev.Text)
		case chat.ContentDelta, chat.ToolCallArguments:
			if !w.thinkFrom.IsZero() && w.thinkTo.IsZero() && ev.Text != "" {
				w.thinkTo = time.Now()
			}
			w.reply.Content += ev.Text
			w.pendingContent.WriteString(ev.Text)
		}
	}
}

// flush publishes the text not yet published.
func (w *replyWriter) flush() {
	if w.pendingContent.Len() == 0 && w.pendingReasoning.Len() == 0 {
		return
	}
	r := w.reply
	ev := Event{Type: EventReply, ConversationID: r.ConversationID, MessageID: r.ID,
		Content: w.pendingContent.String(), Reasoning: w.pendingReasoning.String(),
		ContentAt: w.contentAt, ReasoningAt: w.reasoningAt}
	w.contentAt += utf16Len(ev.Content)
	w.reasoningAt += utf16Len(ev.Reasoning)
	w.pendingContent.Reset()
	w.pendingReasoning.Reset()
	// The live copy first: a window reading the conversation after this
	// point gets the text and skips the event's repeat of it.
	w.s.setLive(*r)
	w.s.events.publish(ev)
}

// tick publishes, and saves the reply when the last save is saveEvery old.
func (w *replyWriter) tick() {
	w.flush()
	if time.Since(w.lastSave) >= saveEvery {
		if err := w.s.store.UpdateMessage(context.Background(), *w.reply); err != nil {
			w.s.log.Error().Err(err).Msg("saving a growing reply")
		}
		w.lastSave = time.Now()
	}
}

// continuation is prompt with the reply's text so far after the
// generation prompt, so that the model goes on where it stopped.
func continuation(e *engine.Engine, prompt chat.Prompt, reply store.Message) (chat.Prompt, error) {
	text := prompt.Text
	if chat.PromptOpensThinking(text) {
		text += reply.Reasoning
		if reply.Content != "" {
			text += "\n</think>\n\n" + reply.Content
		}
	} else {
		text += reply.Content
	}
	ids, ok := e.Tokenizer().EncodeWithSpecialsUpTo(text, e.ContextTokens()-1)
	if !ok {
		return chat.Prompt{}, fmt.Errorf("%w: the conversation and the reply so far hold more than the context's %d tokens: start a new conversation",
			engine.ErrPromptTooLong, e.ContextTokens())
	}
	return chat.Prompt{Text: text, IDs: ids, Checkpoints: prompt.Checkpoints}, nil
}

// Retry pauses of a window request that met a full queue: short, so that
// the window takes the first place that frees before API clients (told to
// wait a second by their 429) come back.
const (
	busyRetryFirst = 10 * time.Millisecond
	busyRetryMax   = 200 * time.Millisecond
)

// submitWindow submits a request of the chat window: it goes before the
// queued API requests (PriorityInteractive), and when API clients have
// filled the queue it waits for a place, as long as the user does not stop
// it, instead of failing with "busy".
func submitWindow(ctx context.Context, e *engine.Engine, req engine.TurnRequest) (*engine.Turn, error) {
	pause := busyRetryFirst
	for {
		stream, err := e.StartTurn(ctx, req)
		if !errors.Is(err, engine.ErrBusy) {
			return stream, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(pause):
		}
		pause = min(2*pause, busyRetryMax)
	}
}

// utf16Len is the length of s in UTF-16 code units.
func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		if r >= 0x10000 {
			n += 2
		} else {
			n++
		}
	}
	return n
}

// setLive records a reply's text as streamed so far; Conversation returns
// it in place of the last save.
func (s *Service) setLive(m store.Message) {
	s.mu.Lock()
	s.live[m.ID] = m
	s.mu.Unlock()
}

func (s *Service) clearLive(id int64) {
	s.mu.Lock()
	delete(s.live, id)
	s.mu.Unlock()
}

// withLive replaces streaming messages by their live text.
func (s *Service) withLive(msgs []store.Message) []store.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, m := range msgs {
		if live, ok := s.live[m.ID]; ok && m.Status == store.StatusStreaming {
			msgs[i].Content, msgs[i].Reasoning = live.Content, live.Reasoning
		}
	}
	return msgs
}
