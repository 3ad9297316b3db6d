package engine

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/suzuran-app/suzuran/engine/checkpoint"
	"github.com/suzuran-app/suzuran/engine/cpu"
	"github.com/suzuran-app/suzuran/engine/model"
	"github.com/suzuran-app/suzuran/engine/sample"
	"github.com/suzuran-app/suzuran/engine/tokenizer"
)

// newDemoEngine builds an engine on the cpu backend with New rather than
// Load, for tests that need an option Load does not expose (EOS).
func newDemoEngine(t testing.TB, opts Options) *Engine {
	t.Helper()
	m, err := checkpoint.Load(demoDir(t))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Load(demoDir(t))
	if err != nil {
		t.Fatal(err)
	}
	b, err := cpu.New(m.Weights, cpu.Options{Sampler: sample.New()})
	if err != nil {
		t.Fatal(err)
	}
	opts.Backend, opts.Weights, opts.Tokenizer = b, m.Weights, tok
	e, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e.Close()
		m.Close()
	})
	return e
}

// TestStopStringAcrossTokens stops the "Hello!" answer at a stop string
// that does not fall on a token boundary: the text must end right before it.
func TestStopStringAcrossTokens(t *testing.T) {
	c := greedyCaseFor(t, "Hello!") // → "Hello! I am Suzuran Tiny, …"
	e := loadDemo(t, "cpu", LoadOptions{})
	for _, stop := range []string{"uran Ti", "Tiny", "demo model. Ask"} {
		i := strings.Index(c.GreedyText, stop)
		if i < 0 {
			t.Fatalf("stop string %q is not in the reference answer %q", stop, c.GreedyText)
		}
		ids, text, stats := collect(t, e, Request{Prompt: c.PromptIDs, MaxTokens: 48, Stop: []string{"never appears", stop}})
		if text != c.GreedyText[:i] {
			t.Errorf("stop %q: text %q, want %q", stop, text, c.GreedyText[:i])
		}
		if stats.FinishReason != FinishStop {
			t.Errorf("stop %q: finish %q, want stop", stop, stats.FinishReason)
		}
		// Generation ends with the token that completes the stop string:
		// the ids are a prefix of the greedy answer whose text reaches past
		// the stop string's end and whose one-shorter prefix does not.
		if !slices.Equal(ids, c.GreedyIDs[:len(ids)]) {
			t.Errorf("stop %q: ids %v are not a prefix of the greedy answer", stop, ids)
		}
		full := e.tok.Decode(ids)
		short := e.tok.Decode(ids[:len(ids)-1])
		if !strings.Contains(full, stop) || strings.Contains(short, stop) {
			t.Errorf("stop %q: generation did not end at the token that completes it (%q)", stop, full)
		}
	}
}

// TestMaxTokensAndSeed: the budget ends generation with "length", and a
// sampled answer depends only on the seed.
func TestMaxTokensAndSeed(t *testing.T) {
	c := greedyCaseFor(t, "What does json.dumps do?")
	e := loadDemo(t, "cpu", LoadOptions{})
	ids, _, stats := collect(t, e, Request{Prompt: c.PromptIDs, MaxTokens: 5})
	if !slices.Equal(ids, c.GreedyIDs[:5]) || stats.FinishReason != FinishLength || stats.GeneratedTokens != 5 {
		t.Fatalf("max 5 tokens: ids %v, stats %+v", ids, stats)
	}

	// The demo model is very sure of its answers (the first token has 0.98
	// of the mass at temperature 1.5), so the test samples hot.
	sampling := model.Sampling{Temperature: 4, TopK: 50, TopP: 0.95, PresencePenalty: 0.5}
	run := func(seed uint64) []int {
		s := sampling
		s.Seed = seed
		ids, _, _ := collect(t, e, Request{Prompt: c.PromptIDs, MaxTokens: 24, Sampling: s})
		return ids
	}
	a, b := run(7), run(7)
	if !slices.Equal(a, b) {
		t.Fatalf("seed 7 gave two answers:\n%v\n%v", a, b)
	}
	// Four more seeds cannot all give the same 24 tokens at temperature 4
	// unless the seed is ignored.
	differ := false
	for seed := uint64(8); seed < 12; seed++ {
		if !slices.Equal(run(seed), a) {
			differ = true
		}
	}
	if !differ {
		t.Fatalf("seeds 7..11 all gave %v: the seed is not used", a)
	}
}

