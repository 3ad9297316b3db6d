package engine

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/suzuran-app/suzuran/engine/chat"
	"github.com/suzuran-app/suzuran/engine/model"
	"github.com/suzuran-app/suzuran/engine/sample"
)

// OptionError is a request option out of its range, named as the HTTP APIs
// spell it (Option): Submit and StartTurn return it for the sampling rule,
// max_tokens and top_logprobs.
type OptionError = sample.OptionError

// TurnRequest is one chat turn: a conversation to answer, and how.
type TurnRequest struct {
	// Render is the conversation. Its tools are the tools the output
	// parser knows; its thinking switch is what the prompt says.
	Render chat.RenderRequest
	// Prompt, when it has ids, is the conversation already rendered (a
	// caller that bounds its length its own way, or appends a reply to go
	// on from); Render is then not rendered again.
	Prompt chat.Prompt
	// Images are the conversation's images, as its chat.ImagePart.Index
	// numbers them; the turn hands the engine those the prompt shows, in
	// the order of their pad runs.
	Images []model.Image
	// Sampling is the sampling rule. Seed, when nil, is drawn at random
	// for a rule that samples (temperature above 0).
	Sampling model.Sampling
	Seed     *uint64
	// MaxTokens, Stop, Constraint, Logprobs, TopLogprobs, Priority and
	// Owner are as in Request. SnapshotAnswer is too, and is set whenever
	// the conversation offers tools (their results continue it).
	MaxTokens      int
	Stop           []string
	Constraint     Constraint
	Logprobs       bool
	TopLogprobs    int
	Priority       Priority
	Owner          string
	SnapshotAnswer bool
	// Plain asks for the output as text, unparsed (a completion): each
	// step's text is one ContentDelta.
	Plain bool
	// Pace, when positive, hands out the answer a token at a time, one
	// Pace apart (a demonstration's steady stream): a turn whose context
	// ends meanwhile keeps only what was handed out, as cancelled.
	Pace time.Duration
}

// TurnEvent is one step of a turn, in order: the queue position while the
// request waits, prefill progress, then one event per step of generated
// tokens, the last of them Final.
type TurnEvent struct {
	// QueuePosition, when set, is the request's place in the queue (1:
	// next to start; 0 once it runs).
	QueuePosition *int
	// Progress, when set, is how far the prompt has been read.
	Progress *PrefillProgress
	// Parsed are the step's reasoning, content and tool-call deltas.
	Parsed []chat.Event
	// IDs are the step's generated tokens (several when the reader was
	// behind), Logprobs theirs when asked for.
	IDs      []int
	Logprobs []*TokenLogprob
	Received time.Time
	// Final marks the last event: Closing holds the parser's last events
	// (the sections it closes at the end of the output), Result how the
	// turn ended.
	Final   bool
	Closing []chat.Event
	Result  *TurnResult
}

// TurnResult is how a turn ended.
type TurnResult struct {
	// Stats are the engine's, StopSequence included.
	Stats Stats
	// Err is set when generation failed after it started.
	Err error
	// ReasoningTokens counts the generated tokens of the reasoning: a
	// token counts until the first that carries answer text (the parser
	// may hold a token's text back a little, so the count can be a token
	// or two high); a step that merged several tokens and ends the
	// reasoning counts none of them.
	ReasoningTokens int
	// Text is the output as streamed, unparsed.
	Text string
}

// Turn is a chat turn being answered. Its reader takes Events until it is
// closed (cancelling the context passed to StartTurn to end it early),
// then reads Result.
type Turn struct {
	Events <-chan TurnEvent
	// Prompt is the rendered prompt; Sampling the rule used, seed drawn.
	Prompt   chat.Prompt
	Sampling model.Sampling

	e       *Engine
	r       TurnRequest
	ctx     context.Context
	stream  *Stream
	out     chan TurnEvent
	parser  *chat.Parser
	thinks  bool // still in the reasoning
	pacedUp bool // the context ended while paced text was held back
	shown   int  // paced pieces handed out
	raw     strings.Builder
	res     TurnResult
	done    chan struct{}
}

