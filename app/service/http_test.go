package service

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
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
		if ev.MessageID != sent.Reply.ID {
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
