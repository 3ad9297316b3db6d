package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/suzuran-app/suzuran/engine"
	"github.com/suzuran-app/suzuran/engine/chat"
	"github.com/suzuran-app/suzuran/engine/model"
	"github.com/suzuran-app/suzuran/engine/sample"
)

// samplingFields are the sampling parameters every API shares, pointers so
// that an absent field can take the model card's default.
type samplingFields struct {
	Temperature       *float64 `json:"temperature"`
	TopP              *float64 `json:"top_p"`
	TopK              *int     `json:"top_k"`
	MinP              *float64 `json:"min_p"`
	PresencePenalty   *float64 `json:"presence_penalty"`
	FrequencyPenalty  *float64 `json:"frequency_penalty"`
	RepetitionPenalty *float64 `json:"repetition_penalty"`
	Seed              *int64   `json:"seed"`
}

// resolve fills in the fields the request left out with the model card's
// defaults for the thinking mode. Temperature 0 asks for plain greedy
// decoding: the defaults' penalties and cuts are dropped then (a penalty the
// request gives itself stays), so the answer is the model's arg-max, token
// for token reproducible.
func (f samplingFields) resolve(thinking bool) model.Sampling {
	s := sample.ModelCardDefaults(thinking)
	if f.Temperature != nil && *f.Temperature == 0 {
		s = model.Sampling{}
	}
	set32 := func(dst *float32, v *float64) {
		if v != nil {
			*dst = float32(*v)
		}
	}
	set32(&s.Temperature, f.Temperature)
	set32(&s.TopP, f.TopP)
	set32(&s.MinP, f.MinP)
	set32(&s.PresencePenalty, f.PresencePenalty)
	set32(&s.FrequencyPenalty, f.FrequencyPenalty)
	set32(&s.RepetitionPenalty, f.RepetitionPenalty)
	if f.TopK != nil {
		s.TopK = *f.TopK
	}
	if seed := f.seed(); seed != nil {
		s.Seed = *seed
	}
	return s
}

// seed is the seed the request names, nil for one drawn at random.
func (f samplingFields) seed() *uint64 {
	if f.Seed == nil {
		return nil
	}
	seed := uint64(*f.Seed)
	return &seed
}

// genParams is one generation, whichever API asked for it.
type genParams struct {
	prompt    chat.Prompt
	render    chat.RenderRequest // the conversation prompt renders (its tools)
	images    []model.Image      // the conversation's images, as chat.ImagePart.Index numbers them
	sampling  model.Sampling
	seed      *uint64 // nil: drawn at random
	maxTokens int
	stop      []string
	// parse splits the output into reasoning, content and tool calls (the
	// chat APIs); without it the output is plain text (completions).
	parse bool
	// thinking: the prompt opens a <think> block.
	thinking bool
	// snapshotAnswer keeps the state after the answer for a next request
	// that carries tool results.
	snapshotAnswer bool
	constraint     *constraintSpec
	// logprobs asks the engine for token log-probabilities, topLogprobs
	// for that many alternatives at each step.
	logprobs    bool
	topLogprobs int
}

// generation is a submitted request being streamed.
type generation struct {
	s       *Server
	e       *engine.Engine
	p       genParams
	ctx     context.Context
	cancel  context.CancelFunc
	turn    *engine.Turn
	started time.Time
	// keepAlive, set by streaming handlers, sends something the client's
	// SSE parser ignores, while no token has come yet.
	keepAlive func() error
	// position is the request's place in the engine's queue while it
	// waits (0 once it runs), for the keep-alive comments.
	position int
	// logprobs holds the OpenAI logprob entries of tokens received and not
	// yet handed out (takeLogprobs); only run's goroutine touches it.
	logprobs []logprobEntry
}

// takeLogprobs hands out the logprob entries received so far.
func (g *generation) takeLogprobs() []logprobEntry {
	out := g.logprobs
	g.logprobs = nil
	return out
}

// logprobEntry is a token's entry in OpenAI's logprobs.content: the
// token and its alternatives.
func (g *generation) logprobEntry(tok int, lp *engine.TokenLogprob) logprobEntry {
	top := make([]logprobAlt, 0, len(lp.Top))
	for _, alt := range lp.Top {
		top = append(top, tokenLogprob(g.e, alt.Token, alt.Logprob))
	}
	return logprobEntry{logprobAlt: tokenLogprob(g.e, tok, lp.Logprob), TopLogprobs: top}
}

func tokenLogprob(e *engine.Engine, tok int, logprob float64) logprobAlt {
	text := e.Tokenizer().Decode([]int{tok})
	raw := e.Tokenizer().TokenBytes(tok)
	bytes := make([]int, len(raw))
	for i, b := range raw {
		bytes[i] = int(b)
	}
	return logprobAlt{Token: text, Logprob: logprob, Bytes: bytes}
}

// logprobsField is a choice's "logprobs": null unless asked for.
func logprobsField(asked bool, entries []logprobEntry) *logprobsContent {
	if !asked {
		return nil
	}
	if entries == nil {
		entries = []logprobEntry{}
	}
	return &logprobsContent{Content: entries}
}

