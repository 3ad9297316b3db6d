package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/suzuran-app/suzuran/app/modelhost"
	"github.com/suzuran-app/suzuran/engine"
	"github.com/suzuran-app/suzuran/engine/gpucheck"
)

// openStream starts a streamed chat completion and returns the response
// once its headers arrived, with a reader of its lines.
func openStream(t *testing.T, ctx context.Context, url string, maxTokens int) (*http.Response, *bufio.Reader) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"messages": userMessage("Go on"), "max_tokens": maxTokens, "stream": true, "temperature": 1, "seed": 1})
	req, _ := http.NewRequestWithContext(ctx, "POST", url+"/v1/chat/completions", strings.NewReader(string(body)))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != 200 {
		t.Fatalf("stream status %d", res.StatusCode)
	}
	return res, bufio.NewReader(res.Body)
}

// readEvents reads n data lines of a stream.
func readEvents(t *testing.T, rd *bufio.Reader, n int) {
	t.Helper()
	for n > 0 {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("stream ended early: %v", err)
		}
		if strings.HasPrefix(line, "data: ") {
			n--
		}
	}
}

func TestCancelOnDisconnect(t *testing.T) {
	ts := startServer(t, endlessLoader(t, 0), nil)
	ctx, cancel := context.WithCancel(t.Context())
	res, rd := openStream(t, ctx, ts.url, 30000)
	readEvents(t, rd, 3)
	cancel()
	res.Body.Close()
	waitFor(t, 2*time.Second, "the generation to end after the client left", func() bool { return ts.running.Load() == 0 })
	waitFor(t, time.Second, "the log to say the generation was cancelled", func() bool {
		return strings.Contains(ts.logs.String(), "generation cancelled")
	})
	// Non-streaming requests are cancelled too.
	ctx, cancel = context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	body := `{"messages":[{"role":"user","content":"x"}],"max_tokens":30000,"temperature":1}`
	req, _ := http.NewRequestWithContext(ctx, "POST", ts.url+"/v1/chat/completions", strings.NewReader(body))
	if _, err := http.DefaultClient.Do(req); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a 30,000-token answer came back within 100 ms: %v", err)
	}
	waitFor(t, 2*time.Second, "the non-streamed generation to end", func() bool { return ts.running.Load() == 0 })
	if n := strings.Count(ts.logs.String(), "generation cancelled"); n != 2 {
		t.Errorf("%d cancellations logged, want 2", n)
	}
}

func TestQueueFull(t *testing.T) {
	// One waiting place: one request runs, one waits, the third is 429.
	ts := startServer(t, endlessLoader(t, 1), nil)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	first, rd := openStream(t, ctx, ts.url, 30000)
	defer first.Body.Close()
	readEvents(t, rd, 2)
	queued := make(chan *http.Response, 1)
	go func() {
		body := `{"messages":[{"role":"user","content":"x"}],"max_tokens":4,"stream":true}`
		req, _ := http.NewRequestWithContext(ctx, "POST", ts.url+"/v1/chat/completions", strings.NewReader(body))
		res, err := http.DefaultClient.Do(req)
		if err == nil {
			queued <- res
		}
	}()
	waitFor(t, 2*time.Second, "the second request to queue", func() bool { return ts.running.Load() == 2 })
	res := post(t, ts.url+"/v1/chat/completions", map[string]any{"messages": userMessage("x"), "max_tokens": 2})
	checkError(t, res, http.StatusTooManyRequests, "")
	if res.header.Get("Retry-After") == "" {
		t.Error("429 without Retry-After")
	}
	anth := do(t, "POST", ts.url+"/v1/messages", map[string]any{"max_tokens": 2, "messages": userMessage("x")}, nil)
	if anth.status != 429 || path(anth.json(t), "error", "type") != "rate_limit_error" {
		t.Errorf("Anthropic 429: %d %s", anth.status, anth.body)
	}
	// Leaving frees the engine for the queued request, which completes.
	cancel()
	first.Body.Close()
	waitFor(t, 3*time.Second, "every generation to end", func() bool { return ts.running.Load() == 0 })
	if res := post(t, ts.url+"/v1/chat/completions", map[string]any{"messages": userMessage("x"), "max_tokens": 2}); res.status != 200 {
		t.Errorf("after the queue drained: %d %s", res.status, res.body)
	}
}

