package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/suzuran-app/suzuran/app/modelhost"
	"github.com/suzuran-app/suzuran/engine"
	"github.com/suzuran-app/suzuran/engine/chat"
	"github.com/suzuran-app/suzuran/engine/checkpoint"
	"github.com/suzuran-app/suzuran/engine/cpu"
	"github.com/suzuran-app/suzuran/engine/gpucheck"
	"github.com/suzuran-app/suzuran/engine/sample"
	"github.com/suzuran-app/suzuran/engine/tokenizer"
)

// The tiny fixture: a random 4-layer Qwen3.6-shaped model with a 1,024-token
// vocabulary; its answers are noise, but every path of the server runs on it
// in milliseconds.
var fixtureDir = filepath.Join("..", "..", "engine", "internal", "fixtures", "testdata", "qwen35moe-tiny", "mlx-4bit")

// demoDir is the demo model Suzuran Tiny, whose greedy answers are known.
var demoDir = filepath.Join("..", "..", "assets", "models", "suzuran-tiny")

// loadModel loads a model folder with the given options and waits for it.
func loadModel(t testing.TB, dir string, opts engine.LoadOptions) *modelhost.Host {
	t.Helper()
	l := modelhost.New(modelhost.Options{Load: opts})
	l.Load(dir)
	if _, err := l.Wait(context.Background()); err != nil {
		t.Fatalf("loading %s: %v", dir, err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// syncBuffer collects log output from the server's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// testServer is a started server on a free loopback port.
type testServer struct {
	*Server
	url  string
	logs *syncBuffer
}

// startServer starts a server on models with cfg's other fields; it is shut
// down when the test ends.
func startServer(t testing.TB, models Models, configure func(*Config)) *testServer {
	t.Helper()
	logs := &syncBuffer{}
	cfg := Config{Addr: "127.0.0.1:0", Models: models, Logger: zerolog.New(logs).Level(zerolog.DebugLevel)}
	if configure != nil {
		configure(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	return &testServer{Server: s, url: "http://" + s.Addr(), logs: logs}
}

// response is an HTTP answer read whole.
type response struct {
	status int
	header http.Header
	body   []byte
}

// json decodes the body into a generic value.
func (r response) json(t testing.TB) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatalf("status %d, body is not a JSON object: %v\n%s", r.status, err, r.body)
	}
	return v
}

// do sends a request; body is marshalled unless it is a string or []byte.
func do(t testing.TB, method, url string, body any, header map[string]string) response {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		if strings.EqualFold(k, "Host") {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", method, url, err)
	}
	return response{status: res.StatusCode, header: res.Header, body: data}
}

func post(t testing.TB, url string, body any) response {
	t.Helper()
	return do(t, http.MethodPost, url, body, nil)
}

// sseEvent is one server-sent event.
type sseEvent struct {
	name string
	data string
}

// readSSE splits a stream into events.
func readSSE(t testing.TB, body []byte) []sseEvent {
	t.Helper()
	var events []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.data != "" {
				events = append(events, cur)
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, "event: "):
			cur.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.data = strings.TrimPrefix(line, "data: ")
		default:
			t.Fatalf("unexpected SSE line %q", line)
		}
	}
	return events
}

// decodeEvent unmarshals an event's data.
func decodeEvent(t testing.TB, ev sseEvent) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal([]byte(ev.data), &v); err != nil {
		t.Fatalf("event data is not JSON: %v: %s", err, ev.data)
	}
	return v
}

// path reads a nested value: path(v, "choices", 0, "delta", "content").
func path(v any, keys ...any) any {
	for _, k := range keys {
		switch key := k.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[key]
		case int:
			l, ok := v.([]any)
			if !ok || key >= len(l) {
				return nil
			}
			v = l[key]
		}
	}
	return v
}

// waitFor polls cond until it holds or the timeout passes.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond) // for state the server publishes no event of (counters, the engine's queue)
	}
}

// endlessLoader loads the fixture with an end-of-sequence id the model
// can never sample, so that an answer runs until max_tokens or the context
// is full (tens of seconds): the tests of cancellation, queueing and
// shutdown need generations that are still running when they act.
func endlessLoader(t testing.TB, queue int) *modelhost.Host {
	t.Helper()
	// One request at a time, so that the tests of the queue know which
	// request waits.
	return endlessLoaderWith(t, fixtureDir, engine.LoadOptions{QueueSize: queue, Parallel: 1})
}

// endlessLoaderWith is endlessLoader over the model folder dir with the
// queue and batch sizes of opts.
func endlessLoaderWith(t testing.TB, dir string, opts engine.LoadOptions) *modelhost.Host {
	t.Helper()
	l := modelhost.New(modelhost.Options{Load: opts, Open: func(dir string, opts engine.LoadOptions, _ gpucheck.Options) (*engine.Engine, gpucheck.Result, error) {
		var none gpucheck.Result
		m, err := checkpoint.Load(dir)
		if err != nil {
			return nil, none, err
		}
		tok, err := tokenizer.Load(dir)
		if err != nil {
			return nil, none, err
		}
		tmpl, err := chat.LoadTemplate(dir)
		if err != nil {
			return nil, none, err
		}
		backend, err := cpu.New(m.Weights, cpu.Options{Sampler: sample.New()})
		if err != nil {
			return nil, none, err
		}
		e, err := engine.New(engine.Options{Backend: backend, Weights: m.Weights, Tokenizer: tok, Template: tmpl,
			EOS: []int{1 << 30}, QueueSize: opts.QueueSize, Parallel: opts.Parallel})
		if err != nil {
			return nil, none, err
		}
		t.Cleanup(func() { m.Close() })
		return e, none, nil
	}})
	l.Load(dir)
	if _, err := l.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}
