package service

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/suzuran-app/suzuran/app/store"
)

func call(t *testing.T, base, method, args string) (int, callResponse) {
	t.Helper()
	resp, err := http.Post(base+"/api/call/"+method, "application/json", strings.NewReader(args))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out callResponse
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("%s: decoding the answer: %v", method, err)
	}
	return resp.StatusCode, out
}

func TestHTTPTransport(t *testing.T) {
	s := newTestService(t, demo(t))
	ui := fstest.MapFS{"index.html": {Data: []byte("<title>Suzuran</title>")}}
	srv := httptest.NewServer(Handler(s.Service, ui))
	defer srv.Close()

	resp, err := http.Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "<title>Suzuran</title>") {
		t.Fatalf("GET / = %d %q", resp.StatusCode, body)
	}

	// The event stream, opened before sending.
	req, _ := http.NewRequest("GET", srv.URL+"/api/events", nil)
	events, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer events.Body.Close()
	if ct := events.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("events content type %q", ct)
	}
	lines := bufio.NewReader(events.Body)
	lines.ReadString('\n') // the opening comment

	status, out := call(t, srv.URL, "Send", `[{"text": "What does json.dumps do?", "think": false}]`)
	if status != 200 || out.Error != "" {
		t.Fatalf("Send: %d %+v", status, out)
	}
	var sent SendResult
	data, _ := json.Marshal(out.Result)
	json.Unmarshal(data, &sent)

	readReply(t, lines, sent.Reply.ID)

	status, out = call(t, srv.URL, "Conversations", `["json"]`)
	if list, _ := out.Result.([]any); status != 200 || len(list) != 1 {
		t.Errorf("Conversations(json) = %d %+v", status, out)
	}

	bad := []struct {
		method, args string
		status       int
	}{
		{"NoSuchMethod", `[]`, 404},
		{"Rename", `[1]`, 400},
		{"Rename", `["one", "title"]`, 400},
		{"Rename", `not json`, 400},
		{"Conversation", `[99999]`, 404},
		{"Send", `[{"text": ""}]`, 422},
	}
	for _, c := range bad {
		status, out := call(t, srv.URL, c.method, c.args)
		if status != c.status || out.Error == "" {
			t.Errorf("%s(%s) = %d %+v, want %d with an error", c.method, c.args, status, out, c.status)
		}
	}
	// A form post, which a page of another site could send, is refused.
	resp, err = http.Post(srv.URL+"/api/call/Rename", "text/plain", strings.NewReader(`[1, "x"]`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Errorf("text/plain call: %d, want 415", resp.StatusCode)
	}
}

// readReply reads the event stream until reply's final message, which
// must be complete and hold the text its deltas streamed.
func readReply(t *testing.T, lines *bufio.Reader, reply int64) {
	t.Helper()
	var text strings.Builder
	deadline := time.Now().Add(60 * time.Second)
	for final := false; !final; {
		if time.Now().After(deadline) {
			t.Fatal("no final message over SSE within 60 s")
		}
		line, err := lines.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		payload, ok := strings.CutPrefix(strings.TrimRight(line, "\n"), "data: ")
		if !ok {
			continue
		}
		var ev Event
		if err := json.Unmarshal([]byte(payload), &ev); err != nil {
			t.Fatalf("event %q: %v", payload, err)
		}
		if ev.MessageID != reply {
			continue
		}
		switch ev.Type {
		case EventReply:
			text.WriteString(ev.Content)
		case EventMessage:
			if ev.Message.Status != store.StatusStreaming {
				final = true
				if ev.Message.Content != text.String() || ev.Message.Status != store.StatusComplete {
					t.Errorf("SSE text %q, final %+v", text.String(), ev.Message)
				}
			}
		}
	}
}

// callWith posts a call with extra headers and returns the status and body.
func callWith(t *testing.T, base, method, args string, header map[string]string) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", base+"/api/call/"+method, strings.NewReader(args))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(body)
}

