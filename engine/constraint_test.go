package engine

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/suzuran-app/suzuran/engine/model"
)

// allowAll is a constraint that rules nothing out: a constrained request
// with it must generate exactly what the unconstrained one does, which
// checks that host sampling on the read-back logits follows the rule the
// backend's own sample block follows.
type allowAll struct{ accepted []int }

func (a *allowAll) Mask([]float32)         {}
func (a *allowAll) Accept(token int) error { a.accepted = append(a.accepted, token); return nil }
func (a *allowAll) Done() bool             { return false }

// forceTokens allows only the next token of a fixed sequence and is done
// after the last one.
type forceTokens struct {
	want []int
	next int
}

func (f *forceTokens) Mask(logits []float32) {
	for id := range logits {
		if id != f.want[f.next] {
			logits[id] = float32(math.Inf(-1))
		}
	}
}

func (f *forceTokens) Accept(token int) error {
	if token != f.want[f.next] {
		return fmt.Errorf("token %d, want %d", token, f.want[f.next])
	}
	f.next++
	return nil
}

func (f *forceTokens) Done() bool { return f.next == len(f.want) }

// TestConstraintThatAllowsEverythingChangesNothing: greedy on every
// backend, and sampled (temperature, top-k, top-p, penalties) on cpu, a
// constraint that masks nothing gives the unconstrained tokens.
func TestConstraintThatAllowsEverythingChangesNothing(t *testing.T) {
	c := greedyCaseFor(t, "Hello!")
	for _, backend := range backendsUnderTest() {
		t.Run(backend, func(t *testing.T) {
			e := loadDemo(t, backend, LoadOptions{CacheBytes: -1})
			a := &allowAll{}
			ids, text, stats := collect(t, e, Request{Prompt: c.PromptIDs, MaxTokens: 48, Constraint: a})
			if !slices.Equal(ids, c.GreedyIDs) || text != c.GreedyText {
				t.Fatalf("constrained greedy:\n got %v %q\nwant %v %q", ids, text, c.GreedyIDs, c.GreedyText)
			}
			if !slices.Equal(a.accepted, ids) {
				t.Errorf("the constraint accepted %v, the stream had %v", a.accepted, ids)
			}
			if stats.GeneratedTokens != len(ids) {
				t.Errorf("stats %+v for %d tokens", stats, len(ids))
			}
			if backend != "cpu" {
				return
			}
			sampling := model.Sampling{Temperature: 4, TopK: 50, TopP: 0.95, PresencePenalty: 0.5, RepetitionPenalty: 1.1, Seed: 11}
			plain, _, _ := collect(t, e, Request{Prompt: c.PromptIDs, MaxTokens: 24, Sampling: sampling})
			constrained, _, _ := collect(t, e, Request{Prompt: c.PromptIDs, MaxTokens: 24, Sampling: sampling, Constraint: &allowAll{}})
			if !slices.Equal(plain, constrained) {
				t.Fatalf("sampled at seed 11:\nunconstrained %v\n  constrained %v", plain, constrained)
			}
		})
	}
}

