package engine

import (
	"context"
	"errors"
	"math"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/suzuran-app/suzuran/engine/model"
)

// result is one request's stream read to its end.
type result struct {
	events   int // events received, the final one included
	ids      []int
	text     string
	logprobs []float64
	stats    Stats
	err      error
}

// readAll reads a stream to its end.
func readAll(s *Stream) result {
	var r result
	for ev := range s.Events {
		r.events++
		r.ids = append(r.ids, ev.IDs...)
		for _, lp := range ev.Logprobs {
			r.logprobs = append(r.logprobs, lp.Logprob)
		}
		r.text += ev.Text
	}
	r.stats, r.err = s.Result()
	return r
}

// concurrently submits every request at once and reads each stream on its
// own goroutine.
func concurrently(t *testing.T, e *Engine, reqs []Request) []result {
	t.Helper()
	streams := make([]*Stream, len(reqs))
	for i, req := range reqs {
		s, err := e.Submit(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		streams[i] = s
	}
	out := make([]result, len(reqs))
	var wg sync.WaitGroup
	for i, s := range streams {
		wg.Go(func() { out[i] = readAll(s) })
	}
	wg.Wait()
	return out
}

// batchRequests are four different requests: greedy, seeded sampling with
// penalties, a stop string, and one asking for logprobs (sampled on the
// host), with prompts of different lengths so that they decode at
// different positions while a later one still reads its prompt.
func batchRequests(t *testing.T) []Request {
	return []Request{
		{Prompt: greedyCaseFor(t, "Hello!").PromptIDs, MaxTokens: 24},
		{Prompt: greedyCaseFor(t, "What does json.dumps do?").PromptIDs, MaxTokens: 20, Sampling: model.Sampling{Temperature: 0.8, TopK: 40, TopP: 0.9, RepetitionPenalty: 1.1, Seed: 7}},
		{Prompt: greedyCaseFor(t, "What is os.path.join?").PromptIDs, MaxTokens: 30, Stop: []string{"."}},
		{Prompt: slices.Concat(greedyCaseFor(t, "Explain itertools.chain.").PromptIDs, greedyCaseFor(t, "Who are you?").PromptIDs, greedyCaseFor(t, "What does shutil.copytree do?").PromptIDs), MaxTokens: 16, Logprobs: true, TopLogprobs: 2},
	}
}

// TestBatchedRequestsMatchAlone runs four different requests at once, so
// that they decode in shared steps (one joining while the others decode,
// its prompt read in chunks between their steps), and checks each against
// the same request run alone: the same tokens and text on every backend,
// and on cpu the same log-probabilities bit for bit (the batched pass
// computes each sequence's rows as a pass of its own would).
func TestBatchedRequestsMatchAlone(t *testing.T) {
	for _, backend := range backendsUnderTest() {
		t.Run(backend, func(t *testing.T) {
			reqs := batchRequests(t)
			alone := loadDemo(t, backend, LoadOptions{Parallel: 1, PrefillChunk: 8, CacheBytes: -1})
			var want []result
			for _, req := range reqs {
				want = append(want, concurrently(t, alone, []Request{req})[0])
			}
			e := loadDemo(t, backend, LoadOptions{Parallel: 4, PrefillChunk: 8, CacheBytes: -1})
			got := concurrently(t, e, reqs)
			for i := range reqs {
				w, g := want[i], got[i]
				if g.err != nil || w.err != nil {
					t.Fatalf("request %d: %v / alone %v", i, g.err, w.err)
				}
				if !slices.Equal(g.ids, w.ids) || g.text != w.text || g.stats.FinishReason != w.stats.FinishReason {
					t.Errorf("request %d: %v %q (%s) together, %v %q (%s) alone", i, g.ids, g.text, g.stats.FinishReason, w.ids, w.text, w.stats.FinishReason)
				}
				if backend == "cpu" && !slices.EqualFunc(g.logprobs, w.logprobs, func(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) }) {
					t.Errorf("request %d: logprobs %v together, %v alone", i, g.logprobs, w.logprobs)
				}
			}
			if len(want[3].logprobs) == 0 {
				t.Fatal("the logprobs request returned none")
			}
			e.Close()
			if e.peakBatch < 3 {
				t.Errorf("at most %d requests decoded in one step: they did not run together", e.peakBatch)
			}
		})
	}
}