// TestCancelWithinOneToken cancels a request after its third token: at most
// one more token may arrive, and the stream ends at once with "cancelled"
// (not at its budget).
func TestCancelWithinOneToken(t *testing.T) {
	// EOS set to an id the model never produces, so only cancellation ends
	// the request before its budget.
	e := newDemoEngine(t, Options{EOS: []int{4095}})
	c := greedyCaseFor(t, "Hello!")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream, err := e.Submit(ctx, Request{Prompt: c.PromptIDs, MaxTokens: 100000})
	if err != nil {
		t.Fatal(err)
	}
	after, took := cancelAfter(stream, 3, cancel)
	// The event queued when cancel lands may still be taken: nothing after
	// it. (The engine does not wait for the reader, so it may have computed
	// tokens ahead that are dropped.)
	if after > 1 {
		t.Fatalf("%d token events arrived after cancelling", after)
	}
	if took > time.Second {
		t.Fatalf("the stream ended %v after cancelling", took)
	}
	final, err := stream.Result()
	if err != nil || final.FinishReason != FinishCancelled {
		t.Fatalf("result %+v, %v; want cancelled", final, err)
	}
	// The engine serves the next request normally.
	ids, _, _ := collect(t, e, Request{Prompt: c.PromptIDs, MaxTokens: 3})
	if !slices.Equal(ids, c.GreedyIDs[:3]) {
		t.Fatalf("after a cancel: %v, want %v", ids, c.GreedyIDs[:3])
	}
}

// cancelAfter reads stream to its end, calling cancel once its n-th token
// has arrived, and returns how many token events arrived after the one
// that brought it (an event holds several tokens when the reader was
// behind) and how long the stream took to end after the cancel.
func cancelAfter(stream *Stream, n int, cancel context.CancelFunc) (int, time.Duration) {
	tokens, after := 0, 0
	var cancelled time.Time
	for ev := range stream.Events {
		if ev.Token < 0 {
			continue
		}
		if tokens >= n {
			after++
		}
		tokens += len(ev.IDs)
		if cancelled.IsZero() && tokens >= n {
			cancelled = time.Now()
			cancel()
		}
	}
	return after, time.Since(cancelled)
}

// TestBusyPastTheQueueBound fills the queue behind a running request and
// checks that one more Submit is refused at once with ErrBusy.
func TestBusyPastTheQueueBound(t *testing.T) {
	e := newDemoEngine(t, Options{EOS: []int{4095}, QueueSize: 1, Parallel: 1})
	c := greedyCaseFor(t, "Hello!")
	ctxA, cancelA := context.WithCancel(context.Background())
	defer cancelA()
	a, err := e.Submit(ctxA, Request{Prompt: c.PromptIDs, MaxTokens: 1000})
	if err != nil {
		t.Fatal(err)
	}
	<-a.Events // A is running and holds the only slot
	b, err := e.Submit(context.Background(), Request{Prompt: c.PromptIDs, MaxTokens: 2})
	if err != nil {
		t.Fatalf("the first queued request: %v", err)
	}
	start := time.Now()
	if _, err := e.Submit(context.Background(), Request{Prompt: c.PromptIDs, MaxTokens: 2}); !errors.Is(err, ErrBusy) {
		t.Fatalf("past the bound: %v, want ErrBusy", err)
	}
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Fatalf("ErrBusy took %v: Submit must not wait", d)
	}
	cancelA()
	var got []int
	for ev := range b.Events {
		got = append(got, ev.IDs...)
	}
	if !slices.Equal(got, c.GreedyIDs[:2]) {
		t.Fatalf("queued request after the running one was cancelled: %v, want %v", got, c.GreedyIDs[:2])
	}
}

func TestSubmitValidates(t *testing.T) {
	e := loadDemo(t, "cpu", LoadOptions{ContextTokens: 64})
	long := make([]int, 64)
	cases := []struct {
		req  Request
		want string
	}{
		{Request{}, "empty"},
		{Request{Prompt: long}, "prompt too long"},
		{Request{Prompt: []int{1, 99999}}, "outside the vocabulary"},
		{Request{Prompt: []int{1}, Sampling: model.Sampling{TopP: 2}}, "top_p"},
		{Request{Prompt: []int{1}, MaxTokens: -1}, "max_tokens"},
	}
	for _, c := range cases {
		if _, err := e.Submit(context.Background(), c.req); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Submit(%+v) = %v, want an error about %q", c.req, err, c.want)
		}
	}
	if _, err := e.Submit(context.Background(), Request{Prompt: long}); !errors.Is(err, ErrPromptTooLong) {
		t.Errorf("a long prompt's error does not wrap ErrPromptTooLong: %v", err)
	}
	// A prompt that fills the context but one token still gets an answer,
	// cut at the context's end.
	prompt := greedyCaseFor(t, "Hello!").PromptIDs
	for len(prompt) < 62 {
		prompt = append(prompt, prompt[len(prompt)-1])
	}
	_, _, stats := collect(t, e, Request{Prompt: prompt})
	if stats.GeneratedTokens > 3 || (stats.FinishReason != FinishLength && stats.FinishReason != FinishStop) {
		t.Errorf("near-full context: %+v, want at most 3 tokens", stats)
	}
}