// TestConstraintForcesTokensAndEnds: a constraint that forces a sequence
// the model would not write gets it (greedy and sampled), and the request
// ends with "stop" once the constraint is done.
func TestConstraintForcesTokensAndEnds(t *testing.T) {
	e := loadDemo(t, "cpu", LoadOptions{})
	c := greedyCaseFor(t, "Hello!")
	want := e.Tokenizer().Encode(`{"answer": "lily of the valley"}`)
	if slices.Equal(want, c.GreedyIDs[:min(len(want), len(c.GreedyIDs))]) {
		t.Fatal("the forced text is what the model writes anyway: the test would prove nothing")
	}
	for _, sampling := range []model.Sampling{{}, {Temperature: 1.5, TopK: 20, Seed: 3}} {
		ids, text, stats := collect(t, e, Request{Prompt: c.PromptIDs, MaxTokens: 48, Sampling: sampling, Constraint: &forceTokens{want: want}})
		if !slices.Equal(ids, want) || text != `{"answer": "lily of the valley"}` {
			t.Errorf("sampling %+v: got %v %q, want %v", sampling, ids, text, want)
		}
		if stats.FinishReason != FinishStop || stats.GeneratedTokens != len(want) {
			t.Errorf("sampling %+v: stats %+v, want stop after %d tokens", sampling, stats, len(want))
		}
	}
	// SubmitChat passes the constraint on.
	stream, _, err := e.SubmitChat(t.Context(), ChatRequest{Render: userTurn(c.Question), MaxTokens: 48, Constraint: &forceTokens{want: want}})
	if err != nil {
		t.Fatal(err)
	}
	if text, stats := drain(t, stream); text != `{"answer": "lily of the valley"}` || stats.FinishReason != FinishStop {
		t.Errorf("SubmitChat: %q, finish %s", text, stats.FinishReason)
	}
	// The budget still applies: the forced text cut short ends with "length".
	ids, _, stats := collect(t, e, Request{Prompt: c.PromptIDs, MaxTokens: 3, Constraint: &forceTokens{want: want}})
	if !slices.Equal(ids, want[:3]) || stats.FinishReason != FinishLength {
		t.Errorf("max 3 tokens: got %v, stats %+v", ids, stats)
	}
}

// noneAllowed masks every token: the request must fail with the
// constraint's error, not hang or emit a token it ruled out.
type noneAllowed struct{}

func (noneAllowed) Mask(logits []float32) {
	for i := range logits {
		logits[i] = float32(math.Inf(-1))
	}
}
func (noneAllowed) Accept(token int) error { return fmt.Errorf("token %d is not allowed", token) }
func (noneAllowed) Done() bool             { return false }

func TestConstraintThatAllowsNothingFails(t *testing.T) {
	e := loadDemo(t, "cpu", LoadOptions{})
	c := greedyCaseFor(t, "Hello!")
	stream, err := e.Submit(t.Context(), Request{Prompt: c.PromptIDs, MaxTokens: 8, Constraint: noneAllowed{}})
	if err != nil {
		t.Fatal(err)
	}
	var tokens int
	for ev := range stream.Events {
		tokens += len(ev.IDs)
	}
	stats, err := stream.Result()
	if err == nil || stats.FinishReason != FinishError || tokens != 0 {
		t.Fatalf("got %d tokens, finish %q, error %v; want no token and an error", tokens, stats.FinishReason, err)
	}
}

// BenchmarkConstrainedDecode measures what host sampling costs a
// constrained request: the 48-token greedy answer decoded plain and with a
// constraint that masks nothing (so both write the same tokens), on each
// backend. On a GPU backend the constrained path reads the logits row back,
// samples on the host and gives up pipelining; µs/token is the decode time
// per token after the first.
func BenchmarkConstrainedDecode(b *testing.B) {
	c := greedyCases(b)[3]
	for _, backend := range backendsUnderTest() {
		e := loadDemo(b, backend, LoadOptions{CacheBytes: -1})
		for _, constrained := range []bool{false, true} {
			name := backend + "/plain"
			if constrained {
				name = backend + "/constrained"
			}
			b.Run(name, func(b *testing.B) {
				var decode time.Duration
				var tokens int
				for b.Loop() {
					req := Request{Prompt: c.PromptIDs, MaxTokens: len(c.GreedyIDs)}
					if constrained {
						req.Constraint = &allowAll{}
					}
					ids, _, stats := collect(b, e, req)
					if !slices.Equal(ids, c.GreedyIDs) {
						b.Fatalf("ids %v, want %v", ids, c.GreedyIDs)
					}
					decode += stats.DecodeDuration
					tokens += stats.GeneratedTokens - 1
				}
				b.ReportMetric(float64(decode.Microseconds())/float64(tokens), "µs/token")
			})
		}
	}
}