// TestInteractiveGoesFirst: with the one slot taken by an API request and
// another API request waiting, a window request starts at once (in the
// slot kept for it) and the waiting ones are told their queue positions.
func TestInteractiveGoesFirst(t *testing.T) {
	e := newDemoEngine(t, Options{EOS: []int{4095}, Parallel: 1})
	c := greedyCaseFor(t, "Hello!")
	ctxA, cancelA := context.WithCancel(context.Background())
	defer cancelA()
	a, err := e.Submit(ctxA, Request{Prompt: c.PromptIDs, MaxTokens: 100000})
	if err != nil {
		t.Fatal(err)
	}
	<-a.Events // A runs
	positions := make(chan int, 10)
	b, err := e.Submit(context.Background(), Request{Prompt: c.PromptIDs, MaxTokens: 2,
		QueuePosition: func(p int) { positions <- p }})
	if err != nil {
		t.Fatal(err)
	}
	if p := <-positions; p != 1 {
		t.Fatalf("B is told position %d, want 1", p)
	}
	start := time.Now()
	window := readAll(mustSubmit(t, e, Request{Prompt: c.PromptIDs, MaxTokens: 3, Priority: PriorityInteractive}))
	if !slices.Equal(window.ids, c.GreedyIDs[:3]) {
		t.Fatalf("the window request: %v, want %v", window.ids, c.GreedyIDs[:3])
	}
	if window.stats.QueueWait > time.Second {
		t.Errorf("the window request waited %v behind API requests", window.stats.QueueWait)
	}
	t.Logf("window request answered in %v beside a running API request", time.Since(start))
	select {
	case ev := <-b.Events:
		t.Fatalf("B started before A ended: %+v", ev)
	default:
	}
	cancelA()
	got := readAll(b)
	if !slices.Equal(got.ids, c.GreedyIDs[:2]) {
		t.Fatalf("B: %v, want %v", got.ids, c.GreedyIDs[:2])
	}
	if p := <-positions; p != 0 {
		t.Fatalf("B is told position %d when it starts, want 0", p)
	}
}

func mustSubmit(t *testing.T, e *Engine, req Request) *Stream {
	t.Helper()
	s, err := e.Submit(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSlowReaderStallsNobody: a reader that stops reading does not hold up
// the engine or another request, and after ReaderTimeout its request is
// cancelled.
func TestSlowReaderStallsNobody(t *testing.T) {
	e := newDemoEngine(t, Options{EOS: []int{4095}, Parallel: 2, ReaderTimeout: 300 * time.Millisecond})
	c := greedyCaseFor(t, "Hello!")
	stalled := mustSubmit(t, e, Request{Prompt: c.PromptIDs, MaxTokens: 100000})
	<-stalled.Events // then read nothing more
	start := time.Now()
	other := readAll(mustSubmit(t, e, Request{Prompt: c.PromptIDs, MaxTokens: 40}))
	if other.err != nil || len(other.ids) != 40 {
		t.Fatalf("the other request: %d tokens, %v", len(other.ids), other.err)
	}
	t.Logf("40 tokens beside a stalled reader in %v", time.Since(start))
	deadline := time.After(10 * time.Second)
	for {
		select {
		case _, ok := <-stalled.Events:
			if !ok {
				st, _ := stalled.Result()
				if st.FinishReason != FinishCancelled {
					t.Fatalf("the stalled request ended %q, want cancelled", st.FinishReason)
				}
				return
			}
		case <-deadline:
			t.Fatal("the stalled request was not cancelled")
		}
		// Reading again only to see the end: wait past the timeout first.
		time.Sleep(400 * time.Millisecond) // a reader that does not read for a while: the case under test
	}
}

// TestSlowReaderGetsMergedEvents: a reader that takes nothing while its
// request generates gets the same tokens, text and log-probabilities (bit
// for bit) as a reader that keeps up with the same request beside it, in
// fewer events: the tokens that waited for it merge into one event. It
// reads only once the other request has ended, so all but the event the
// stream was offering when the first token came have merged: at most
// three events (that one, the merged rest, the final) for 40 tokens.
func TestSlowReaderGetsMergedEvents(t *testing.T) {
	e := newDemoEngine(t, Options{EOS: []int{4095}, Parallel: 2})
	c := greedyCaseFor(t, "Hello!")
	req := Request{Prompt: c.PromptIDs, MaxTokens: 40, Logprobs: true, TopLogprobs: 2}
	slow := mustSubmit(t, e, req)
	fast := readAll(mustSubmit(t, e, req))
	// The two decode in the same steps; wait for the slow one's last
	// token to be queued too.
	deadline := time.Now().Add(10 * time.Second)
	for {
		slow.mu.Lock()
		final := slow.final != nil
		slow.mu.Unlock()
		if final || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond) // the stream queues its last token with no event a reader may take: its state is read again
	}
	got := readAll(slow)
	if fast.err != nil || got.err != nil {
		t.Fatalf("fast reader: %v; slow reader: %v", fast.err, got.err)
	}
	if len(fast.ids) != 40 || !slices.Equal(got.ids, fast.ids) || got.text != fast.text {
		t.Fatalf("slow reader: %v %q; fast reader: %v %q", got.ids, got.text, fast.ids, fast.text)
	}
	if len(got.logprobs) != 40 || !slices.EqualFunc(got.logprobs, fast.logprobs, func(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) }) {
		t.Fatalf("slow reader's logprobs %v, fast reader's %v", got.logprobs, fast.logprobs)
	}
	t.Logf("40 tokens: %d events to the reader that kept up, %d to the one that waited", fast.events, got.events)
	if got.events > 3 {
		t.Errorf("the slow reader got %d events for 40 tokens, want at most 3", got.events)
	}
}

