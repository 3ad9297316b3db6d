package server

import (
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/suzuran-app/suzuran/engine"
)

var updateWireKeys = flag.Bool("update-wire-keys", false, "rewrite testdata/wire/keys.json from the server's answers")

// wireKeysFile holds, for each request of TestWireKeys, the set of keys of
// every object of the answer (testdata/wire/README.md).
var wireKeysFile = filepath.Join("testdata", "wire", "keys.json")

// wireCase is one request whose answer's shape is pinned.
type wireCase struct {
	name, method, path string
	body               map[string]any
}

func wireCases() []wireCase {
	on := map[string]any{"enable_thinking": true}
	off := map[string]any{"enable_thinking": false}
	msgs := userMessage("Hello")
	chatTool := []any{map[string]any{"type": "function", "function": map[string]any{"name": "f", "parameters": map[string]any{"type": "object"}}}}
	respTool := []any{map[string]any{"type": "function", "name": "f", "parameters": map[string]any{"type": "object"}}}
	antTool := []any{map[string]any{"name": "f", "input_schema": map[string]any{"type": "object"}}}
	chat := func(stream bool, extra map[string]any) map[string]any {
		b := map[string]any{"messages": msgs, "max_tokens": 6, "temperature": 0, "stream": stream}
		for k, v := range extra {
			b[k] = v
		}
		return b
	}
	resp := func(stream bool, extra map[string]any) map[string]any {
		b := map[string]any{"input": "Hello", "max_output_tokens": 6, "temperature": 0, "stream": stream, "instructions": "Be brief."}
		for k, v := range extra {
			b[k] = v
		}
		return b
	}
	msg := func(stream bool, extra map[string]any) map[string]any {
		b := map[string]any{"messages": msgs, "max_tokens": 6, "temperature": 0, "stream": stream}
		for k, v := range extra {
			b[k] = v
		}
		return b
	}
	var cases []wireCase
	for _, stream := range []bool{false, true} {
		mode := "json"
		if stream {
			mode = "stream"
		}
		add := func(name, path string, body map[string]any) {
			cases = append(cases, wireCase{name: name + " " + mode, method: http.MethodPost, path: path, body: body})
		}
		add("chat thinking logprobs", "/v1/chat/completions", chat(stream, map[string]any{"chat_template_kwargs": on, "logprobs": true, "top_logprobs": 2,
			"stream_options": map[string]any{"include_usage": true}}))
		add("chat text", "/v1/chat/completions", chat(stream, map[string]any{"chat_template_kwargs": off}))
		add("chat tool call", "/v1/chat/completions", chat(stream, map[string]any{"chat_template_kwargs": off, "tools": chatTool, "tool_choice": "required", "max_tokens": 64}))
		add("completions logprobs", "/v1/completions", map[string]any{"prompt": "Hello", "max_tokens": 4, "temperature": 0, "stream": stream, "logprobs": 2,
			"stream_options": map[string]any{"include_usage": true}})
		add("completions plain", "/v1/completions", map[string]any{"prompt": "Hello", "max_tokens": 4, "temperature": 0, "stream": stream})
		add("responses reasoning", "/v1/responses", resp(stream, map[string]any{"reasoning": map[string]any{"effort": "medium"}}))
		add("responses text logprobs", "/v1/responses", resp(stream, map[string]any{"reasoning": map[string]any{"effort": "none"}, "top_logprobs": 2}))
		add("responses tool call", "/v1/responses", resp(stream, map[string]any{"reasoning": map[string]any{"effort": "none"}, "tools": respTool, "tool_choice": "required",
			"max_output_tokens": 64}))
		add("messages thinking", "/v1/messages", msg(stream, map[string]any{"thinking": map[string]any{"type": "enabled", "budget_tokens": 1024}, "max_tokens": 1030}))
		add("messages text", "/v1/messages", msg(stream, map[string]any{"thinking": map[string]any{"type": "disabled"}}))
		add("messages tool use", "/v1/messages", msg(stream, map[string]any{"thinking": map[string]any{"type": "disabled"}, "tools": antTool,
			"tool_choice": map[string]any{"type": "any"}, "max_tokens": 64}))
		add("chat error", "/v1/chat/completions", map[string]any{"messages": []any{}, "stream": stream})
		add("responses error", "/v1/responses", map[string]any{"input": "x", "max_output_tokens": 0, "stream": stream})
		add("messages error", "/v1/messages", map[string]any{"messages": msgs, "stream": stream})
	}
	cases = append(cases,
		wireCase{name: "count_tokens", method: http.MethodPost, path: "/v1/messages/count_tokens", body: map[string]any{"messages": msgs}},
		wireCase{name: "models", method: http.MethodGet, path: "/v1/models"},
		wireCase{name: "model", method: http.MethodGet, path: "/v1/models/mlx-4bit"},
		wireCase{name: "model not found", method: http.MethodGet, path: "/v1/models/other"},
		wireCase{name: "health", method: http.MethodGet, path: "/health"},
	)
	return cases
}

