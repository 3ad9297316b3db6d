package server

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/suzuran-app/suzuran/engine"
)

// streamTokens streams a greedy completion of prompt and returns its text
// pieces, one per chunk.
func streamTokens(t *testing.T, url, prompt string, maxTokens int) []string {
	res := post(t, url+"/v1/completions", map[string]any{"prompt": prompt, "max_tokens": maxTokens, "temperature": 0, "stream": true})
	if res.status != 200 {
		t.Errorf("%q: status %d: %s", prompt, res.status, res.body)
		return nil
	}
	var pieces []string
	for _, ev := range readSSE(t, res.body) {
		if ev.data == "[DONE]" {
			continue
		}
		if text, ok := path(decodeEvent(t, ev), "choices", 0, "text").(string); ok {
			pieces = append(pieces, text)
		}
	}
	return pieces
}

// TestConcurrentStreamsBatch sends four streaming requests through the
// server one after another, then all at once, on the tiny fixture with four
// sequences per step: together they must finish sooner (they decode in
// shared steps) and each stream must carry the same text, chunk for chunk,
// as when it ran alone. Measured in the same run, so the machine's speed
// cancels out; 0.9 is loose on purpose (on a quiet machine the ratio is
// about 0.5: a four-row step costs little more than a one-row step).
func TestConcurrentStreamsBatch(t *testing.T) {
	l := endlessLoaderWith(t, engine.LoadOptions{Parallel: 4})
	ts := startServer(t, l, nil)
	const maxTokens = 96
	prompts := []string{"The quick brown fox", "Once upon a time", "Lily of the valley", "1, 2, 3,"}

	// Each way is measured three times, interleaved, and the fastest of
	// each compared: the machine is shared, and a burst of other work
	// during one measurement must not decide the test.
	var alone, together [][]string
	sequential, concurrent := time.Duration(1<<62), time.Duration(1<<62)
	for range 3 {
		start := time.Now()
		alone = make([][]string, len(prompts))
		for i, p := range prompts {
			alone[i] = streamTokens(t, ts.url, p, maxTokens)
		}
		sequential = min(sequential, time.Since(start))

		start = time.Now()
		together = make([][]string, len(prompts))
		var wg sync.WaitGroup
		for i, p := range prompts {
			wg.Go(func() { together[i] = streamTokens(t, ts.url, p, maxTokens) })
		}
		wg.Wait()
		concurrent = min(concurrent, time.Since(start))
	}

	for i := range prompts {
		if len(alone[i]) < maxTokens/2 {
			t.Fatalf("%q streamed %d chunks alone, want about %d", prompts[i], len(alone[i]), maxTokens)
		}
		if !slices.Equal(alone[i], together[i]) {
			t.Errorf("%q: together %q, alone %q", prompts[i], fmt.Sprint(together[i]), fmt.Sprint(alone[i]))
		}
	}
	t.Logf("4 streams of %d tokens: %v one after another, %v together (%.2f×)", maxTokens, sequential, concurrent,
		concurrent.Seconds()/sequential.Seconds())
	if concurrent > sequential*9/10 {
		t.Errorf("together took %v, one after another %v: not under 0.9×", concurrent, sequential)
	}
}