// TestSlowProgressCallback: a Progress callback that blocks does not hold
// up the engine: it runs on the stream's goroutine and is told the latest
// progress. Its first call returns only once the engine has read the
// prompt in 40 chunks and queued the request's final event; the callback
// is then called once more, with the prompt read, and
// the request's answer is the same as without the callback.
func TestSlowProgressCallback(t *testing.T) {
	e := newDemoEngine(t, Options{EOS: []int{4095}, PrefillChunk: 8, CacheBytes: -1})
	c := greedyCaseFor(t, "Hello!")
	prompt := make([]int, 321)
	for i := range prompt {
		prompt[i] = c.PromptIDs[i%len(c.PromptIDs)]
	}
	want := readAll(mustSubmit(t, e, Request{Prompt: prompt, MaxTokens: 5}))
	streams := make(chan *Stream, 1)
	var seen []PrefillProgress
	blocked := false
	s := mustSubmit(t, e, Request{Prompt: prompt, MaxTokens: 5, Progress: func(p PrefillProgress) {
		seen = append(seen, p)
		if len(seen) > 1 {
			return
		}
		s := <-streams
		// The stream queues its last token with no event a reader may
		// take (the reader is this callback): its state is read again.
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			s.mu.Lock()
			final := s.final != nil
			s.mu.Unlock()
			if final {
				blocked = true
				return
			}
		}
	}})
	streams <- s
	got := readAll(s) // Events closes after the callbacks' last call
	if got.err != nil || !slices.Equal(got.ids, want.ids) {
		t.Fatalf("with a blocking callback: %v %v, without: %v", got.ids, got.err, want.ids)
	}
	if !blocked {
		t.Fatal("the request did not end while its progress callback was blocked")
	}
	// The first call is told the latest progress when the stream's
	// goroutine gets to it: usually the cache lookup's (nothing read), but
	// on a loaded machine the engine may have read a chunk or more by then.
	// Either way a step of 8 tokens, and the second call the prompt read.
	last := PrefillProgress{Done: len(prompt) - 1, Total: len(prompt)}
	if len(seen) != 2 || seen[0].Total != len(prompt) || seen[0].Done%8 != 0 || seen[0].Done >= last.Done || seen[1] != last {
		t.Errorf("progress told %v, want a step of 8 before %v, then %v", seen, last.Done, last)
	}
}

// TestCloseCancelsEverything: Close returns within a second with requests
// decoding, one reading a long prompt and one queued, and ends them all.
func TestCloseCancelsEverything(t *testing.T) {
	e := newDemoEngine(t, Options{EOS: []int{4095}, Parallel: 2, PrefillChunk: 4096})
	c := greedyCaseFor(t, "Hello!")
	running := mustSubmit(t, e, Request{Prompt: c.PromptIDs, MaxTokens: 100000})
	<-running.Events
	long := make([]int, 4000)
	for i := range long {
		long[i] = c.PromptIDs[i%len(c.PromptIDs)]
	}
	started := make(chan struct{})
	var once sync.Once
	prefill := mustSubmit(t, e, Request{Prompt: long, MaxTokens: 10,
		Progress: func(PrefillProgress) { once.Do(func() { close(started) }) }})
	queued := mustSubmit(t, e, Request{Prompt: c.PromptIDs, MaxTokens: 10})
	<-started
	start := time.Now()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Close took %v", d)
	}
	for name, s := range map[string]*Stream{"running": running, "prefill": prefill, "queued": queued} {
		for range s.Events {
		}
		st, err := s.Result()
		if st.FinishReason == FinishStop || st.FinishReason == FinishLength || st.FinishReason == "" {
			t.Errorf("%s request ended %q (%v) after Close", name, st.FinishReason, err)
		}
	}
}

