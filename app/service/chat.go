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
	"github.com/suzuran-app/suzuran/engine/sample"
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

	c, history, err := s.store.Conversation(ctx, reply.ConversationID)
	if err != nil {
		finish(store.StatusError, err, nil)
		return
	}
	// The conversation's own settings over the app's.
	turn := s.Settings().For(c.Settings, think)
	think = turn.Think
	// The demo model was trained without thinking: asked to think, it
	// writes template text where the thinking goes.
	if modelhost.IsDemo(e.Dir()) {
		think = false
	}
	msgs := promptMessages(turn.SystemPrompt, history, reply.ID)
	render := chat.RenderRequest{Messages: msgs, AddGenerationPrompt: true, EnableThinking: &think}
	samp := turn.Sampling(think)
	sampling := model.Sampling{
		Temperature: float32(samp.Temperature), TopP: float32(samp.TopP), TopK: samp.TopK,
		MinP: float32(samp.MinP), PresencePenalty: float32(samp.PresencePenalty),
	}
	if sampling.Temperature > 0 {
		sampling.Seed = sample.RandomSeed()
	} else {
		sampling = model.Sampling{}
	}

	progress := func(p engine.PrefillProgress) {
		s.events.publish(Event{Type: EventPrefill, ConversationID: reply.ConversationID, MessageID: reply.ID,
			PromptTokens: p.Total, PromptDone: p.Done})
	}
	var stream *engine.Stream
	var promptText string
	if resume {
		stream, promptText, err = s.submitContinuation(ctx, e, render, sampling, reply, progress)
	} else {
		var prompt chat.Prompt
		if prompt, err = server.EncodePrompt(e, render); err == nil {
			promptText = prompt.Text
			var images []model.Image
			if images, err = s.engineImages(ctx, e, prompt.Images, promptImages(history, reply.ID)); err == nil {
				stream, err = submitWindow(ctx, e, engine.Request{Prompt: prompt.IDs, Images: images, Sampling: sampling,
					Checkpoints: prompt.Checkpoints, Progress: progress, Owner: prefixOwner(reply.ConversationID)})
			}
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			finish(store.StatusStopped, nil, nil)
			return
		}
		finish(store.StatusError, err, nil)
		return
	}

	parser := chat.NewParser(chat.ParserOptions{InReasoning: chat.PromptOpensThinking(promptText)})
	var pendingContent, pendingReasoning strings.Builder
	contentAt, reasoningAt := utf16Len(reply.Content), utf16Len(reply.Reasoning)
	flush := func() {
		if pendingContent.Len() == 0 && pendingReasoning.Len() == 0 {
			return
		}
		ev := Event{Type: EventReply, ConversationID: reply.ConversationID, MessageID: reply.ID,
			Content: pendingContent.String(), Reasoning: pendingReasoning.String(),
			ContentAt: contentAt, ReasoningAt: reasoningAt}
		contentAt += utf16Len(ev.Content)
		reasoningAt += utf16Len(ev.Reasoning)
		pendingContent.Reset()
		pendingReasoning.Reset()
		// The live copy first: a window reading the conversation after
		// this point gets the text and skips the event's repeat of it.
		s.setLive(reply)
		s.events.publish(ev)
	}
	// The thinking lasts from its first text to the answer's first text
	// (or the end, for a reply that is all thoughts).
	var thinkFrom, thinkTo time.Time
	take := func(events []chat.Event) {
		for _, ev := range events {
			switch ev.Kind {
			case chat.ReasoningDelta:
				if thinkFrom.IsZero() && ev.Text != "" {
					thinkFrom = time.Now()
				}
				reply.Reasoning += ev.Text
				pendingReasoning.WriteString(ev.Text)
			case chat.ContentDelta, chat.ToolCallArguments:
				if !thinkFrom.IsZero() && thinkTo.IsZero() && ev.Text != "" {
					thinkTo = time.Now()
				}
				reply.Content += ev.Text
				pendingContent.WriteString(ev.Text)
			}
		}
	}
	flushTick := time.NewTicker(flushEvery)
	defer flushTick.Stop()
	lastSave := time.Now()
	tick := func() {
		flush()
		if time.Since(lastSave) >= saveEvery {
			if err := s.store.UpdateMessage(context.Background(), reply); err != nil {
				s.log.Error().Err(err).Msg("saving a growing reply")
			}
			lastSave = time.Now()
		}
	}
	// pacedOut is set when a Stop came while paced text was still held
	// back: that text is dropped, as the engine drops the tokens a
	// stopped request's reader has not taken.
	pacedOut := false
	shown := 0 // paced pieces shown, a token's share each
	for events := stream.Events; events != nil; {
		select {
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			if s.pace <= 0 {
				take(parser.Feed(ev.Text))
				continue
			}
			// The paced reader is behind the engine, so its events hold
			// several tokens each (engine.Stream): their text goes out a
			// token's share at a time, one pace apart.
			for _, piece := range pacedPieces(ev.Text, len(ev.IDs)) {
				if pacedOut {
					break
				}
				take(parser.Feed(piece))
				shown++
				select {
				case <-time.After(s.pace):
				case <-ctx.Done():
					pacedOut = true
				}
				select {
				case <-flushTick.C:
					tick()
				default:
				}
			}
		case <-flushTick.C:
			tick()
		}
	}
	take(parser.Finish())
	flush()
	defer s.clearLive(reply.ID)
	st, err := stream.Result()
	stats := &store.Stats{
		PromptTokens:    st.PromptTokens,
		CachedTokens:    st.CachedTokens,
		GeneratedTokens: st.GeneratedTokens,
		TimeToFirstMS:   float64((st.QueueWait + st.PrefillDuration).Microseconds()) / 1000,
		TokensPerSecond: st.DecodeTokensPerSecond(),
		FinishReason:    st.FinishReason,
		Model:           modelhost.Name(e.Dir()),
	}
	if !thinkFrom.IsZero() {
		if thinkTo.IsZero() {
			thinkTo = time.Now()
		}
		stats.ThinkingMS = float64(thinkTo.Sub(thinkFrom).Microseconds()) / 1000
	}
	if pacedOut {
		// The reply keeps only what was shown, and so do its counts.
		stats.FinishReason = engine.FinishCancelled
		stats.GeneratedTokens = min(stats.GeneratedTokens, shown)
	}
	switch {
	case err != nil && st.FinishReason != engine.FinishCancelled:
		finish(store.StatusError, err, stats)
	case st.FinishReason == engine.FinishCancelled || ctx.Err() != nil:
		finish(store.StatusStopped, nil, stats)
	default:
		finish(store.StatusComplete, nil, stats)
	}
}

