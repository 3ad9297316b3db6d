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
	if req.N != nil && *req.N != 1 {
		s.writeError(w, r, badRequest("n", "n %d: this server returns one choice per request; send n 1 or leave it out", *req.N))
		return
	}
	if req.Echo {
		s.writeError(w, r, badRequest("echo", "echo is not supported: the answer never repeats the prompt; leave echo out"))
		return
	}
	if req.Logprobs != nil && (*req.Logprobs < 0 || *req.Logprobs > maxTopLogprobs) {
		s.writeError(w, r, badRequest("logprobs", "logprobs %d: must be between 0 and %d", *req.Logprobs, maxTopLogprobs))
		return
	}
	maxTokens, err := maxTokensOf(req.MaxTokens)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	e, name, err := s.current(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := checkModel(req.Model, name); err != nil {
		s.writeError(w, r, err)
		return
	}
	ids, err := promptIDs(req.Prompt, e)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	// A raw prompt is not a chat: the model card's non-thinking defaults.
	p := genParams{prompt: chat.Prompt{IDs: ids}, sampling: req.samplingFields.resolve(false), seed: req.samplingFields.seed(), maxTokens: maxTokens, stop: req.Stop}
	if req.Logprobs != nil {
		p.logprobs, p.topLogprobs = true, *req.Logprobs
	}
	s.debugRequest(r, "completions", p, req.Stream)
	g, err := s.submit(r.Context(), e, p)
	if err != nil {
		if errors.Is(err, engine.ErrPromptTooLong) {
			err = &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: "prompt", Code: "context_length_exceeded",
				Message: fmt.Sprintf("%v; shorten the prompt or start the server with a larger context (--ctx)", err)}
		}
		s.writeError(w, r, err)
		return
	}
	id, created := newID("cmpl-"), time.Now().Unix()
	// offset is where the next token's text starts in the completion.
	offset := 0
	chunk := func(text string, finish any) map[string]any {
		var logprobs any
		if p.logprobs {
			logprobs = legacyLogprobs(g.takeLogprobs(), &offset)
		}
		return map[string]any{"id": id, "object": "text_completion", "created": created, "model": name,
			"choices": []any{map[string]any{"text": text, "index": 0, "logprobs": logprobs, "finish_reason": finish}}}
	}
	if !req.Stream {
		res := g.run(func([]chat.Event, time.Time) error { return nil })
		switch {
		case res.err != nil:
			s.writeError(w, r, res.err)
		case res.stats.FinishReason == engine.FinishCancelled:
			s.writeError(w, r, cancelledError())
		default:
			body := chunk(res.text, res.finish())
			body["usage"] = usageOf(&res)
			writeJSON(w, http.StatusOK, body)
		}
		return
	}
	includeUsage := req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	sse := newSSE(w)
	sse.flush() // the headers: the request was taken
	send := func(c map[string]any) {
		if includeUsage {
			c["usage"] = nil
		}
		sse.event("", c)
	}
	g.keepAlive = func() error { return sse.comment(g.waitNote()) }
	res := g.run(func(events []chat.Event, received time.Time) error {
		// The logprobs of the tokens received so far go with the first
		// chunk; the chunks after it (a token may give several) carry none.
		for _, ev := range events {
			send(chunk(ev.Text, nil))
		}
		return s.flushToken(sse, received)
	})
	if !s.endStream(r, sse, res, openAIErrors) {
		return
	}
	send(chunk("", res.finish()))
	if includeUsage {
		c := chunk("", nil)
		c["choices"] = []any{}
		c["usage"] = usageOf(&res)
		sse.event("", c)
	}
	sse.raw("", []byte("[DONE]"))
	sse.flush()
}

// maxTopLogprobs bounds the alternatives a request may ask for at each
// token, in both APIs.
const maxTopLogprobs = 20

// legacyLogprobs turns logprob entries (generation.logprobEntry) into the
// legacy completions shape: the tokens' texts, their logprobs, for each
// token a map from the text of the most likely tokens (and of the one
// chosen, so up to logprobs+1 of them) to their logprobs, and where each
// token's text starts in the completion (in characters, as vLLM counts;
// offset carries the count across the chunks of a stream).
func legacyLogprobs(entries []map[string]any, offset *int) map[string]any {
	n := len(entries)
	tokens, logprobs := make([]string, 0, n), make([]float64, 0, n)
	top, offsets := make([]map[string]float64, 0, n), make([]int, 0, n)
	for _, e := range entries {
		text, lp := e["token"].(string), e["logprob"].(float64)
		tokens, logprobs = append(tokens, text), append(logprobs, lp)
		alternatives := map[string]float64{}
		alts, _ := e["top_logprobs"].([]any)
		for _, a := range alts {
			alt := a.(map[string]any)
			// Two tokens may read the same (parts of one character): the
			// first, most likely, stays.
			if t := alt["token"].(string); !hasKey(alternatives, t) {
				alternatives[t] = alt["logprob"].(float64)
			}
		}
		if !hasKey(alternatives, text) {
			alternatives[text] = lp
		}
		top = append(top, alternatives)
		offsets = append(offsets, *offset)
		*offset += utf8.RuneCountInString(text)
	}
	return map[string]any{"tokens": tokens, "token_logprobs": logprobs, "top_logprobs": top, "text_offset": offsets}
}

func hasKey(m map[string]float64, k string) bool {
	_, ok := m[k]
	return ok
}

// handleModels lists the one model this server runs, with its context
// length (while it loads, without).
func (s *Server) handleModels(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []any{s.modelEntry(r)}})
}

func (s *Server) handleModel(w http.ResponseWriter, r *http.Request) {
	entry := s.modelEntry(r)
	if id := r.PathValue("id"); id != entry["id"] {
		s.writeError(w, r, &apiError{Status: http.StatusNotFound, Type: "invalid_request_error", Param: "model", Code: "model_not_found",
			Message: fmt.Sprintf("the model %q is not served here; this server runs %q", id, entry["id"])})
		return
	}
	writeJSON(w, http.StatusOK, entry)
}

func (s *Server) modelEntry(r *http.Request) map[string]any {
	st := s.cfg.Models.Status()
	entry := map[string]any{"id": st.Name, "object": "model", "created": 0, "owned_by": "suzuran"}
	if st.State == modelhost.StateReady {
		if e, _, err := s.current(r); err == nil {
			entry["context_length"] = e.ContextTokens()
			entry["max_model_len"] = e.ContextTokens()
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
	body := map[string]any{"status": st.State, "model": st.Name, "constrained_sampling": constrain != nil}
	switch st.State {
	case modelhost.StateLoading:
		body["progress"] = st.Progress
	case modelhost.StateError:
		body["error"] = st.Error
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
