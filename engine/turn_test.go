package engine

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/suzuran-app/suzuran/engine/chat"
	"github.com/suzuran-app/suzuran/engine/model"
)

// runTurn reads a turn to its end: its events in order, the answer's
// content and reasoning, and its result.
func runTurn(t *testing.T, e *Engine, r TurnRequest) (*Turn, []TurnEvent, string, TurnResult) {
	t.Helper()
	turn, err := e.StartTurn(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	var events []TurnEvent
	var content strings.Builder
	for ev := range turn.Events {
		events = append(events, ev)
		for _, p := range append(ev.Parsed, ev.Closing...) {
			if p.Kind == chat.ContentDelta {
				content.WriteString(p.Text)
			}
		}
	}
	res := turn.Result()
	if res.Err != nil {
		t.Fatalf("the turn failed: %v", res.Err)
	}
	return turn, events, content.String(), res
}

func TestTurnEventsInOrder(t *testing.T) {
	e := loadDemo(t, "cpu", LoadOptions{})
	_, events, content, res := runTurn(t, e, TurnRequest{Render: userTurn("Name a flower."), MaxTokens: 12})
	if len(events) < 3 {
		t.Fatalf("%d events, want progress, tokens and the final one", len(events))
	}
	firstToken, tokens := -1, 0
	for i, ev := range events {
		if ev.Final != (i == len(events)-1) {
			t.Fatalf("event %d of %d: Final %v; only the last is final", i, len(events), ev.Final)
		}
		if ev.Progress != nil && firstToken >= 0 {
			t.Errorf("event %d: progress after the first token (event %d)", i, firstToken)
		}
		if len(ev.IDs) > 0 && firstToken < 0 {
			firstToken = i
		}
		tokens += len(ev.IDs)
	}
	if events[0].Progress == nil && events[0].QueuePosition == nil {
		t.Errorf("the first event is %+v, want the prompt's progress or the queue position", events[0])
	}
	last := events[len(events)-1]
	if last.Result == nil || *last.Result != res {
		t.Errorf("the final event's result %+v differs from Result %+v", last.Result, res)
	}
	if tokens != res.Stats.GeneratedTokens || content == "" || res.Text == "" {
		t.Errorf("%d tokens in the events, stats say %d; content %q, text %q", tokens, res.Stats.GeneratedTokens, content, res.Text)
	}
}

func TestTurnReportsTheStopThatMatched(t *testing.T) {
	e := loadDemo(t, "cpu", LoadOptions{})
	_, _, _, free := runTurn(t, e, TurnRequest{Render: userTurn("Name a flower."), MaxTokens: 24})
	words := strings.Fields(free.Text)
	if len(words) < 3 {
		t.Fatalf("greedy answer %q is too short to cut", free.Text)
	}
	stop := words[2]
	at := strings.Index(free.Text, stop)
	_, _, _, res := runTurn(t, e, TurnRequest{Render: userTurn("Name a flower."), MaxTokens: 24,
		Stop: []string{"never in this answer", stop}})
	if res.Stats.StopSequence != stop || res.Stats.FinishReason != FinishStop {
		t.Errorf("stop %q: StopSequence %q, finish %s", stop, res.Stats.StopSequence, res.Stats.FinishReason)
	}
	if res.Text != free.Text[:at] {
		t.Errorf("output %q, want the greedy answer up to the stop, %q", res.Text, free.Text[:at])
	}
	if free.Stats.StopSequence != "" {
		t.Errorf("an answer no stop string ended reports %q", free.Stats.StopSequence)
	}
}

func TestTurnCountsReasoningTokens(t *testing.T) {
	e := loadDemo(t, "cpu", LoadOptions{})
	on := true
	render := userTurn("Name a flower.")
	render.EnableThinking = &on
	_, events, _, res := runTurn(t, e, TurnRequest{Render: render, MaxTokens: 16})
	// The tokens of the steps before the first that carries answer text.
	want := 0
	for _, ev := range events {
		answer := false
		for _, p := range ev.Parsed {
			answer = answer || p.Kind == chat.ContentDelta || p.Kind == chat.ToolCallStart
		}
		if answer || ev.Final {
			break
		}
		want += len(ev.IDs)
	}
	if want == 0 {
		t.Fatalf("no reasoning before the answer in %d events", len(events))
	}
	if res.ReasoningTokens != want {
		t.Errorf("ReasoningTokens %d, want %d", res.ReasoningTokens, want)
	}
	// Without thinking nothing counts.
	_, _, _, off := runTurn(t, e, TurnRequest{Render: userTurn("Name a flower."), MaxTokens: 8})
	if off.ReasoningTokens != 0 {
		t.Errorf("without thinking ReasoningTokens %d", off.ReasoningTokens)
	}
}

func TestTurnOptionErrorsNameTheOption(t *testing.T) {
	e := loadDemo(t, "cpu", LoadOptions{})
	for _, tc := range []struct {
		option string
		r      TurnRequest
	}{
		{"temperature", TurnRequest{Sampling: model.Sampling{Temperature: -1}}},
		{"top_p", TurnRequest{Sampling: model.Sampling{Temperature: 1, TopP: 2}}},
		{"top_k", TurnRequest{Sampling: model.Sampling{TopK: -3}}},
		{"max_tokens", TurnRequest{MaxTokens: -1}},
		{"top_logprobs", TurnRequest{Logprobs: true, TopLogprobs: MaxTopLogprobs + 1}},
	} {
		tc.r.Render = userTurn("Hi")
		_, err := e.StartTurn(context.Background(), tc.r)
		var bad *OptionError
		if !errors.As(err, &bad) || bad.Option != tc.option {
			t.Errorf("%s: got %v (%T), want an *OptionError for it", tc.option, err, err)
			continue
		}
		if !strings.HasPrefix(err.Error(), tc.option+" ") {
			t.Errorf("%s: the message %q does not start with the option", tc.option, err)
		}
	}
}

func TestTurnDrawsTheSeedOnce(t *testing.T) {
	e := loadDemo(t, "cpu", LoadOptions{})
	r := TurnRequest{Render: userTurn("Name a flower."), MaxTokens: 10, Sampling: model.Sampling{Temperature: 1}}
	a, _, _, first := runTurn(t, e, r)
	b, _, _, _ := runTurn(t, e, r)
	if a.Sampling.Seed == 0 || a.Sampling.Seed == b.Sampling.Seed {
		t.Errorf("two turns without a seed drew %d and %d", a.Sampling.Seed, b.Sampling.Seed)
	}
	// The drawn seed is the one the engine sampled with: given back, it
	// gives the same answer.
	seed := a.Sampling.Seed
	r.Seed = &seed
	c, _, _, again := runTurn(t, e, r)
	if c.Sampling.Seed != seed || again.Text != first.Text {
		t.Errorf("seed %d given back: seed %d, %q; first %q", seed, c.Sampling.Seed, again.Text, first.Text)
	}
	// Greedy decoding draws none.
	g, _, _, _ := runTurn(t, e, TurnRequest{Render: userTurn("Hi"), MaxTokens: 2})
	if g.Sampling.Seed != 0 {
		t.Errorf("a greedy turn drew seed %d", g.Sampling.Seed)
	}
}

// TestTurnDropsControlTokensText: a control token the model samples
// (here forced) reaches nobody as text, in the window and the terminal as
// in the API.
func TestTurnDropsControlTokensText(t *testing.T) {
	e := loadDemo(t, "cpu", LoadOptions{})
	want := e.Tokenizer().EncodeWithSpecials("Hi<|im_start|> there")
	if !slices.ContainsFunc(want, e.Tokenizer().IsSpecial) {
		t.Fatalf("%v holds no special token", want)
	}
	_, _, content, res := runTurn(t, e, TurnRequest{Render: userTurn("Hello"), MaxTokens: len(want), Constraint: &forceTokens{want: want}})
	if content != "Hi there" || res.Text != "Hi there" {
		t.Errorf("content %q, output %q; want %q", content, res.Text, "Hi there")
	}
}
