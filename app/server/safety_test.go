package server

import (
	"encoding/base64"
	"net/http"
	"strings"
	"testing"

	"github.com/suzuran-app/suzuran/engine"
)

func TestExposedNeedsKey(t *testing.T) {
	l := loadModel(t, fixtureDir, engine.LoadOptions{})
	for _, tc := range []struct {
		addr, key string
		ok        bool
	}{
		{"127.0.0.1:0", "", true},
		{"localhost:0", "", true},
		{"[::1]:0", "", true},
		{"0.0.0.0:0", "", false},
		{":0", "", false},
		{"192.168.1.10:0", "", false},
		{"0.0.0.0:0", "k", true},
		{"no-port", "", false},
	} {
		_, err := New(Config{Addr: tc.addr, APIKey: tc.key, Models: l})
		if (err == nil) != tc.ok {
			t.Errorf("New(%q, key %q): %v, want ok %v", tc.addr, tc.key, err, tc.ok)
		}
		if err != nil && tc.addr != "no-port" && !strings.Contains(err.Error(), "API key") {
			t.Errorf("the refusal does not give the reason: %v", err)
		}
	}
	if _, err := New(Config{}); err == nil {
		t.Error("New without Models succeeded")
	}
}

func TestHostCheck(t *testing.T) {
	ts := startServer(t, loadModel(t, fixtureDir, engine.LoadOptions{}), nil)
	port := ts.Addr()[strings.LastIndex(ts.Addr(), ":"):]
	for _, tc := range []struct {
		host   string
		status int
	}{
		{"localhost" + port, 200},
		{"127.0.0.1" + port, 200},
		{"LOCALHOST" + port, 200},
		{"[::1]" + port, 200},
		{"localhost", 200},
		{"evil.example" + port, 403},
		{"127.0.0.1.nip.io" + port, 403},
		{"attacker.localhost.evil" + port, 403},
	} {
		res := do(t, "GET", ts.url+"/v1/models", nil, map[string]string{"Host": tc.host})
		if res.status != tc.status {
			t.Errorf("Host %q: status %d, want %d: %s", tc.host, res.status, tc.status, res.body)
		}
	}
}

func TestAPIKey(t *testing.T) {
	const key = "sk-local-secret-123"
	ts := startServer(t, loadModel(t, fixtureDir, engine.LoadOptions{}), func(c *Config) { c.APIKey = key })
	body := map[string]any{"messages": userMessage("x"), "max_tokens": 1}
	anthropicBody := map[string]any{"messages": userMessage("x"), "max_tokens": 1}
	for _, tc := range []struct {
		name   string
		path   string
		header map[string]string
		status int
	}{
		{"none", "/v1/chat/completions", nil, 401},
		{"wrong", "/v1/chat/completions", map[string]string{"Authorization": "Bearer sk-wrong"}, 401},
		{"prefix", "/v1/chat/completions", map[string]string{"Authorization": "Bearer " + key[:5]}, 401},
		{"longer", "/v1/chat/completions", map[string]string{"Authorization": "Bearer " + key + "x"}, 401},
		{"bearer", "/v1/chat/completions", map[string]string{"Authorization": "Bearer " + key}, 200},
		{"x-api-key", "/v1/chat/completions", map[string]string{"X-Api-Key": key}, 200},
		{"anthropic none", "/v1/messages", nil, 401},
		{"anthropic x-api-key", "/v1/messages", map[string]string{"x-api-key": key}, 200},
		{"anthropic bearer", "/v1/messages", map[string]string{"Authorization": "Bearer " + key}, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := any(body)
			if strings.HasPrefix(tc.path, "/v1/messages") {
				b = anthropicBody
			}
			res := do(t, "POST", ts.url+tc.path, b, tc.header)
			if res.status != tc.status {
				t.Fatalf("status %d, want %d: %s", res.status, tc.status, res.body)
			}
			if tc.status == 401 {
				v := res.json(t)
				if strings.HasPrefix(tc.path, "/v1/messages") {
					if v["type"] != "error" || path(v, "error", "type") != "authentication_error" {
						t.Errorf("not Anthropic's shape: %s", res.body)
					}
				} else if path(v, "error", "code") != "invalid_api_key" {
					t.Errorf("not OpenAI's shape: %s", res.body)
				}
			}
		})
	}
	// /health needs no key (a health check has none).
	if res := do(t, "GET", ts.url+"/health", nil, nil); res.status != 200 {
		t.Errorf("/health: %d", res.status)
	}
	if strings.Contains(ts.logs.String(), key) || strings.Contains(ts.logs.String(), key[:5]) {
		t.Errorf("the key appears in the log:\n%s", ts.logs.String())
	}
}