func TestShutdownAndRestart(t *testing.T) {
	l := endlessLoader(t, 0)
	ts := startServer(t, l, nil)
	addr := ts.Addr()
	res, rd := openStream(t, t.Context(), ts.url, 30000)
	defer res.Body.Close()
	readEvents(t, rd, 2)

	start := time.Now()
	if err := ts.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("Shutdown took %v with a stream running, want at most 1 s", took)
	}
	// The stream ends with an error event, no [DONE].
	rest := make([]byte, 0, 1<<16)
	buf := make([]byte, 4096)
	for {
		n, err := rd.Read(buf)
		rest = append(rest, buf[:n]...)
		if err != nil {
			break
		}
	}
	if !strings.Contains(string(rest), `"code":"cancelled"`) || strings.Contains(string(rest), "[DONE]") {
		t.Errorf("the stream's end after shutdown: %s", rest[max(0, len(rest)-400):])
	}
	if ts.running.Load() != 0 {
		t.Errorf("%d generations still running after Shutdown", ts.running.Load())
	}
	// The port is free at once, and the same server starts again on it,
	// any number of times, with the engine still loaded.
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("port %s not free after Shutdown: %v", addr, err)
	}
	ln.Close()
	http.DefaultClient.CloseIdleConnections()
	s2, err := New(Config{Addr: addr, Models: l})
	if err != nil {
		t.Fatal(err)
	}
	for round := range 3 {
		if err := s2.Start(); err != nil {
			t.Fatalf("round %d: Start: %v", round, err)
		}
		if err := s2.Start(); err == nil {
			t.Fatalf("round %d: a second Start on a running server succeeded", round)
		}
		if res := post(t, "http://"+addr+"/v1/completions", map[string]any{"prompt": "a", "max_tokens": 2}); res.status != 200 {
			t.Fatalf("round %d: %d %s", round, res.status, res.body)
		}
		if err := s2.Shutdown(context.Background()); err != nil {
			t.Fatalf("round %d: Shutdown: %v", round, err)
		}
		// The client's kept-alive connection died with the server.
		http.DefaultClient.CloseIdleConnections()
	}
	if err := s2.Shutdown(context.Background()); err != nil {
		t.Errorf("Shutdown of a stopped server: %v", err)
	}
}

func TestShutdownLetsShortAnswersFinish(t *testing.T) {
	ts := startServer(t, endlessLoader(t, 0), func(c *Config) { c.ShutdownGrace = 2 * time.Second })
	var wg sync.WaitGroup
	var res response
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	wg.Add(1)
	go func() {
		defer wg.Done()
		res = post(t, ts.url+"/v1/chat/completions", map[string]any{"messages": userMessage("x"), "max_tokens": 40, "temperature": 1})
	}()
	waitFor(t, 2*time.Second, "the request to start", func() bool { return ts.running.Load() == 1 })
	if err := ts.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if res.status != 200 || path(res.json(t), "choices", 0, "finish_reason") != "length" {
		t.Errorf("an answer running at shutdown, within the grace: %d %s", res.status, res.body)
	}
}

// blockedLoader is a model host whose load waits for release.
func blockedLoader(t *testing.T) (*modelhost.Host, chan struct{}) {
	release := make(chan struct{})
	l := modelhost.New(modelhost.Options{Open: func(dir string, opts engine.LoadOptions, _ gpucheck.Options) (*engine.Engine, gpucheck.Result, error) {
		<-release
		e, err := engine.Load(dir, opts)
		return e, gpucheck.Result{}, err
	}})
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
		l.Close()
	})
	return l, release
}