// submitContinuation submits the conversation with the reply's text so far
// after the generation prompt, so that the model goes on where it stopped.
func (s *Service) submitContinuation(ctx context.Context, e *engine.Engine, render chat.RenderRequest,
	sampling model.Sampling, reply store.Message, progress func(engine.PrefillProgress)) (*engine.Stream, string, error) {
	prompt, err := server.EncodePrompt(e, render)
	if err != nil {
		return nil, "", err
	}
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
		return nil, "", fmt.Errorf("%w: the conversation and the reply so far hold more than the context's %d tokens: start a new conversation",
			engine.ErrPromptTooLong, e.ContextTokens())
	}
	stream, err := submitWindow(ctx, e, engine.Request{Prompt: ids, Sampling: sampling, Checkpoints: prompt.Checkpoints, Progress: progress,
		Owner: prefixOwner(reply.ConversationID)})
	return stream, text, err
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
func submitWindow(ctx context.Context, e *engine.Engine, req engine.Request) (*engine.Stream, error) {
	req.Priority = engine.PriorityInteractive // the user is waiting in the window
	pause := busyRetryFirst
	for {
		stream, err := e.Submit(ctx, req)
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

// pacedPieces splits text into n pieces (at least one) of about the same
// number of characters, cut between characters, for Options.Pace: an
// event's tokens, shown one at a time.
func pacedPieces(text string, n int) []string {
	var starts []int // byte offset of each character
	for i := range text {
		starts = append(starts, i)
	}
	n = max(1, min(n, len(starts)))
	pieces := make([]string, 0, n)
	for i := range n {
		lo, hi := len(text), len(text)
		if c := i * len(starts) / n; c < len(starts) {
			lo = starts[c]
		}
		if c := (i + 1) * len(starts) / n; c < len(starts) {
			hi = starts[c]
		}
		pieces = append(pieces, text[lo:hi])
	}
	return pieces
}