func TestCORS(t *testing.T) {
	ts := startServer(t, loadModel(t, fixtureDir, engine.LoadOptions{}), func(c *Config) {
		c.CORSOrigins = []string{"https://app.example"}
	})
	preflight := func(origin string) response {
		return do(t, "OPTIONS", ts.url+"/v1/chat/completions", nil, map[string]string{
			"Origin": origin, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization, content-type",
		})
	}
	res := preflight("https://app.example")
	if res.status != 204 || res.header.Get("Access-Control-Allow-Origin") != "https://app.example" ||
		!strings.Contains(res.header.Get("Access-Control-Allow-Headers"), "Authorization") ||
		!strings.Contains(res.header.Get("Access-Control-Allow-Methods"), "POST") {
		t.Errorf("preflight from an allowed origin: %d %v", res.status, res.header)
	}
	res = preflight("https://evil.example")
	if res.status != 403 || res.header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("preflight from another origin: %d %v", res.status, res.header)
	}
	body := map[string]any{"messages": userMessage("x"), "max_tokens": 1}
	res = do(t, "POST", ts.url+"/v1/chat/completions", body, map[string]string{"Origin": "https://app.example"})
	if res.status != 200 || res.header.Get("Access-Control-Allow-Origin") != "https://app.example" {
		t.Errorf("request from an allowed origin: %d %v", res.status, res.header)
	}
	// A page elsewhere cannot even send a simple (unpreflighted) request.
	res = do(t, "POST", ts.url+"/v1/chat/completions", body, map[string]string{"Origin": "https://evil.example", "Content-Type": "text/plain"})
	if res.status != 403 || res.header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("request from another origin: %d %v", res.status, res.header)
	}
	// The server's own page (the UI) is same-origin.
	res = do(t, "POST", ts.url+"/v1/chat/completions", body, map[string]string{"Origin": ts.url})
	if res.status != 200 || res.header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("same-origin request: %d %v", res.status, res.header)
	}
	// No Origin (curl, SDKs): no CORS headers.
	res = do(t, "POST", ts.url+"/v1/chat/completions", body, nil)
	if res.status != 200 || res.header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("request without Origin: %d %v", res.status, res.header)
	}
}

func TestBodyLimit(t *testing.T) {
	ts := startServer(t, loadModel(t, fixtureDir, engine.LoadOptions{}), func(c *Config) { c.MaxBodyBytes = 1000 })
	big := map[string]any{"messages": userMessage(strings.Repeat("a", 2000))}
	checkError(t, post(t, ts.url+"/v1/chat/completions", big), http.StatusRequestEntityTooLarge, "")
	res := post(t, ts.url+"/v1/messages", map[string]any{"max_tokens": 1, "messages": userMessage(strings.Repeat("a", 2000))})
	if res.status != 413 || path(res.json(t), "error", "type") != "request_too_large" {
		t.Errorf("Anthropic 413: %d %s", res.status, res.body)
	}
	// Chunked, without a Content-Length, the limit holds while reading.
	req, _ := http.NewRequest("POST", ts.url+"/v1/chat/completions", strings.NewReader(`{"messages":[{"role":"user","content":"`+strings.Repeat("a", 3000)+`"}]}`))
	req.ContentLength = -1
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != 413 {
		t.Errorf("chunked body over the limit: %d", r.StatusCode)
	}
}