// TestHTTPAnswersItsOwnPageOnly: the calls and the events refuse a browser
// request from any page but the one this handler serves (another origin,
// "null", a cross-site or same-site page), so that no web page can read or
// change the conversations and settings through the user's browser.
func TestHTTPAnswersItsOwnPageOnly(t *testing.T) {
	s := newTestService(t, demo(t))
	srv := httptest.NewServer(Handler(s.Service, fstest.MapFS{"index.html": {Data: []byte("<title>Suzuran</title>")}}))
	defer srv.Close()
	for _, header := range []map[string]string{
		{"Origin": "https://app.example"},
		{"Origin": "null"},
		{"Origin": "http://localhost:3000"},
		{"Sec-Fetch-Site": "cross-site"},
		{"Sec-Fetch-Site": "same-site"},
		{"Origin": srv.URL, "Sec-Fetch-Site": "cross-site"},
	} {
		status, _, body := callWith(t, srv.URL, "Conversations", `[""]`, header)
		if status != http.StatusForbidden || !strings.Contains(body, "only the page this server serves") {
			t.Errorf("Conversations with %v: %d %s, want 403 saying why", header, status, body)
		}
		req, _ := http.NewRequest("GET", srv.URL+"/api/events", nil)
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("events with %v: %d, want 403", header, resp.StatusCode)
		}
	}
	for _, header := range []map[string]string{
		nil, // no browser
		{"Origin": srv.URL, "Sec-Fetch-Site": "same-origin"},
		{"Origin": strings.ToUpper(srv.URL)},
	} {
		if status, _, body := callWith(t, srv.URL, "Conversations", `[""]`, header); status != 200 {
			t.Errorf("Conversations with %v: %d %s, want 200", header, status, body)
		}
	}
}

// TestHTTPRefusesAttachFiles: over HTTP a call cannot name files on the
// disk (a browser has no paths; it uploads the content with AttachData);
// nothing is read and no attachment is made.
func TestHTTPRefusesAttachFiles(t *testing.T) {
	s := newTestService(t, demo(t))
	srv := httptest.NewServer(Handler(s.Service, nil))
	defer srv.Close()
	secret := filepath.Join(t.TempDir(), "secret.txt")
	if err := os.WriteFile(secret, []byte("the user's private notes"), 0o600); err != nil {
		t.Fatal(err)
	}
	args, _ := json.Marshal([]any{[]string{secret}})
	status, _, body := callWith(t, srv.URL, "AttachFiles", string(args), nil)
	if status != http.StatusForbidden || !strings.Contains(body, "AttachData") || strings.Contains(body, "secret.txt") {
		t.Errorf("AttachFiles over HTTP: %d %s, want 403 pointing to AttachData", status, body)
	}
	s.attach.mu.Lock()
	pending := len(s.attach.pending)
	s.attach.mu.Unlock()
	if pending != 0 {
		t.Errorf("AttachFiles over HTTP left %d attachments", pending)
	}
	// The browser's way still works.
	args, _ = json.Marshal([]any{"notes.txt", base64.StdEncoding.EncodeToString([]byte("hello"))})
	if status, _, body := callWith(t, srv.URL, "AttachData", string(args), nil); status != 200 || !strings.Contains(body, "notes.txt") {
		t.Errorf("AttachData: %d %s", status, body)
	}
}

// TestHTTPSecurityHeaders: every answer forbids framing (X-Frame-Options
// and CSP frame-ancestors) and carries the CSP. (frontend/e2e checks in
// Chromium that the built app runs under it without a violation.)
func TestHTTPSecurityHeaders(t *testing.T) {
	s := newTestService(t, demo(t))
	srv := httptest.NewServer(Handler(s.Service, fstest.MapFS{"index.html": {Data: []byte("<title>Suzuran</title>")}}))
	defer srv.Close()
	check := func(what string, h http.Header) {
		t.Helper()
		csp := h.Get("Content-Security-Policy")
		if h.Get("X-Frame-Options") != "DENY" || !strings.Contains(csp, "frame-ancestors 'none'") ||
			!strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-") || h.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: X-Frame-Options %q, CSP %q, X-Content-Type-Options %q", what, h.Get("X-Frame-Options"), csp, h.Get("X-Content-Type-Options"))
		}
	}
	resp, err := http.Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	check("GET /", resp.Header)
	_, h, _ := callWith(t, srv.URL, "State", `[]`, nil)
	check("a call", h)
}