// submit queues a generation on the engine. Its errors come before any
// byte of the answer: a full queue (429), a prompt too long (400), an
// option out of range (400, naming it), an engine that closed (503).
func (s *Server) submit(ctx context.Context, e *engine.Engine, p genParams) (*generation, error) {
	if p.maxTokens == 0 {
		p.maxTokens = s.cfg.DefaultMaxTokens
	}
	req := engine.TurnRequest{
		Render: p.render, Prompt: p.prompt, Images: p.images, Sampling: p.sampling, Seed: p.seed,
		MaxTokens: p.maxTokens, Stop: p.stop, SnapshotAnswer: p.snapshotAnswer,
		Logprobs: p.logprobs, TopLogprobs: p.topLogprobs, Plain: !p.parse,
	}
	if p.constraint != nil {
		if err := applyConstraint(e, *p.constraint, &req); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	turn, err := e.StartTurn(ctx, req)
	if err != nil {
		cancel()
		var bad *engine.OptionError
		switch {
		case errors.Is(err, engine.ErrBusy), errors.Is(err, engine.ErrClosed), errors.Is(err, engine.ErrPromptTooLong):
			return nil, err
		case errors.As(err, &bad):
			return nil, badRequest(bad.Option, "%v", err)
		}
		// What is left are the engine's checks of the request.
		return nil, badRequest("", "%v", err)
	}
	s.running.Add(1)
	return &generation{s: s, e: e, p: p, ctx: ctx, cancel: cancel, turn: turn, started: time.Now()}, nil
}

// waitNote is the keep-alive comment of a stream with no token yet: its
// queue position while it waits, for a client that shows it.
func (g *generation) waitNote() string {
	if n := g.position; n > 0 {
		return fmt.Sprintf("queued: position %d", n)
	}
	return "keep-alive"
}

// genResult is how a generation ended.
type genResult struct {
	stats engine.Stats
	// err is set when generation failed after it started (a backend error).
	err error
	// toolCalls counts the tool calls parsed from the output.
	toolCalls int
	// reasoningTokens counts the generated tokens of the reasoning.
	reasoningTokens int
	// stopSequence is the stop string that ended the output, if one did.
	stopSequence string
	text         string // the output as the client received it (unparsed)
}

// resultOf is a turn's result as the APIs report it.
func resultOf(r *engine.TurnResult, toolCalls int) genResult {
	return genResult{stats: r.Stats, err: r.Err, toolCalls: toolCalls, reasoningTokens: r.ReasoningTokens,
		stopSequence: r.Stats.StopSequence, text: r.Text}
}

// finish maps the engine's reason to OpenAI's finish_reason.
func (r *genResult) finish() string {
	switch {
	case r.toolCalls > 0 && r.stats.FinishReason == engine.FinishStop:
		return "tool_calls"
	case r.stats.FinishReason == engine.FinishLength:
		return "length"
	}
	return "stop"
}

// run reads the turn's events until the end, handing each step's parsed
// events to emit (plain completions get one ContentDelta per step). When
// emit fails (the client left) the generation is cancelled; the engine
// stops within a token.
func (g *generation) run(emit func(events []chat.Event, since time.Time) error) genResult {
	defer g.s.running.Add(-1)
	defer g.cancel()
	// Unconstrained tool calls are held until they end (callHolder); a
	// constraint closes its calls validly.
	var calls *callHolder
	if g.p.parse && g.p.constraint == nil && len(g.p.render.Tools) > 0 {
		calls = &callHolder{}
	}
	emitting, toolCalls := true, 0
	send := func(events []chat.Event, final bool, received time.Time) {
		toolCalls += countKind(events, chat.ToolCallStart)
		if emitting && (len(events) > 0 || final) {
			if err := emit(events, received); err != nil {
				emitting = false
				g.cancel()
			}
		}
	}
	// While the request waits in the queue or its prompt is prefilled (a
	// long prompt on the full model takes minutes), nothing would be sent:
	// a keep-alive every keepAliveInterval tells the client, and any proxy
	// between, that the answer is coming, and finds a client that left.
	var tick <-chan time.Time
	if g.keepAlive != nil {
		ticker := time.NewTicker(g.s.keepAliveInterval)
		defer ticker.Stop()
		tick = ticker.C
	}
	tokens := 0
	for events := g.turn.Events; events != nil; {
		select {
		case ev, ok := <-events:
			switch {
			case !ok:
				events = nil
			case ev.QueuePosition != nil:
				g.position = *ev.QueuePosition
			case ev.Final && calls != nil:
				send(append(calls.feed(ev.Parsed), calls.finish(ev.Closing, ev.Result.Text)...), true, ev.Received)
			case ev.Final:
				send(append(ev.Parsed, ev.Closing...), true, ev.Received)
			case ev.Progress == nil:
				tokens += len(ev.IDs)
				g.takeTokens(ev.IDs, ev.Logprobs)
				if calls != nil {
					ev.Parsed = calls.feed(ev.Parsed)
				}
				send(ev.Parsed, false, ev.Received)
			}
		case <-tick:
			if emitting && tokens == 0 {
				if err := g.keepAlive(); err != nil {
					emitting = false
					g.cancel()
				}
			}
		}
	}
	turn := g.turn.Result()
	res := resultOf(&turn, toolCalls)
	g.s.logGeneration(g, &res)
	return res
}

// takeTokens keeps the logprob entries of a step's tokens (an end of
// sequence has none).
func (g *generation) takeTokens(ids []int, logprobs []*engine.TokenLogprob) {
	for i, id := range ids {
		if i < len(logprobs) && logprobs[i] != nil && !slices.Contains(g.e.Config().EOSTokenIDs, id) {
			g.logprobs = append(g.logprobs, g.logprobEntry(id, logprobs[i]))
		}
	}
}

// countKind counts the events of a kind.
func countKind(events []chat.Event, kind chat.EventKind) int {
	n := 0
	for _, ev := range events {
		if ev.Kind == kind {
			n++
		}
	}
	return n
}

// logGeneration records a finished generation; a cancelled one (client
// disconnected, server shutting down) at info level, so that the log shows
// when it stopped.
func (s *Server) logGeneration(g *generation, res *genResult) {
	info := infoOf(g.ctx)
	info.promptTokens = res.stats.PromptTokens
	info.cachedTokens = res.stats.CachedTokens
	info.generatedTokens = res.stats.GeneratedTokens
	info.finish = res.stats.FinishReason
	switch {
	case res.stats.FinishReason == engine.FinishCancelled:
		s.log.Info().Int("generated_tokens", res.stats.GeneratedTokens).Dur("after", time.Since(g.started)).Msg("generation cancelled")
	case res.err != nil:
		s.log.Error().Err(res.err).Msg("generation failed")
	case s.cfg.LogRequests:
		s.log.Debug().Int("prompt_tokens", res.stats.PromptTokens).Int("cached_tokens", res.stats.CachedTokens).
			Int("generated_tokens", res.stats.GeneratedTokens).Dur("queue_wait", res.stats.QueueWait).
			Dur("prefill", res.stats.PrefillDuration).Dur("decode", res.stats.DecodeDuration).
			Str("finish", res.stats.FinishReason).Msg("generation")
	}
}

// newID is a random identifier with a prefix ("chatcmpl-…", "call_…").
func newID(prefix string) string {
	var b [12]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// turnStart says how one chat API starts a turn.
type turnStart struct {
	api        string // the API's name in the debug log
	model      string // the model the request names
	stream     bool
	checkModel func(requested, served string) error
	// submitErr, when set, rewrites an error of the submission (the
	// Responses API names its own field for a prompt too long).
	submitErr func(error) error
	// fits, when set, checks the rendered prompt's length and the answer's
	// bound against the context before submitting (the Anthropic API words
	// these errors its own way, and Claude Code acts on the words).
	fits func(promptTokens, maxTokens, contextTokens int) error
}

// startTurn does what every chat API does between its decoded turn and its
// answer: it takes the engine, checks the model the request names, renders
// the prompt and submits it. When one of them fails it writes the error in
// the caller's shape and returns false.
func (s *Server) startTurn(w http.ResponseWriter, r *http.Request, turn *chatTurn, o turnStart) (*generation, string, bool) {
	e, name, err := s.current(r)
	if err == nil {
		err = o.checkModel(o.model, name)
	}
	if err == nil {
		err = s.readDocuments(r.Context(), e, turn)
	}
	var p genParams
	if err == nil {
		if p, err = s.prepare(e, turn); err != nil && o.submitErr != nil {
			err = o.submitErr(err) // a prompt too long, found while encoding
		}
	}
	if err == nil && o.fits != nil {
		err = o.fits(len(p.prompt.IDs), p.maxTokens, e.ContextTokens())
	}
	if err != nil {
		s.writeError(w, r, err)
		return nil, "", false
	}
	s.debugRequest(r, o.api, p, o.stream)
	g, err := s.submit(r.Context(), e, p)
	if err != nil {
		if o.submitErr != nil {
			err = o.submitErr(err)
		}
		s.writeError(w, r, err)
		return nil, "", false
	}
	return g, name, true
}

// runToEnd runs a generation that is not streamed, collecting its parsed
// events. A failure, or a cancellation (the server shutting down), is
// written as the error in the caller's shape, and ok is false.
func (s *Server) runToEnd(w http.ResponseWriter, r *http.Request, g *generation) (events []chat.Event, res genResult, ok bool) {
	res = g.run(func(ev []chat.Event, _ time.Time) error {
		events = append(events, ev...)
		return nil
	})
	if res.err != nil {
		s.writeError(w, r, res.err)
		return nil, res, false
	}
	if res.stats.FinishReason == engine.FinishCancelled {
		s.writeError(w, r, cancelledError())
		return nil, res, false
	}
	return events, res, true
}