// StartTurn renders the conversation (unless r.Prompt is given), draws
// the seed when one is needed and submits the turn. Its errors come
// before any output: those of Submit (an *OptionError for an option out of
// range, ErrBusy, ErrPromptTooLong, ErrClosed, ...) and of rendering.
func (e *Engine) StartTurn(ctx context.Context, r TurnRequest) (*Turn, error) {
	prompt := r.Prompt
	if len(prompt.IDs) == 0 {
		var err error
		if prompt, err = e.Encode(r.Render); err != nil {
			return nil, err
		}
	}
	images := make([]model.Image, len(prompt.Images))
	for i, part := range prompt.Images {
		if part.Index < 0 || part.Index >= len(r.Images) {
			return nil, fmt.Errorf("the conversation shows image %d of the %d it has", part.Index, len(r.Images))
		}
		images[i] = r.Images[part.Index]
	}
	sampling := r.Sampling
	switch {
	case r.Seed != nil:
		sampling.Seed = *r.Seed
	case sampling.Temperature > 0:
		sampling.Seed = sample.RandomSeed()
	}
	t := &Turn{Prompt: prompt, Sampling: sampling, e: e, r: r, ctx: ctx,
		out: make(chan TurnEvent), done: make(chan struct{})}
	t.Events = t.out
	if !r.Plain {
		t.parser = chat.NewParser(chat.ParserOptions{InReasoning: chat.PromptOpensThinking(prompt.Text), Tools: r.Render.Tools})
		t.thinks = chat.PromptOpensThinking(prompt.Text)
	}
	stream, err := e.Submit(ctx, Request{
		Prompt: prompt.IDs, Images: images, Sampling: sampling, MaxTokens: r.MaxTokens, Stop: r.Stop,
		Checkpoints: prompt.Checkpoints, SnapshotAnswer: r.SnapshotAnswer || len(r.Render.Tools) > 0,
		Constraint: r.Constraint, Logprobs: r.Logprobs, TopLogprobs: r.TopLogprobs,
		Priority: r.Priority, Owner: r.Owner,
		Progress:      func(p PrefillProgress) { t.out <- TurnEvent{Progress: &p} },
		QueuePosition: func(n int) { t.out <- TurnEvent{QueuePosition: &n} },
	})
	if err != nil {
		return nil, err
	}
	t.stream = stream
	go t.run()
	return t, nil
}

// Result returns how the turn ended, once Events is closed.
func (t *Turn) Result() TurnResult {
	<-t.done
	return t.res
}

// run reads the engine's events, parses them and hands them on.
func (t *Turn) run() {
	defer close(t.done)
	defer close(t.out)
	finished := false
	for ev := range t.stream.Events {
		if ev.Token < 0 {
			finished = true
			t.end(ev.Text)
			return
		}
		text := t.withoutSpecials(ev.Text, ev.IDs)
		if t.r.Pace <= 0 {
			t.step(text, ev.IDs, ev.Logprobs)
			continue
		}
		pieces := pacedPieces(text, len(ev.IDs))
		for i, piece := range pieces {
			if t.pacedUp {
				break
			}
			ids := ev.IDs[i : i+1]
			if i == len(pieces)-1 {
				ids = ev.IDs[i:] // fewer characters than tokens
			}
			t.step(piece, ids, nil)
			t.shown++
			select {
			case <-time.After(t.r.Pace):
			case <-t.ctx.Done():
				t.pacedUp = true
			}
		}
	}
	if !finished {
		// The final event was missed (the context ended first): the
		// parser's sections are still closed.
		t.end("")
	}
}

// step parses one step's text and hands it on.
func (t *Turn) step(text string, ids []int, logprobs []*TokenLogprob) {
	events := t.parse(text)
	answering := false
	for _, ev := range events {
		answering = answering || ev.Kind == chat.ContentDelta || ev.Kind == chat.ToolCallStart
	}
	t.thinks = t.thinks && !answering
	if t.thinks {
		t.res.ReasoningTokens += len(ids)
	}
	t.out <- TurnEvent{Parsed: events, IDs: ids, Logprobs: logprobs, Received: time.Now()}
}

// parse feeds text to the parser (or, for Plain, passes it as content).
func (t *Turn) parse(text string) []chat.Event {
	t.raw.WriteString(text)
	switch {
	case t.parser != nil:
		return t.parser.Feed(text)
	case text != "":
		return []chat.Event{{Kind: chat.ContentDelta, Text: text}}
	}
	return nil
}

// end sends the final event, with the output's last text.
func (t *Turn) end(text string) {
	received := time.Now()
	if t.pacedUp {
		text = ""
	}
	ev := TurnEvent{Final: true, Parsed: t.parse(text), Received: received}
	if t.parser != nil {
		ev.Closing = t.parser.Finish()
	}
	res := &t.res
	res.Stats, res.Err = t.stream.Result()
	res.Text = t.raw.String()
	// Constrained text the budget closed ends complete, as the engine
	// sees it, but the answer was cut at max_tokens, and says so.
	if c, ok := t.r.Constraint.(interface{ ClosedByBudget() bool }); ok && c.ClosedByBudget() && res.Stats.FinishReason == FinishStop {
		res.Stats.FinishReason = FinishLength
	}
	if t.pacedUp {
		// The turn keeps only what was handed out, and so do its counts.
		res.Stats.FinishReason = FinishCancelled
		res.Stats.GeneratedTokens = min(res.Stats.GeneratedTokens, t.shown)
	}
	ev.Result = res
	t.out <- ev
}

// withoutSpecials drops the text of the special tokens among ids (control
// tokens such as <|im_start|>, which a model may sample though it should
// not) from text, the text the engine decoded for them: nobody is shown a
// control token as text. A special token's text is its own ASCII string,
// complete in the event that carries it.
func (t *Turn) withoutSpecials(text string, ids []int) string {
	for _, id := range ids {
		if t.e.tok.IsSpecial(id) {
			text = strings.Replace(text, t.e.tok.Decode([]int{id}), "", 1)
		}
	}
	return text
}

// pacedPieces splits text into n pieces (at least one) of about the same
// number of characters, cut between characters: a step's tokens, handed
// out one at a time.
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
