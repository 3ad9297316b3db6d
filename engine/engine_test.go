package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/suzuran-app/suzuran/assets/models"
	"github.com/suzuran-app/suzuran/engine/chat"
	"github.com/suzuran-app/suzuran/engine/internal/fixtures"
)

// greedyCase is one entry of the demo model's greedy.json (fixtures testdata/demo): what transformers
// produced from Suzuran Tiny's weights.
type greedyCase struct {
	Question   string `json:"question"`
	PromptIDs  []int  `json:"prompt_ids"`
	GreedyIDs  []int  `json:"greedy_ids"`
	GreedyText string `json:"greedy_text"`
}

func greedyCases(t testing.TB) []greedyCase {
	t.Helper()
	data, err := os.ReadFile(fixtures.Path(t, "demo", "greedy.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Cases []greedyCase `json:"cases"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Cases) == 0 {
		t.Fatal("greedy.json has no cases")
	}
	return f.Cases
}

// greedyCaseFor returns the greedy case of question.
func greedyCaseFor(t testing.TB, question string) greedyCase {
	t.Helper()
	for _, c := range greedyCases(t) {
		if c.Question == question {
			return c
		}
	}
	t.Fatalf("greedy.json has no case %q", question)
	return greedyCase{}
}

// demoDir installs the demo model the way the app does, from the copy
// embedded in the binary, into a folder the test owns.
var demoOnce struct {
	sync.Once
	dir string
	err error
}

func demoDir(t testing.TB) string {
	t.Helper()
	demoOnce.Do(func() {
		root, err := os.MkdirTemp("", "suzuran-engine-test-")
		if err != nil {
			demoOnce.err = err
			return
		}
		demoOnce.dir, demoOnce.err = models.Install(root)
	})
	if demoOnce.err != nil {
		t.Fatal(demoOnce.err)
	}
	return demoOnce.dir
}

// backendsUnderTest are the backends this build can run; every end-to-end
// test runs on each.
func backendsUnderTest() []string {
	names := Backends()
	slices.Sort(names)
	return names
}

func loadDemo(t testing.TB, backend string, lo LoadOptions) *Engine {
	t.Helper()
	lo.Backend = backend
	e, err := Load(demoDir(t), lo)
	if err != nil {
		t.Fatalf("loading the demo model on %s: %v", backend, err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// collect runs a request to the end and returns its ids, text and stats.
func collect(t testing.TB, e *Engine, req Request) ([]int, string, *Stats) {
	t.Helper()
	stream, err := e.Submit(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int
	var text strings.Builder
	var stats *Stats
	for ev := range stream.Events {
		ids = append(ids, ev.IDs...)
		text.WriteString(ev.Text)
		if ev.Stats != nil {
			stats = ev.Stats
			if ev.Err != nil {
				t.Fatalf("generation failed: %v", ev.Err)
			}
		}
	}
	if stats == nil {
		t.Fatal("the stream ended without a final event")
	}
	if res, err := stream.Result(); res != *stats || err != nil {
		t.Fatalf("Result() = %+v, %v; the final event had %+v", res, err, *stats)
	}
	return ids, text.String(), stats
}

// userTurn renders a one-question conversation with thinking off, as
// greedy.json's prompts were made.
func userTurn(question string) chat.RenderRequest {
	off := false
	return chat.RenderRequest{
		Messages:            []chat.Message{{Role: "user", Content: question}},
		AddGenerationPrompt: true,
		EnableThinking:      &off,
	}
}

// TestGreedyMatchesTransformers runs every greedy.json question through the
// whole pipeline on every backend: the template and tokenizer must give the
// reference prompt ids, greedy decoding the reference ids token for token,
// and the streamed text the reference text byte for byte.
func TestGreedyMatchesTransformers(t *testing.T) {
	for _, backend := range backendsUnderTest() {
		t.Run(backend, func(t *testing.T) {
			e := loadDemo(t, backend, LoadOptions{})
			for _, c := range greedyCases(t) {
				prompt, err := e.Encode(userTurn(c.Question))
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(prompt.IDs, c.PromptIDs) {
					t.Errorf("%q: prompt ids\n got %v\nwant %v", c.Question, prompt.IDs, c.PromptIDs)
					continue
				}
				ids, text, stats := collect(t, e, Request{Prompt: prompt.IDs, Checkpoints: prompt.Checkpoints, MaxTokens: 48})
				if !slices.Equal(ids, c.GreedyIDs) {
					t.Errorf("%q: ids\n got %v\nwant %v", c.Question, ids, c.GreedyIDs)
				}
				if text != c.GreedyText {
					t.Errorf("%q: text\n got %q\nwant %q", c.Question, text, c.GreedyText)
				}
				wantFinish := FinishStop
				if len(c.GreedyIDs) == 48 && !e.eos[c.GreedyIDs[47]] {
					wantFinish = FinishLength
				}
				if stats.FinishReason != wantFinish || stats.GeneratedTokens != len(c.GreedyIDs) || stats.PromptTokens != len(c.PromptIDs) {
					t.Errorf("%q: stats %+v, want finish %s after %d tokens", c.Question, stats, wantFinish, len(c.GreedyIDs))
				}
				t.Logf("%q: %d prompt tokens (%d prefilled) at %.0f tok/s, %d generated at %.0f tok/s",
					c.Question, stats.PromptTokens, stats.PrefilledTokens, stats.PrefillTokensPerSecond(),
					stats.GeneratedTokens, stats.DecodeTokensPerSecond())
			}
		})
	}
}

// TestMultiTurnReusesThePrefix answers two turns of one conversation on one
// engine, with thinking off and on. The second prompt must restore the
// snapshot taken at the first turn's assistant header (where the template,
// which drops an earlier turn's reasoning and thinking block, makes the two
// prompts diverge) and prefill only what follows it, and its greedy answer
// must equal a fresh engine's (no cache) for the same conversation.
func TestMultiTurnReusesThePrefix(t *testing.T) {
	for _, backend := range backendsUnderTest() {
		for _, thinking := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/thinking=%v", backend, thinking), func(t *testing.T) {
				testMultiTurn(t, backend, thinking)
			})
		}
	}
}

func testMultiTurn(t *testing.T, backend string, thinking bool) {
	e := loadDemo(t, backend, LoadOptions{})
	first := userTurn("What does json.dumps do?")
	first.EnableThinking = &thinking
	p1, err := e.Encode(first)
	if err != nil {
		t.Fatal(err)
	}
	if len(p1.Checkpoints) != 1 {
		t.Fatalf("first prompt checkpoints %v, want one (after the assistant header)", p1.Checkpoints)
	}
	stream, _, err := e.SubmitChat(context.Background(), ChatRequest{Render: first, MaxTokens: 48})
	if err != nil {
		t.Fatal(err)
	}
	text1, s1 := drain(t, stream)
	if s1.CachedTokens != 0 || s1.PrefilledTokens != len(p1.IDs) {
		t.Fatalf("first turn on a fresh engine: %+v, want all %d tokens prefilled", s1, len(p1.IDs))
	}
	// The answer goes back into the conversation as a client would send
	// it: reasoning and content apart.
	out := chat.ParseOutput(text1, chat.ParserOptions{InReasoning: chat.PromptOpensThinking(p1.Text)})
	answer := chat.Message{Role: "assistant", Content: out.Content}
	if out.Reasoning != "" {
		answer.ReasoningContent = &out.Reasoning
	}

	second := first
	second.Messages = append(slices.Clone(first.Messages), answer,
		chat.Message{Role: "user", Content: "What is os.path.join?"})
	p2, err := e.Encode(second)
	if err != nil {
		t.Fatal(err)
	}
	cp := p1.Checkpoints[0]
	if !slices.Equal(p2.IDs[:cp], p1.IDs[:cp]) {
		t.Fatalf("the second prompt does not start with the first's %d tokens up to the assistant header", cp)
	}
	stream, _, err = e.SubmitChat(context.Background(), ChatRequest{Render: second, MaxTokens: 48})
	if err != nil {
		t.Fatal(err)
	}
	answer2, s2 := drain(t, stream)
	if s2.CachedTokens != cp || s2.PrefilledTokens != len(p2.IDs)-cp {
		t.Errorf("second turn: %d cached and %d prefilled, want %d and %d",
			s2.CachedTokens, s2.PrefilledTokens, cp, len(p2.IDs)-cp)
	}
	t.Logf("turn 2: %d prompt tokens, %d restored, %d prefilled", len(p2.IDs), s2.CachedTokens, s2.PrefilledTokens)

	fresh := loadDemo(t, backend, LoadOptions{CacheBytes: -1})
	stream, _, err = fresh.SubmitChat(context.Background(), ChatRequest{Render: second, MaxTokens: 48})
	if err != nil {
		t.Fatal(err)
	}
	want, s3 := drain(t, stream)
	if s3.CachedTokens != 0 {
		t.Fatalf("the engine without a cache restored %d tokens", s3.CachedTokens)
	}
	if answer2 != want {
		t.Errorf("second turn with the cache: %q\nwithout: %q", answer2, want)
	}
	if answer2 == "" {
		t.Errorf("the second turn answered nothing")
	}
}

// drain reads a stream to its end and returns the text and statistics.
func drain(t testing.TB, s *Stream) (string, Stats) {
	t.Helper()
	var b strings.Builder
	for ev := range s.Events {
		b.WriteString(ev.Text)
	}
	stats, err := s.Result()
	if err != nil {
		t.Fatal(err)
	}
	return b.String(), stats
}

// TestContinuationReusesTheAnswer: after an answer, a prompt that repeats
// the prompt and the whole answer (as the next prompt of a tool-calling
// conversation does) restores the snapshot taken at the end of generation.
// Its greedy answer must equal a fresh engine's.
func TestContinuationReusesTheAnswer(t *testing.T) {
	for _, backend := range backendsUnderTest() {
		t.Run(backend, func(t *testing.T) {
			c := greedyCaseFor(t, "What does json.dumps do?")
			e := loadDemo(t, backend, LoadOptions{})
			answer, _, _ := collect(t, e, Request{Prompt: c.PromptIDs, MaxTokens: 48, SnapshotAnswer: true})
			next := slices.Concat(c.PromptIDs, answer, []int{198}, greedyCaseFor(t, "What is os.path.join?").PromptIDs)
			got, _, stats := collect(t, e, Request{Prompt: next, MaxTokens: 8})
			// The end-of-answer snapshot holds what the sequence consumed:
			// the answer less its last token, or all of it when decoding is
			// pipelined (the step after the EOS token consumed it).
			wantCached := len(c.PromptIDs) + len(answer) - 1
			if e.opts.Pipelined {
				wantCached++
			}
			if stats.CachedTokens != wantCached {
				t.Errorf("continuation restored %d tokens, want %d", stats.CachedTokens, wantCached)
			}
			fresh := loadDemo(t, backend, LoadOptions{CacheBytes: -1})
			want, _, _ := collect(t, fresh, Request{Prompt: next, MaxTokens: 8})
			if !slices.Equal(got, want) {
				t.Errorf("continuation with the cache %v, without %v", got, want)
			}
		})
	}
}
