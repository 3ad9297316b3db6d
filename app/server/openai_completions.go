package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/suzuran-app/suzuran/app/modelhost"
	"github.com/suzuran-app/suzuran/engine"
	"github.com/suzuran-app/suzuran/engine/chat"
)

// completionRequest is POST /v1/completions: a raw prompt, no template.
type completionRequest struct {
	Model  string          `json:"model"`
	Prompt json.RawMessage `json:"prompt"`
	samplingFields
	Stream        bool `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	MaxTokens *int         `json:"max_tokens"`
	Stop      stringOrList `json:"stop"`
	N         *int         `json:"n"`
	Echo      bool         `json:"echo"`
	// Logprobs asks for each generated token's log-probability and this
	// many most likely alternatives, in the legacy shape (legacyLogprobs).
	Logprobs *int   `json:"logprobs"`
	User     string `json:"user"`
}

// promptIDs reads the prompt: a string, token ids, or a list holding one
// of either (a batch of one).
func promptIDs(raw json.RawMessage, e *engine.Engine) ([]int, error) {
	if len(raw) == 0 {
		return nil, badRequest("prompt", "prompt is missing: send a string or a list of token ids")
	}
	var text string
	if err := json.Unmarshal(raw, &text); err == nil {
		if text == "" {
			return nil, badRequest("prompt", "prompt is empty")
		}
		// Special tokens written in the prompt are the model's own
		// (<|im_start|>…), as llama.cpp and vLLM read them.
		ids, ok := e.Tokenizer().EncodeWithSpecialsUpTo(text, e.ContextTokens()-1)
		if !ok {
			return nil, contextExceeded(fmt.Errorf("%w: more than %d tokens, the context holds %d including the answer",
				engine.ErrPromptTooLong, e.ContextTokens()-1, e.ContextTokens()), "prompt", "the prompt")
		}
		return ids, nil
	}
	var ids []int
	if err := json.Unmarshal(raw, &ids); err == nil {
		if len(ids) == 0 {
			return nil, badRequest("prompt", "prompt is an empty list of token ids")
		}
		return ids, nil
	}
	var batch []json.RawMessage
	if err := json.Unmarshal(raw, &batch); err == nil {
		if len(batch) != 1 {
			return nil, badRequest("prompt", "prompt holds %d prompts: this server answers one prompt per request", len(batch))
		}
		var inner []json.RawMessage
		if json.Unmarshal(batch[0], &inner) == nil || json.Unmarshal(batch[0], &text) == nil {
			return promptIDs(batch[0], e)
		}
	}
	return nil, badRequest("prompt", "prompt must be a string or a list of token ids")
}

func (s *Server) handleCompletions(w http.ResponseWriter, r *http.Request) {
	var req completionRequest
	if err := decodeBody(r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	g, name, err := s.startCompletion(r, &req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := &completionOutput{id: newID("cmpl-"), created: time.Now().Unix(), model: name, g: g}
	if req.Stream {
		s.streamCompletion(w, r, g, out, req.StreamOptions != nil && req.StreamOptions.IncludeUsage)
		return
	}
	res := g.run(func([]chat.Event, time.Time) error { return nil })
	switch {
	case res.err != nil:
		s.writeError(w, r, res.err)
	case res.stats.FinishReason == engine.FinishCancelled:
		s.writeError(w, r, cancelledError())
	default:
		body := out.chunk(res.text, res.finish())
		body.Usage = some(usageOf(&res))
		writeJSON(w, http.StatusOK, body)
	}
}

// startCompletion checks a completions request and submits it.
func (s *Server) startCompletion(r *http.Request, req *completionRequest) (*generation, string, error) {
	if req.N != nil && *req.N != 1 {
		return nil, "", badRequest("n", "n %d: this server returns one choice per request; send n 1 or leave it out", *req.N)
	}
	if req.Echo {
		return nil, "", badRequest("echo", "echo is not supported: the answer never repeats the prompt; leave echo out")
	}
	if req.Logprobs != nil && (*req.Logprobs < 0 || *req.Logprobs > maxTopLogprobs) {
		return nil, "", badRequest("logprobs", "logprobs %d: must be between 0 and %d", *req.Logprobs, maxTopLogprobs)
	}
	maxTokens, err := maxTokensOf(req.MaxTokens)
	if err != nil {
		return nil, "", err
	}
	e, name, err := s.current(r)
	if err != nil {
		return nil, "", err
	}
	if err := checkModel(req.Model, name); err != nil {
		return nil, "", err
	}
	ids, err := promptIDs(req.Prompt, e)
	if err != nil {
		return nil, "", err
	}
	// A raw prompt is not a chat: the model card's non-thinking defaults.
	p := genParams{prompt: chat.Prompt{IDs: ids}, sampling: req.samplingFields.resolve(false), seed: req.samplingFields.seed(), maxTokens: maxTokens, stop: req.Stop}
	if req.Logprobs != nil {
		p.logprobs, p.topLogprobs = true, *req.Logprobs
	}
	s.debugRequest(r, "completions", p, req.Stream)
	g, err := s.submit(r.Context(), e, p)
	if errors.Is(err, engine.ErrPromptTooLong) {
		err = &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: "prompt", Code: "context_length_exceeded",
			Message: fmt.Sprintf("%v; shorten the prompt or start the server with a larger context (--ctx)", err)}
	}
	return g, name, err
}

// completionOutput is what every chunk of one completion repeats; offset
// is where the next token's text starts in the completion.
type completionOutput struct {
	id      string
	created int64
	model   string
	g       *generation
	offset  int
}

// chunk is a text_completion of text, with the logprobs of the tokens
// received since the last chunk when they were asked for.
func (o *completionOutput) chunk(text, finish string) *openAICompletion[textChoice] {
	choice := textChoice{Text: text, FinishReason: nullString(finish)}
	if o.g.p.logprobs {
		choice.Logprobs = toLegacyLogprobs(o.g.takeLogprobs(), &o.offset)
	}
	return &openAICompletion[textChoice]{ID: o.id, Object: "text_completion", Created: o.created, Model: o.model,
		Choices: []textChoice{choice}}
}

// streamCompletion streams the completion as text_completion chunks, then
// the usage chunk when asked for, then [DONE].
func (s *Server) streamCompletion(w http.ResponseWriter, r *http.Request, g *generation, out *completionOutput, includeUsage bool) {
	sse := newSSE(w)
	sse.flush() // the headers: the request was taken
	send := func(c *openAICompletion[textChoice]) {
		if includeUsage {
			c.Usage = some[*openAIUsage](nil)
		}
		sse.event("", c)
	}
	g.keepAlive = func() error { return sse.comment(g.waitNote()) }
	res := g.run(func(events []chat.Event, received time.Time) error {
		// The logprobs of the tokens received so far go with the first
		// chunk; the chunks after it (a token may give several) carry none.
		for _, ev := range events {
			send(out.chunk(ev.Text, ""))
		}
		return s.flushToken(sse, received)
	})
	if !s.endStream(r, sse, res, openAIErrors) {
		return
	}
	send(out.chunk("", res.finish()))
	if includeUsage {
		c := out.chunk("", "")
		c.Choices = []textChoice{}
		c.Usage = some(usageOf(&res))
		sse.event("", c)
	}
	sse.raw("", []byte("[DONE]"))
	sse.flush()
}

// maxTopLogprobs bounds the alternatives a request may ask for at each
// token, in both APIs.
const maxTopLogprobs = 20

// toLegacyLogprobs turns logprob entries (generation.logprobEntry) into the
// legacy completions shape: the tokens' texts, their logprobs, for each
// token a map from the text of the most likely tokens (and of the one
// chosen, so up to logprobs+1 of them) to their logprobs, and where each
// token's text starts in the completion (in characters, as vLLM counts;
// offset carries the count across the chunks of a stream).
func toLegacyLogprobs(entries []logprobEntry, offset *int) *legacyLogprobs {
	n := len(entries)
	out := &legacyLogprobs{Tokens: make([]string, 0, n), TokenLogprobs: make([]float64, 0, n),
		TopLogprobs: make([]map[string]float64, 0, n), TextOffset: make([]int, 0, n)}
	for _, e := range entries {
		out.Tokens, out.TokenLogprobs = append(out.Tokens, e.Token), append(out.TokenLogprobs, e.Logprob)
		alternatives := map[string]float64{}
		for _, alt := range e.TopLogprobs {
			// Two tokens may read the same (parts of one character): the
			// first, most likely, stays.
			if !hasKey(alternatives, alt.Token) {
				alternatives[alt.Token] = alt.Logprob
			}
		}
		if !hasKey(alternatives, e.Token) {
			alternatives[e.Token] = e.Logprob
		}
		out.TopLogprobs = append(out.TopLogprobs, alternatives)
		out.TextOffset = append(out.TextOffset, *offset)
		*offset += utf8.RuneCountInString(e.Token)
	}
	return out
}

func hasKey(m map[string]float64, k string) bool {
	_, ok := m[k]
	return ok
}

// handleModels lists the one model this server runs, with its context
// length (while it loads, without).
func (s *Server) handleModels(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, modelList{Object: "list", Data: []modelObject{s.modelEntry(r)}})
}

func (s *Server) handleModel(w http.ResponseWriter, r *http.Request) {
	entry := s.modelEntry(r)
	if id := r.PathValue("id"); id != entry.ID {
		s.writeError(w, r, &apiError{Status: http.StatusNotFound, Type: "invalid_request_error", Param: "model", Code: "model_not_found",
			Message: fmt.Sprintf("the model %q is not served here; this server runs %q", id, entry.ID)})
		return
	}
	writeJSON(w, http.StatusOK, entry)
}

func (s *Server) modelEntry(r *http.Request) modelObject {
	st := s.cfg.Models.Status()
	entry := modelObject{ID: st.Name, Object: "model", OwnedBy: "suzuran"}
	if st.State == modelhost.StateReady {
		if e, _, err := s.current(r); err == nil {
			entry.ContextLength = e.ContextTokens()
			entry.MaxModelLen = e.ContextTokens()
		}
	}
	return entry
}

// handleHealth reports the model's state: 200 when ready, 503 otherwise
// (loading, with its progress; failed, with why; unloaded), so that a
// health check waits for the model. constrained_sampling says whether
// response_format json_schema and forced tool calls are served.
func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	st := s.cfg.Models.Status()
	body := healthBody{Status: st.State, Model: st.Name, ConstrainedSampling: constrain != nil}
	switch st.State {
	case modelhost.StateLoading:
		body.Progress = some(st.Progress)
	case modelhost.StateError:
		body.Error = some(st.Error)
	}
	status := http.StatusOK
	if st.State != modelhost.StateReady {
		status = http.StatusServiceUnavailable
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, status, body)
}

func (s *Server) handleEmbeddings(w http.ResponseWriter, r *http.Request) {
	name := s.cfg.Models.Status().Name
	s.writeError(w, r, &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: "model", Code: "model_not_supported",
		Message: fmt.Sprintf("%s is a chat model and serves no embeddings: use an embedding model elsewhere", name)})
}
