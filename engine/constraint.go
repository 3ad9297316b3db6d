package engine

import (
	"errors"
	"slices"

	"github.com/suzuran-app/suzuran/engine/model"
	"github.com/suzuran-app/suzuran/engine/sample"
)

// Constraint restricts which tokens a request may generate, so that the
// answer follows a grammar (a JSON schema, a forced tool call): before each
// token is sampled the engine lets the constraint rule tokens out, samples
// from what is left with the request's usual sampling rule, and tells the
// constraint which token was chosen.
//
// A constrained request runs its sampling on the host: each step reads the
// logits row back from the backend (on a GPU backend the device would
// otherwise sample by itself) and decode steps are not pipelined, since the
// next step's input depends on the host's choice. Requests without a
// constraint are untouched by any of this.
//
// The engine calls a Constraint from its own goroutine only, one request at
// a time; an implementation needs no locking unless it shares state with
// other constraints.
type Constraint interface {
	// Mask sets to −Inf the logit of every token that may not come next.
	// logits is one row over the model's whole vocabulary (it may be longer
	// than the tokenizer's, and those extra ids are never valid). EOS tokens
	// are tokens like any other: leave them alone only where the
	// constrained text may end.
	Mask(logits []float32)
	// Accept advances past the chosen token. A token that Mask ruled out
	// (which the engine only chooses when Mask left nothing at all) is an
	// error, and the request ends with it.
	Accept(token int) error
	// Done reports that the constrained text is complete and admits no
	// further token: the engine then ends the request (FinishStop) without
	// sampling again.
	Done() bool
}

// hostSampling chooses a constrained request's tokens on the host: the
// backend returns the logits row instead of sampling, the constraint masks
// it, and the host sampler (the rule every backend's sample block follows)
// draws from what is left.
type hostSampling struct {
	constraint Constraint
	sampler    *sample.Sampler
	// history is the sequence's tokens, prompt and chosen ones: the
	// penalties' input, and its length the position that seeds the draw.
	history []int
}

func newHostSampling(c Constraint, prompt []int) *hostSampling {
	return &hostSampling{constraint: c, sampler: sample.New(), history: slices.Clone(prompt)}
}

// input is the next decode step's input: the token chosen last, fed from
// the host, and the logits row back.
func (h *hostSampling) input() model.Input {
	return model.Input{IDs: []int{h.history[len(h.history)-1]}, Logits: model.LogitsLast}
}

// choose masks logits (the backend's copy, which the engine owns), samples
// and advances the constraint.
func (h *hostSampling) choose(logits []float32, s *model.Sampling) (int, error) {
	if len(logits) == 0 {
		return -1, errors.New("the backend returned no logits")
	}
	h.constraint.Mask(logits)
	tok := h.sampler.Sample(logits, s, h.history)
	if err := h.constraint.Accept(tok); err != nil {
		return -1, err
	}
	h.history = append(h.history, tok)
	return tok, nil
}