func TestUI(t *testing.T) {
	ui := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ui:" + r.URL.Path)) })
	l := loadModel(t, fixtureDir, engine.LoadOptions{})
	ts := startServer(t, l, func(c *Config) { c.UI = ui })
	if res := do(t, "GET", ts.url+"/", nil, nil); res.status != 200 || string(res.body) != "ui:/" {
		t.Errorf("UI on loopback without a key: %d %s", res.status, res.body)
	}
	if res := do(t, "GET", ts.url+"/assets/app.js", nil, nil); string(res.body) != "ui:/assets/app.js" {
		t.Errorf("UI asset: %s", res.body)
	}
	ts = startServer(t, l, func(c *Config) { c.UI = ui; c.APIKey = "k" })
	checkError(t, do(t, "GET", ts.url+"/v1/nope", nil, map[string]string{"Authorization": "Bearer k"}), 404, "")
	if res := do(t, "GET", ts.url+"/", nil, map[string]string{"Host": "evil.example"}); res.status != 403 {
		t.Errorf("UI through a foreign Host: %d", res.status)
	}

	// Exposed, the UI needs the key too (a browser sends it as the basic
	// authentication password).
	exposed, err := New(Config{Addr: "0.0.0.0:0", APIKey: "k", Models: l, UI: ui})
	if err != nil {
		t.Fatal(err)
	}
	h := exposed.Handler()
	for _, tc := range []struct {
		user, pass string
		status     int
	}{{"", "", 401}, {"x", "wrong", 401}, {"", "k", 200}} {
		req, _ := http.NewRequest("GET", "http://192.168.1.2:11435/", nil)
		req.Header.Set("Accept", "text/html")
		if tc.pass != "" {
			req.SetBasicAuth(tc.user, tc.pass)
		}
		rec := newRecorder()
		h.ServeHTTP(rec, req)
		if rec.status != tc.status {
			t.Errorf("exposed UI with password %q: %d, want %d", tc.pass, rec.status, tc.status)
		}
		if tc.status == 401 && rec.header.Get("WWW-Authenticate") == "" {
			t.Error("401 for the UI without WWW-Authenticate: the browser cannot ask for the key")
		}
	}
}

// TestKeyCoversTheUI: with a key, on loopback too, the UI's calls and
// events need it as the API does (else any local program or page gets the
// conversations and settings the key is meant to guard); a browser is
// asked for it as a password when it opens the page. /health stays open.
func TestKeyCoversTheUI(t *testing.T) {
	ui := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ui:" + r.URL.Path)) })
	ts := startServer(t, loadModel(t, fixtureDir, engine.LoadOptions{}), func(c *Config) { c.UI = ui; c.APIKey = "sesame" })
	for _, tc := range []struct {
		method, path string
	}{{"POST", "/api/call/Send"}, {"POST", "/api/call/Conversations"}, {"POST", "/api/call/SaveSettings"}, {"GET", "/api/events"}, {"GET", "/"}} {
		res := do(t, tc.method, ts.url+tc.path, "[]", nil)
		if res.status != 401 || res.header.Get("WWW-Authenticate") == "" || strings.HasPrefix(string(res.body), "ui:") {
			t.Errorf("%s %s without the key: %d %q %s, want 401 asking for basic authentication", tc.method, tc.path, res.status, res.header.Get("WWW-Authenticate"), res.body)
		}
		if !strings.Contains(string(res.body), "password") {
			t.Errorf("%s %s: the refusal does not say how a browser gets in: %s", tc.method, tc.path, res.body)
		}
		for _, header := range []map[string]string{{"Authorization": "Bearer sesame"}, {"Authorization": "Basic " + base64.StdEncoding.EncodeToString([]byte(":sesame"))}} {
			if res := do(t, tc.method, ts.url+tc.path, "[]", header); res.status != 200 || string(res.body) != "ui:"+tc.path {
				t.Errorf("%s %s with the key (%s): %d %s", tc.method, tc.path, header["Authorization"][:6], res.status, res.body)
			}
		}
		if res := do(t, tc.method, ts.url+tc.path, "[]", map[string]string{"Authorization": "Bearer wrong"}); res.status != 401 {
			t.Errorf("%s %s with a wrong key: %d", tc.method, tc.path, res.status)
		}
	}
	if res := do(t, "GET", ts.url+"/health", nil, nil); res.status != 200 {
		t.Errorf("/health without the key: %d", res.status)
	}
}

