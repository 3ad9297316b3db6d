package server

import (
	"bufio"
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/suzuran-app/suzuran/engine"
	"github.com/suzuran-app/suzuran/engine/chat"
)

// benchQuestion is a demo question with a 19-token greedy answer.
const benchQuestion = "What does json.dumps do?"

// BenchmarkStreamOverhead measures, on the demo model with the prefix cache
// off (every request prefills its whole prompt), what the server adds to
// the engine:
//
//   - overhead-us/token (mean, p50, p99): per streamed token, the time from the handler
//     receiving the engine's event to the SSE bytes being flushed to the
//     socket (parsing, JSON, write);
//   - ttfb-ms: request sent to the first byte of the answer (the headers
//     and the role chunk, sent once the request is queued);
//   - ttft-api-ms: request sent to the first content chunk;
//   - ttft-engine-ms: the engine's own time to the first token for the
//     same prompt, submitted directly (engine.SubmitChat).
//
// Run: go test -run '^$' -bench StreamOverhead -benchtime 50x ./app/server/
func BenchmarkStreamOverhead(b *testing.B) {
	l := loadModel(b, demoDir, engine.LoadOptions{CacheBytes: -1})
	ts := startServer(b, l, nil)
	var mu sync.Mutex
	var overheads []time.Duration
	ts.tokenWritten = func(d time.Duration) {
		mu.Lock()
		overheads = append(overheads, d)
		mu.Unlock()
	}
	e, _, _ := l.Current(context.Background())
	off := false
	body := `{"messages":[{"role":"user","content":"` + benchQuestion + `"}],"max_tokens":48,"temperature":0,"stream":true,"chat_template_kwargs":{"enable_thinking":false}}`
	client := &http.Client{}

	var ttfb, ttftAPI, ttftEngine time.Duration
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		res, err := client.Post(ts.url+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		rd := bufio.NewReader(res.Body)
		if _, err := rd.Peek(1); err != nil {
			b.Fatal(err)
		}
		ttfb += time.Since(start)
		sawContent := false
		for {
			line, err := rd.ReadString('\n')
			if err != nil {
				break
			}
			if !sawContent && strings.Contains(line, `"content":"`) && !strings.Contains(line, `"role"`) {
				ttftAPI += time.Since(start)
				sawContent = true
			}
		}
		if !sawContent {
			b.Fatal("the answer streamed no content")
		}
		res.Body.Close()

		start = time.Now()
		stream, _, err := e.SubmitChat(context.Background(), engine.ChatRequest{
			Render:    chat.RenderRequest{Messages: []chat.Message{{Role: "user", Content: benchQuestion}}, AddGenerationPrompt: true, EnableThinking: &off},
			MaxTokens: 48,
		})
		if err != nil {
			b.Fatal(err)
		}
		sawToken := false
		for ev := range stream.Events {
			if ev.Token >= 0 && !sawToken {
				ttftEngine += time.Since(start)
				sawToken = true
			}
		}
	}
	b.StopTimer()
	n := float64(b.N)
	slices.Sort(overheads)
	var sum time.Duration
	for _, d := range overheads {
		sum += d
	}
	if len(overheads) > 0 {
		b.ReportMetric(float64(sum.Microseconds())/float64(len(overheads)), "overhead-us/token")
		b.ReportMetric(float64(overheads[len(overheads)/2].Microseconds()), "p50-overhead-us/token")
		b.ReportMetric(float64(overheads[len(overheads)*99/100].Microseconds()), "p99-overhead-us/token")
	}
	b.ReportMetric(float64(ttfb.Microseconds())/n/1000, "ttfb-ms")
	b.ReportMetric(float64(ttftAPI.Microseconds())/n/1000, "ttft-api-ms")
	b.ReportMetric(float64(ttftEngine.Microseconds())/n/1000, "ttft-engine-ms")
}
