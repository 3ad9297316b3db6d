package engine

import (
	"context"
	"errors"

	"github.com/suzuran-app/suzuran/engine/chat"
	"github.com/suzuran-app/suzuran/engine/model"
)

// ChatRequest is a conversation to answer: the messages go through the
// model's chat template, the rest is as in Request.
type ChatRequest struct {
	Render    chat.RenderRequest
	Sampling  model.Sampling
	MaxTokens int
	Stop      []string
	Progress  func(PrefillProgress) // as in Request
	// Constraint is as in Request. A grammar that must know whether the
	// prompt opened a <think> block can tell from Encode's Prompt.Text
	// (chat.PromptOpensThinking); Encode and Submit then do what
	// SubmitChat does.
	Constraint Constraint
}

// Template returns the model's chat template, or the error that kept it
// from loading (a model folder without one still serves token requests).
func (e *Engine) Template() (*chat.Template, error) {
	if e.tmpl == nil {
		if e.tmplErr != nil {
			return nil, e.tmplErr
		}
		return nil, errors.New("the engine was made without a chat template")
	}
	return e.tmpl, nil
}

// Encode renders a conversation and tokenizes it, with the positions worth
// snapshotting for the conversation's next turn.
func (e *Engine) Encode(r chat.RenderRequest) (chat.Prompt, error) {
	t, err := e.Template()
	if err != nil {
		return chat.Prompt{}, err
	}
	return t.Encode(e.tok, r)
}

// SubmitChat renders r's conversation and submits it, snapshotting where the
// next turn will diverge so that it prefills only its new tokens. It
// returns the rendered prompt too (its length is Stats.PromptTokens).
func (e *Engine) SubmitChat(ctx context.Context, r ChatRequest) (*Stream, chat.Prompt, error) {
	prompt, err := e.Encode(r.Render)
	if err != nil {
		return nil, chat.Prompt{}, err
	}
	s, err := e.Submit(ctx, Request{
		Prompt:      prompt.IDs,
		Sampling:    r.Sampling,
		MaxTokens:   r.MaxTokens,
		Stop:        r.Stop,
		Checkpoints: prompt.Checkpoints,
		// Only tool results continue a conversation after the whole
		// answer; a user turn diverges at the checkpoint.
		SnapshotAnswer: len(r.Render.Tools) > 0,
		Progress:       r.Progress,
		Constraint:     r.Constraint,
	})
	return s, prompt, err
}
