// Package soak is the mix of good and bad API requests the soak tests send
// (app/server's TestSoak, and app/service's, where the chat window asks its
// own questions meanwhile), and the client that sends one and checks its
// answer.
package soak

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Request is one kind of request of the soak, with the statuses it may
// get: a good request may meet a full queue (429), never a 5xx.
type Request struct {
	Name    string
	Method  string
	Path    string
	Body    func(i int) string
	Allowed []int
	// Abort cancels the request after the first bytes of the answer, as a
	// client that leaves mid-stream.
	Abort bool
}

// Prompts are few, so that the prefix cache is full after a warm-up and
// the heap measures the server rather than a cache filling up.
var Prompts = []string{"Hello", "What is os.path.join?", "Tell me", "x"}

// MaxBodyBytes is the body limit the server under soak must have for the
// "too large" request to be a 413.
const MaxBodyBytes = 64 << 10

// Requests are the kinds, sent in turn: 9 of the 15 are good requests.
func Requests() []Request {
	prompt := func(i int) string { return Prompts[i%len(Prompts)] }
	ok := []int{200, 429}
	return []Request{
		{Name: "chat", Method: "POST", Path: "/v1/chat/completions", Allowed: ok, Body: func(i int) string {
			return fmt.Sprintf(`{"messages":[{"role":"user","content":%q}],"max_tokens":%d,"seed":%d}`, prompt(i), 1+i%8, i)
		}},
		{Name: "chat stream", Method: "POST", Path: "/v1/chat/completions", Allowed: ok, Body: func(i int) string {
			return fmt.Sprintf(`{"messages":[{"role":"user","content":%q}],"max_tokens":8,"stream":true,"stream_options":{"include_usage":true},"temperature":0}`, prompt(i))
		}},
		{Name: "chat stream abort", Method: "POST", Path: "/v1/chat/completions", Allowed: ok, Abort: true, Body: func(i int) string {
			return fmt.Sprintf(`{"messages":[{"role":"user","content":%q}],"max_tokens":200,"stream":true}`, prompt(i))
		}},
		{Name: "completion", Method: "POST", Path: "/v1/completions", Allowed: ok, Body: func(i int) string {
			return fmt.Sprintf(`{"prompt":%q,"max_tokens":4,"stream":%v}`, prompt(i), i%2 == 0)
		}},
		{Name: "messages stream", Method: "POST", Path: "/v1/messages", Allowed: ok, Body: func(i int) string {
			return fmt.Sprintf(`{"max_tokens":6,"stream":true,"messages":[{"role":"user","content":%q}]}`, prompt(i))
		}},
		{Name: "responses", Method: "POST", Path: "/v1/responses", Allowed: ok, Body: func(i int) string {
			return fmt.Sprintf(`{"input":%q,"max_output_tokens":4}`, prompt(i))
		}},
		{Name: "count_tokens", Method: "POST", Path: "/v1/messages/count_tokens", Allowed: []int{200}, Body: func(i int) string {
			return fmt.Sprintf(`{"messages":[{"role":"user","content":%q}]}`, prompt(i))
		}},
		{Name: "health", Method: "GET", Path: "/health", Allowed: []int{200}},
		{Name: "models", Method: "GET", Path: "/v1/models", Allowed: []int{200}},
		{Name: "bad JSON", Method: "POST", Path: "/v1/chat/completions", Allowed: []int{400}, Body: func(int) string { return `{"messages":[` }},
		{Name: "bad field", Method: "POST", Path: "/v1/messages", Allowed: []int{400}, Body: func(int) string { return `{"messages":[],"max_tokens":"many"}` }},
		{Name: "unknown model", Method: "POST", Path: "/v1/chat/completions", Allowed: []int{404}, Body: func(int) string {
			return `{"model":"gpt-9","messages":[{"role":"user","content":"x"}]}`
		}},
		{Name: "too large", Method: "POST", Path: "/v1/completions", Allowed: []int{413}, Body: func(int) string {
			return `{"prompt":"` + strings.Repeat("a", 70_000) + `"}`
		}},
		{Name: "unknown route", Method: "GET", Path: "/v1/engines", Allowed: []int{404}},
		{Name: "wrong method", Method: "DELETE", Path: "/v1/messages", Allowed: []int{405}},
	}
}

// Send sends request i of the mix (kinds in turn) to the server at base
// and checks the answer: an allowed status, and a stream that ended
// properly. status, when set, is told every status received.
func Send(client *http.Client, base string, i int, status func(int)) error {
	kinds := Requests()
	kind := kinds[i%len(kinds)]
	var body io.Reader
	if kind.Body != nil {
		body = strings.NewReader(kind.Body(i))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, kind.Method, base+kind.Path, body)
	res, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %v", kind.Name, err)
	}
	defer res.Body.Close()
	if status != nil {
		status(res.StatusCode)
	}
	allowed := false
	for _, s := range kind.Allowed {
		allowed = allowed || res.StatusCode == s
	}
	if kind.Abort && res.StatusCode == 200 {
		buf := make([]byte, 64)
		io.ReadFull(res.Body, buf)
		cancel()
		return nil
	}
	data, err := io.ReadAll(res.Body)
	if err != nil {
		return fmt.Errorf("%s: reading: %v", kind.Name, err)
	}
	if !allowed {
		return fmt.Errorf("%s: status %d, want one of %v: %s", kind.Name, res.StatusCode, kind.Allowed, data)
	}
	if res.StatusCode == 200 && res.Header.Get("Content-Type") == "text/event-stream" &&
		!bytes.Contains(data, []byte("[DONE]")) && !bytes.Contains(data, []byte("message_stop")) && !bytes.Contains(data, []byte("response.")) {
		return fmt.Errorf("%s: the stream did not end properly: %s", kind.Name, data)
	}
	return nil
}