func TestClose(t *testing.T) {
	e := newDemoEngine(t, Options{})
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Submit(context.Background(), Request{Prompt: []int{1}}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Submit after Close: %v, want ErrClosed", err)
	}
}

// TestConcurrentRequests submits every greedy.json question at once from
// separate goroutines: the engine serves them one at a time from its queue,
// and each stream must carry exactly its own reference answer.
func TestConcurrentRequests(t *testing.T) {
	e := loadDemo(t, "cpu", LoadOptions{QueueSize: 16})
	cases := greedyCases(t)
	texts := make([]string, len(cases))
	errs := make([]error, len(cases))
	var wg sync.WaitGroup
	for i, c := range cases {
		wg.Go(func() {
			s, err := e.Submit(context.Background(), Request{Prompt: c.PromptIDs, MaxTokens: 48})
			if err != nil {
				errs[i] = err
				return
			}
			var b strings.Builder
			for ev := range s.Events {
				b.WriteString(ev.Text)
			}
			texts[i] = b.String()
		})
	}
	wg.Wait()
	for i, c := range cases {
		if errs[i] != nil {
			t.Fatalf("%q: %v", c.Question, errs[i])
		}
		if texts[i] != c.GreedyText {
			t.Errorf("%q: %q, want %q", c.Question, texts[i], c.GreedyText)
		}
	}
}