// TestCORSOriginsAreTheAPIsOnly: an origin allowed to call the API (--cors,
// even "*") gets neither CORS headers nor answers from the UI's routes,
// which answer only their own page; the API still answers it.
func TestCORSOriginsAreTheAPIsOnly(t *testing.T) {
	ui := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ui:" + r.URL.Path)) })
	l := loadModel(t, fixtureDir, engine.LoadOptions{})
	for _, origins := range [][]string{{"https://app.example"}, {"*"}} {
		ts := startServer(t, l, func(c *Config) { c.UI = ui; c.CORSOrigins = origins })
		for _, p := range []string{"/api/call/Conversations", "/api/call/SaveSettings", "/api/events", "/"} {
			res := do(t, "OPTIONS", ts.url+p, nil, map[string]string{
				"Origin": "https://app.example", "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type"})
			if res.status != 403 || res.header.Get("Access-Control-Allow-Origin") != "" || res.header.Get("Access-Control-Allow-Methods") != "" {
				t.Errorf("--cors %v: preflight for %s from the allowed origin: %d %v, want 403 without CORS headers", origins, p, res.status, res.header)
			}
			res = do(t, "POST", ts.url+p, "[]", map[string]string{"Origin": "https://app.example"})
			if res.status != 403 || res.header.Get("Access-Control-Allow-Origin") != "" || strings.HasPrefix(string(res.body), "ui:") {
				t.Errorf("--cors %v: POST %s from the allowed origin: %d %s, want 403", origins, p, res.status, res.body)
			}
			if res := do(t, "POST", ts.url+p, "[]", map[string]string{"Origin": ts.url}); res.status != 200 || string(res.body) != "ui:"+p {
				t.Errorf("--cors %v: POST %s from the UI's own page: %d %s", origins, p, res.status, res.body)
			}
		}
		res := do(t, "GET", ts.url+"/v1/models", nil, map[string]string{"Origin": "https://app.example"})
		if res.status != 200 || res.header.Get("Access-Control-Allow-Origin") != "https://app.example" {
			t.Errorf("--cors %v: the API from the allowed origin: %d %v", origins, res.status, res.header)
		}
	}
}

// recorder is a minimal ResponseWriter for handler tests.
type recorder struct {
	status int
	header http.Header
	body   strings.Builder
}

func newRecorder() *recorder { return &recorder{header: http.Header{}} }

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) WriteHeader(s int) {
	if r.status == 0 {
		r.status = s
	}
}
func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = 200
	}
	return r.body.Write(b)
}

func TestHandlerPanicIsA500AndTheServerGoesOn(t *testing.T) {
	ui := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { panic("boom") })
	ts := startServer(t, loadModel(t, fixtureDir, engine.LoadOptions{}), func(c *Config) { c.UI = ui })
	res := do(t, "GET", ts.url+"/page", nil, nil)
	if res.status != 500 || path(res.json(t), "error", "type") != "server_error" {
		t.Errorf("a panicking handler: %d %s", res.status, res.body)
	}
	if !strings.Contains(ts.logs.String(), "handler panic: boom") {
		t.Errorf("the panic is not logged:\n%s", ts.logs.String())
	}
	if res := do(t, "GET", ts.url+"/health", nil, nil); res.status != 200 {
		t.Errorf("after the panic: %d", res.status)
	}
}