// TestWireKeys pins the shape of every route's answers, streamed and not:
// for each request, the exact set of keys of each object, found by its
// place in the answer (an SSE event's name, the keys leading to it, and
// the "type" of each object on the way). A key that appears or disappears
// fails it. The thinking cases use the noise model's reasoning (it never
// closes its think block); the tool cases force a call with constrained
// sampling.
func TestWireKeys(t *testing.T) {
	if constrain == nil {
		t.Fatal("the forced tool calls need constrained sampling, which this build lacks")
	}
	ts := startServer(t, loadModel(t, fixtureDir, engine.LoadOptions{}), nil)
	got := map[string][]string{}
	for _, c := range wireCases() {
		var body any
		if c.body != nil {
			body = c.body
		}
		res := do(t, c.method, ts.url+c.path, body, nil)
		got[c.name] = answerKeys(t, res)
	}
	if *updateWireKeys {
		data, _ := json.MarshalIndent(got, "", "  ")
		if err := os.WriteFile(wireKeysFile, append(data, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	data, err := os.ReadFile(wireKeysFile)
	if err != nil {
		t.Fatal(err)
	}
	var want map[string][]string
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatal(err)
	}
	for name := range want {
		if _, ok := got[name]; !ok {
			t.Errorf("%s: pinned in %s but not requested", name, wireKeysFile)
		}
	}
	for name, keys := range got {
		w, ok := want[name]
		if !ok {
			t.Errorf("%s: not pinned in %s", name, wireKeysFile)
			continue
		}
		for _, k := range keys {
			if !slices.Contains(w, k) {
				t.Errorf("%s: new shape %s", name, k)
			}
		}
		for _, k := range w {
			if !slices.Contains(keys, k) {
				t.Errorf("%s: shape gone %s", name, k)
			}
		}
	}
}

// answerKeys lists the shapes of an answer's objects: "status 200",
// then one "PLACE {key,…}" per distinct shape, sorted.
func answerKeys(t *testing.T, res response) []string {
	t.Helper()
	seen := map[string]bool{fmt.Sprintf("status %d", res.status): true}
	if strings.HasPrefix(res.header.Get("Content-Type"), "text/event-stream") {
		for _, ev := range readSSE(t, res.body) {
			place := "data"
			if ev.name != "" {
				place = "event " + ev.name
			}
			if ev.data == "[DONE]" {
				seen[place+" [DONE]"] = true
				continue
			}
			var v any
			if err := json.Unmarshal([]byte(ev.data), &v); err != nil {
				t.Fatalf("event %s: %v: %s", ev.name, err, ev.data)
			}
			shapes(v, place, seen)
		}
	} else {
		var v any
		if err := json.Unmarshal(res.body, &v); err != nil {
			t.Fatalf("status %d, not JSON: %v: %s", res.status, err, res.body)
		}
		shapes(v, "body", seen)
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// shapes records the key set of each object under v. Objects whose keys
// are data, not names (a tool call's input, the legacy completions'
// top_logprobs maps from token text), count as values.
func shapes(v any, place string, seen map[string]bool) {
	switch x := v.(type) {
	case map[string]any:
		if typ, ok := x["type"].(string); ok {
			place += "(" + typ + ")"
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		seen[place+" {"+strings.Join(keys, ",")+"}"] = true
		for _, k := range keys {
			if k == "input" && strings.Contains(place, "(tool_use)") {
				continue
			}
			if k == "top_logprobs" && strings.HasSuffix(place, ".logprobs") {
				if _, legacy := x["text_offset"]; legacy {
					continue
				}
			}
			shapes(x[k], place+"."+k, seen)
		}
	case []any:
		for _, e := range x {
			shapes(e, place+"[]", seen)
		}
	}
}