// TestPipelinedDecode runs the pipelined decode loop (each step started
// before the previous token is read, as on a GPU) on the cpu backend, whose
// passes finish inside Start, so the order of work is deterministic: the
// answers, stop strings and cancellation must behave exactly as without
// pipelining.
func TestPipelinedDecode(t *testing.T) {
	e := newDemoEngine(t, Options{Pipelined: true})
	for _, c := range greedyCases(t) {
		ids, text, stats := collect(t, e, Request{Prompt: c.PromptIDs, MaxTokens: 48})
		if !slices.Equal(ids, c.GreedyIDs) || text != c.GreedyText || stats.GeneratedTokens != len(c.GreedyIDs) {
			t.Errorf("%q: %v %q (%d tokens), want %v %q", c.Question, ids, text, stats.GeneratedTokens, c.GreedyIDs, c.GreedyText)
		}
	}
	c := greedyCaseFor(t, "Hello!")
	_, text, stats := collect(t, e, Request{Prompt: c.PromptIDs, MaxTokens: 48, Stop: []string{"Tiny"}})
	if want := c.GreedyText[:strings.Index(c.GreedyText, "Tiny")]; text != want || stats.FinishReason != FinishStop {
		t.Errorf("stop string: %q (%s), want %q (stop)", text, stats.FinishReason, want)
	}
	ids, _, stats := collect(t, e, Request{Prompt: c.PromptIDs, MaxTokens: 5})
	if !slices.Equal(ids, c.GreedyIDs[:5]) || stats.FinishReason != FinishLength {
		t.Errorf("max 5 tokens: %v (%s)", ids, stats.FinishReason)
	}

	never := newDemoEngine(t, Options{Pipelined: true, EOS: []int{4095}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream, err := never.Submit(ctx, Request{Prompt: c.PromptIDs, MaxTokens: 200})
	if err != nil {
		t.Fatal(err)
	}
	after, took := cancelAfter(stream, 3, cancel)
	final, _ := stream.Result()
	if after > 1 || final.FinishReason != FinishCancelled || took > time.Second {
		t.Errorf("cancel after 3 tokens: %d more arrived, the stream ended %v later, result %+v", after, took, final)
	}
}

// TestSamePromptAgain: every prompt is snapshotted one token before its
// end, so sending it again computes one token.
func TestSamePromptAgain(t *testing.T) {
	e := loadDemo(t, "cpu", LoadOptions{})
	for _, q := range []string{"What does shutil.copytree do?", "Tell me about `collections.OrderedDict`."} {
		c := greedyCaseFor(t, q)
		n := len(c.PromptIDs)
		checkpoints := []int{n - 4} // after "<|im_start|>assistant\n"
		collect(t, e, Request{Prompt: c.PromptIDs, Checkpoints: checkpoints, MaxTokens: 2})
		ids, _, stats := collect(t, e, Request{Prompt: c.PromptIDs, Checkpoints: checkpoints, MaxTokens: 2})
		if stats.CachedTokens != n-1 || !slices.Equal(ids, c.GreedyIDs[:2]) {
			t.Errorf("%q again: %d cached, ids %v; want %d cached, %v", c.Question, stats.CachedTokens, ids, n-1, c.GreedyIDs[:2])
		}
	}
}

// TestPrefillProgress reads a prompt in 8-token chunks with a checkpoint
// inside it: Progress is told after the cache lookup and after every chunk,
// in order, up to the checkpoint and then up to one token short of the
// prompt (the last token's pass samples the first answer token); the same
// prompt again starts from the cache.
func TestPrefillProgress(t *testing.T) {
	e := newDemoEngine(t, Options{PrefillChunk: 8})
	c := greedyCaseFor(t, "Hello!")
	n := len(c.PromptIDs)
	var got []PrefillProgress
	req := Request{Prompt: c.PromptIDs, MaxTokens: 1, Checkpoints: []int{n - 4},
		Progress: func(p PrefillProgress) { got = append(got, p) }}
	collect(t, e, req)
	want := []PrefillProgress{{Done: 0, Total: n}}
	pos := 0
	for _, mark := range []int{n - 4, n - 1} {
		for pos < mark {
			pos = min(pos+8, mark)
			want = append(want, PrefillProgress{Done: pos, Total: n})
		}
	}
	// Progress keeps only the latest value for a callback that is behind
	// (engine.Stream), so steps may be skipped: the calls must be steps of
	// want in order, from the first to the last.
	if len(got) < 2 || got[0] != want[0] || got[len(got)-1] != want[len(want)-1] || !isSubsequence(got, want) {
		t.Errorf("progress %v, want these steps in order, from the first to the last: %v", got, want)
	}

	got = nil
	collect(t, e, req)
	if want := []PrefillProgress{{Cached: n - 1, Done: n - 1, Total: n}}; !slices.Equal(got, want) {
		t.Errorf("the same prompt again: progress %v, want %v", got, want)
	}
}

// TestCancelledWhileQueuedFreesItsPlace: a request cancelled while it waits
// gives its queue place back at once, before the engine reaches it, so a
// client that gives up and retries is not refused as busy; the cancelled
// request still ends, as cancelled, and the bound still holds.
func TestCancelledWhileQueuedFreesItsPlace(t *testing.T) {
	e := newDemoEngine(t, Options{EOS: []int{4095}, QueueSize: 1, Parallel: 1})
	c := greedyCaseFor(t, "Hello!")
	ctxA, cancelA := context.WithCancel(context.Background())
	defer cancelA()
	a, err := e.Submit(ctxA, Request{Prompt: c.PromptIDs, MaxTokens: 1000})
	if err != nil {
		t.Fatal(err)
	}
	<-a.Events // A is running and holds the only slot

	ctxB, cancelB := context.WithCancel(context.Background())
	b, err := e.Submit(ctxB, Request{Prompt: c.PromptIDs, MaxTokens: 2})
	if err != nil {
		t.Fatal(err)
	}
	cancelB()
	deadline := time.Now().Add(5 * time.Second)
	for {
		e.mu.Lock()
		free := e.waiting == 0
		e.mu.Unlock()
		if free {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the cancelled request kept its queue place")
		}
		time.Sleep(time.Millisecond) // the queue place is given back with no event: the count is read again
	}
	retry, err := e.Submit(context.Background(), Request{Prompt: c.PromptIDs, MaxTokens: 2})
	if err != nil {
		t.Fatalf("the retry after a cancelled wait: %v", err)
	}
	if _, err := e.Submit(context.Background(), Request{Prompt: c.PromptIDs, MaxTokens: 2}); !errors.Is(err, ErrBusy) {
		t.Fatalf("past the bound: %v, want ErrBusy", err)
	}
	cancelA()
	var got []int
	for ev := range retry.Events {
		got = append(got, ev.IDs...)
	}
	if !slices.Equal(got, c.GreedyIDs[:2]) {
		t.Fatalf("the retry: %v, want %v", got, c.GreedyIDs[:2])
	}
	for range b.Events {
	}
	if st, _ := b.Result(); st.FinishReason != FinishCancelled {
		t.Errorf("the cancelled request finished with %q, want %q", st.FinishReason, FinishCancelled)
	}
}

// isSubsequence reports whether sub's elements appear in seq in order.
func isSubsequence[T comparable](sub, seq []T) bool {
	i := 0
	for _, v := range seq {
		if i < len(sub) && sub[i] == v {
			i++
		}
	}
	return i == len(sub)
}
