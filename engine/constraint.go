package engine

import (
	"errors"
	"math"
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
	constraint Constraint // nil: unconstrained (a request for logprobs)
	// logprobs asks choose to keep the log-softmax of the raw logits for
	// the chosen token and the top most likely ones.
	logprobs bool
	top      int
	last     TokenLogprob
	raw      []float32 // the last raw logits row, kept for the chosen token
	sampler  *sample.Sampler
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
	var lse float64
	if h.logprobs {
		// Before the mask and the sampler, which change logits in place.
		lse = logSumExp(logits)
		h.last.Top = topLogprobs(logits, h.top, lse, h.last.Top[:0])
		h.raw = append(h.raw[:0], logits...)
	}
	if h.constraint != nil {
		h.constraint.Mask(logits)
	}
	tok := h.sampler.Sample(logits, s, h.history)
	if h.constraint != nil {
		if err := h.constraint.Accept(tok); err != nil {
			return -1, err
		}
	}
	if h.logprobs {
		h.last.Logprob = float64(h.raw[tok]) - lse
	}
	h.history = append(h.history, tok)
	return tok, nil
}

// lastLogprob is a copy of the last chosen token's log-probability and the
// most likely tokens at its step.
func (h *hostSampling) lastLogprob() *TokenLogprob {
	return &TokenLogprob{Logprob: h.last.Logprob, Top: slices.Clone(h.last.Top)}
}

// logSumExp is log Σ exp(x), computed from the largest x so that nothing
// overflows.
func logSumExp(x []float32) float64 {
	m := math.Inf(-1)
	for _, v := range x {
		m = max(m, float64(v))
	}
	if math.IsInf(m, -1) {
		return m
	}
	var sum float64
	for _, v := range x {
		sum += math.Exp(float64(v) - m)
	}
	return m + math.Log(sum)
}

// topLogprobs appends the n largest logits of x (lower id first on ties)
// as log-probabilities, most likely first.
func topLogprobs(x []float32, n int, lse float64, out []TopLogprob) []TopLogprob {
	if n <= 0 {
		return out
	}
	for id, v := range x {
		lp := float64(v) - lse
		if len(out) == n && !(lp > out[n-1].Logprob) {
			continue
		}
		if len(out) < n {
			out = append(out, TopLogprob{})
		}
		i := len(out) - 1
		for i > 0 && lp > out[i-1].Logprob {
			out[i] = out[i-1]
			i--
		}
		out[i] = TopLogprob{Token: id, Logprob: lp}
	}
	return out
}
