package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
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

// timedStream streams a greedy completion of prompt, reading it as it
// comes, and returns its text pieces with when the first and the last
// arrived.
func timedStream(t *testing.T, url, prompt string, maxTokens int) (pieces []string, first, last time.Time) {
	body, _ := json.Marshal(map[string]any{"prompt": prompt, "max_tokens": maxTokens, "temperature": 0, "stream": true})
	res, err := http.Post(url+"/v1/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Error(err)
		return
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var v any
		if err := json.Unmarshal([]byte(data), &v); err != nil {
			t.Errorf("%q: %v", data, err)
			return
		}
		if text, ok := path(v, "choices", 0, "text").(string); ok {
			if first.IsZero() {
				first = time.Now()
			}
			last = time.Now()
			pieces = append(pieces, text)
		}
	}
	return pieces, first, last
}

// TestConcurrentStreamsBatch sends four streaming requests through the
// server one after another, then all at once, on the tiny fixture with four
// sequences per step. Together, every stream must be flowing before any
// ends (they decode in shared steps rather than wait for each other), and
// each must carry the same text as when it ran alone. The chunks need not
// match: tokens that wait for a reader merge into one event (engine.Stream),
// so a stream's chunks follow how fast its reader took them; each must
// still come in more than one piece, the first token on its own.
//
// The wall times of both ways are logged, not asserted: on this model decode
// reads no weight from memory (all fit in cache), so a shared step saves
// only the per-pass overhead, and on a shared two-core machine the ratio
// was seen anywhere from 0.45× to 1.3× (BENCHMARKS.md has the full-width
// figures).
func TestConcurrentStreamsBatch(t *testing.T) {
	l := endlessLoaderWith(t, fixtureDir, engine.LoadOptions{Parallel: 4})
	ts := startServer(t, l, nil)
	const maxTokens = 64
	prompts := []string{"The quick brown fox", "Once upon a time", "Lily of the valley", "1, 2, 3,"}

	start := time.Now()
	alone := make([][]string, len(prompts))
	for i, p := range prompts {
		alone[i] = streamTokens(t, ts.url, p, maxTokens)
	}
	sequential := time.Since(start)

	start = time.Now()
	together := make([][]string, len(prompts))
	firsts := make([]time.Time, len(prompts))
	lasts := make([]time.Time, len(prompts))
	var wg sync.WaitGroup
	for i, p := range prompts {
		wg.Go(func() { together[i], firsts[i], lasts[i] = timedStream(t, ts.url, p, maxTokens) })
	}
	wg.Wait()
	concurrent := time.Since(start)

	for i := range prompts {
		if len(alone[i]) < 2 || len(together[i]) < 2 {
			t.Fatalf("%q streamed %d chunks alone and %d together, want more than one", prompts[i], len(alone[i]), len(together[i]))
		}
		if a, b := strings.Join(alone[i], ""), strings.Join(together[i], ""); a != b {
			t.Errorf("%q: together %q, alone %q", prompts[i], b, a)
		}
	}
	lastFirst, firstLast := slices.MaxFunc(firsts, time.Time.Compare), slices.MinFunc(lasts, time.Time.Compare)
	if !lastFirst.Before(firstLast) {
		t.Errorf("a stream ended %v before the last one started: the requests ran one after another", lastFirst.Sub(firstLast))
	}
	t.Logf("4 streams of %d tokens: one after another %v, together %v (%.2f×)", maxTokens, sequential, concurrent,
		concurrent.Seconds()/sequential.Seconds())
}