// processCPUTime is the process's CPU time: the engine's threads, not the
// other programs on a shared machine.
func processCPUTime(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestCancelInsidePrefill cancels requests whose whole prompt is one
// prefill chunk (500 and 2000 tokens; engine/cpu's TestStopBoundsWork
// measures the pass alone up to 8000), a third of the way through the
// chunk's time, and measures the CPU time the process spends from the
// cancel to the end of the stream. The pass asks the request's context
// between bounded runs of work inside its blocks (engine/cpu's pass), so
// that time is the work under way on each thread at the cancel: at most
// 50 ms of CPU at either length (500 ms with the race detector, which
// slows the work about tenfold), where the checks between layers alone
// left a mixer's whole stretch over the chunk (0.7–1.7 s at 2000 tokens).
func TestCancelInsidePrefill(t *testing.T) {
	lengths := []int{500, 2000}
	bound := 50 * time.Millisecond
	if raceEnabled {
		bound *= 10
	}
	e := newDemoEngine(t, Options{PrefillChunk: 8192, CacheBytes: -1})
	c := greedyCaseFor(t, "Hello!")
	for _, n := range lengths {
		long := make([]int, n)
		for i := range long {
			long[i] = c.PromptIDs[i%len(c.PromptIDs)]
		}
		start := time.Now()
		whole := readAll(mustSubmit(t, e, Request{Prompt: long, MaxTokens: 1}))
		chunk := time.Since(start)
		if whole.err != nil {
			t.Fatal(whole.err)
		}

		ctx, cancel := context.WithCancel(context.Background())
		started := make(chan struct{})
		var once sync.Once
		s, err := e.Submit(ctx, Request{Prompt: long, MaxTokens: 1,
			Progress: func(PrefillProgress) { once.Do(func() { close(started) }) }})
		if err != nil {
			t.Fatal(err)
		}
		<-started
		time.Sleep(chunk / 3) // a third into the chunk: the moment under test
		cpu0, wall0 := processCPUTime(t), time.Now()
		cancel()
		r := readAll(s)
		cpu, wall := processCPUTime(t)-cpu0, time.Since(wall0)
		t.Logf("%5d tokens: the chunk takes %v; cancelled a third in, the request ended after %v CPU (%v wall)",
			n, chunk.Round(time.Millisecond), cpu, wall.Round(time.Microsecond))
		if r.stats.FinishReason != FinishCancelled {
			t.Fatalf("%d tokens: ended %q, want cancelled", n, r.stats.FinishReason)
		}
		if cpu > bound {
			t.Errorf("%d tokens: the request ended %v of CPU after its cancel, more than %v", n, cpu, bound)
		}
	}
	// The engine serves the next request normally.
	if got := readAll(mustSubmit(t, e, Request{Prompt: c.PromptIDs, MaxTokens: 3})); !slices.Equal(got.ids, c.GreedyIDs[:3]) {
		t.Fatalf("after a cancelled prefill: %v, want %v", got.ids, c.GreedyIDs[:3])
	}
}

// TestSequenceMemoryBudget: a request whose sequence could never fit is
// refused with the reason; two that fit only one at a time run one after
// the other, with the same answers.
func TestSequenceMemoryBudget(t *testing.T) {
	probe := newDemoEngine(t, Options{})
	c := greedyCaseFor(t, "Hello!")
	need := probe.sequenceBytes(len(c.PromptIDs) + 8)
	e := newDemoEngine(t, Options{Parallel: 4, SequenceBytes: need + need/2})
	if _, err := e.Submit(context.Background(), Request{Prompt: c.PromptIDs}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("a request for the whole context: %v, want ErrTooLarge", err)
	}
	got := concurrently(t, e, []Request{{Prompt: c.PromptIDs, MaxTokens: 8}, {Prompt: c.PromptIDs, MaxTokens: 8}})
	for i, r := range got {
		if r.err != nil || !slices.Equal(r.ids, c.GreedyIDs[:8]) {
			t.Fatalf("request %d: %v %v, want %v", i, r.ids, r.err, c.GreedyIDs[:8])
		}
	}
	e.Close()
	if e.peakBatch != 1 {
		t.Errorf("%d sequences decoded together in a budget for one", e.peakBatch)
	}
}