func TestLoading(t *testing.T) {
	l, release := blockedLoader(t)
	ts := startServer(t, l, nil)
	l.Load(fixtureDir)
	h := do(t, "GET", ts.url+"/health", nil, nil)
	if v := h.json(t); h.status != 503 || v["status"] != "loading" || v["model"] != "mlx-4bit" {
		t.Errorf("/health while loading: %d %s", h.status, h.body)
	}
	res := post(t, ts.url+"/v1/chat/completions", map[string]any{"messages": userMessage("x")})
	checkError(t, res, 503, "")
	if path(res.json(t), "error", "code") != "model_loading" || res.header.Get("Retry-After") == "" {
		t.Errorf("503 while loading: %s %v", res.body, res.header)
	}
	anth := do(t, "POST", ts.url+"/v1/messages", map[string]any{"max_tokens": 2, "messages": userMessage("x")}, nil)
	if anth.status != 503 || path(anth.json(t), "error", "type") != "overloaded_error" {
		t.Errorf("Anthropic 503: %d %s", anth.status, anth.body)
	}
	close(release)
	l.Wait(t.Context())
	if res := post(t, ts.url+"/v1/chat/completions", map[string]any{"messages": userMessage("x"), "max_tokens": 1}); res.status != 200 {
		t.Errorf("after loading: %d %s", res.status, res.body)
	}
}

func TestLoadFailure(t *testing.T) {
	l := modelhost.New(modelhost.Options{})
	l.Load(t.TempDir())
	if _, err := l.Wait(t.Context()); err == nil {
		t.Fatal("an empty folder loaded")
	}
	ts := startServer(t, l, nil)
	h := do(t, "GET", ts.url+"/health", nil, nil)
	if v := h.json(t); h.status != 503 || v["status"] != "error" || v["error"] == "" {
		t.Errorf("/health after a failed load: %d %s", h.status, h.body)
	}
	checkError(t, post(t, ts.url+"/v1/chat/completions", map[string]any{"messages": userMessage("x")}), 503, "")
}

func TestShutdownEndsEveryKindOfStreamWithAnError(t *testing.T) {
	for _, tc := range []struct {
		path, body, want string
	}{
		{"/v1/messages", `{"max_tokens":30000,"stream":true,"messages":[{"role":"user","content":"x"}]}`, "event: error\ndata: {\"error\":{\"message\":\"the generation was cancelled"},
		{"/v1/responses", `{"max_output_tokens":30000,"stream":true,"input":"x"}`, "event: error\ndata: {\"code\":\"cancelled\""},
		{"/v1/completions", `{"max_tokens":30000,"stream":true,"prompt":"x"}`, `data: {"error":{"code":"cancelled"`},
	} {
		t.Run(tc.path, func(t *testing.T) {
			ts := startServer(t, endlessLoader(t, 0), nil)
			res, err := http.Post(ts.url+tc.path, "application/json", strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			rd := bufio.NewReader(res.Body)
			readEvents(t, rd, 3)
			if err := ts.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
			rest, _ := io.ReadAll(rd)
			if !strings.Contains(string(rest), tc.want) {
				t.Errorf("the stream's end lacks %q:\n%s", tc.want, rest[max(0, len(rest)-300):])
			}
		})
	}
}

func TestKeepAliveWhileWaiting(t *testing.T) {
	// A stream whose request waits behind another gets keep-alives (an SSE
	// comment with its queue position; a ping event for Anthropic's
	// clients) until its first token.
	ts := startServer(t, endlessLoader(t, 0), nil)
	ts.keepAliveInterval = 20 * time.Millisecond
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	first, rd := openStream(t, ctx, ts.url, 30000)
	defer first.Body.Close()
	readEvents(t, rd, 2)
	for _, tc := range []struct{ path, body, want string }{
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"max_tokens":2,"stream":true}`, ": queued: position 1\n\n"},
		{"/v1/messages", `{"max_tokens":2,"stream":true,"messages":[{"role":"user","content":"x"}]}`, "event: ping\ndata: {\"type\":\"ping\"}\n\nevent: ping"},
	} {
		req, _ := http.NewRequestWithContext(ctx, "POST", ts.url+tc.path, strings.NewReader(tc.body))
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var got strings.Builder
		buf := make([]byte, 256)
		deadline := time.Now().Add(2 * time.Second)
		for !strings.Contains(got.String(), tc.want) && time.Now().Before(deadline) {
			n, err := res.Body.Read(buf)
			got.Write(buf[:n])
			if err != nil {
				break
			}
		}
		res.Body.Close()
		if !strings.Contains(got.String(), tc.want) {
			t.Errorf("%s: no keep-alive while queued:\n%s", tc.path, got.String())
		}
	}
}
