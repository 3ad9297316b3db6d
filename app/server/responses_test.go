package server

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/suzuran-app/suzuran/engine"
)

func TestResponses(t *testing.T) {
	ts := startServer(t, loadModel(t, fixtureDir, engine.LoadOptions{}), nil)
	body := map[string]any{"model": "mlx-4bit", "input": "Hi", "instructions": "Be brief.", "max_output_tokens": 8,
		"temperature": 0.7, "seed": 3, "reasoning": map[string]any{"effort": "none"}}
	res := post(t, ts.url+"/v1/responses", body)
	if res.status != 200 {
		t.Fatalf("%d %s", res.status, res.body)
	}
	v := res.json(t)
	if v["object"] != "response" || !strings.HasPrefix(v["id"].(string), "resp_") || v["status"] != "incomplete" ||
		path(v, "incomplete_details", "reason") != "max_output_tokens" || path(v, "usage", "output_tokens") != 8.0 {
		t.Errorf("response: %s", res.body)
	}
	if path(v, "output", 0, "type") != "message" || path(v, "output", 0, "content", 0, "type") != "output_text" {
		t.Errorf("output: %v", v["output"])
	}
	text := path(v, "output", 0, "content", 0, "text").(string)

	body["stream"] = true
	res = post(t, ts.url+"/v1/responses", body)
	events := readSSE(t, res.body)
	var streamed strings.Builder
	var names []string
	for _, ev := range events {
		d := decodeEvent(t, ev)
		names = append(names, ev.name)
		if ev.name == "response.output_text.delta" {
			streamed.WriteString(d["delta"].(string))
		}
	}
	if names[0] != "response.created" || names[len(names)-1] != "response.incomplete" {
		t.Errorf("events %v", names)
	}
	if streamed.String() != text {
		t.Errorf("streamed %q, whole %q with the same seed", streamed.String(), text)
	}

	// A whole conversation in items: messages, a call and its output.
	items := []any{
		map[string]any{"role": "user", "content": []any{map[string]any{"type": "input_text", "text": "Weather?"}}},
		map[string]any{"type": "reasoning", "summary": []any{map[string]any{"type": "summary_text", "text": "call it"}}},
		map[string]any{"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": `{"city":"Paris"}`},
		map[string]any{"type": "function_call_output", "call_id": "c1", "output": "sunny"},
	}
	tools := []any{map[string]any{"type": "function", "name": "get_weather", "parameters": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}}}
	res = post(t, ts.url+"/v1/responses", map[string]any{"input": items, "tools": tools, "max_output_tokens": 2})
	if res.status != 200 {
		t.Errorf("items: %d %s", res.status, res.body)
	}
	var req responsesRequest
	decodeJSON([]byte(`{"input":[{"role":"user","content":"Weather?"},{"type":"reasoning","summary":[{"type":"summary_text","text":"call it"}]},{"type":"function_call","call_id":"c1","name":"get_weather","arguments":"{\"city\":\"Paris\"}"},{"type":"function_call_output","call_id":"c1","output":"sunny"}]}`), &req)
	turn, err := req.turn()
	if err != nil {
		t.Fatal(err)
	}
	if len(turn.messages) != 3 || turn.messages[1].Role != "assistant" || len(turn.messages[1].ToolCalls) != 1 ||
		turn.messages[1].ReasoningContent == nil || turn.messages[2].Role != "tool" || turn.messages[2].ToolCallID != "c1" {
		t.Errorf("conversation %+v", turn.messages)
	}
}

func TestResponsesErrors(t *testing.T) {
	ts := startServer(t, loadModel(t, fixtureDir, engine.LoadOptions{}), nil)
	for _, tc := range []struct {
		name  string
		body  map[string]any
		param string
	}{
		{"store", map[string]any{"input": "x", "store": true}, "store"},
		{"previous_response_id", map[string]any{"input": "x", "previous_response_id": "resp_1"}, "previous_response_id"},
		{"no input", map[string]any{}, "input"},
		{"unknown item", map[string]any{"input": []any{map[string]any{"type": "computer_call"}}}, "input[0].type"},
		{"forced builtin tool", map[string]any{"input": "x", "tools": []any{map[string]any{"type": "web_search"}}, "tool_choice": map[string]any{"type": "web_search"}}, "tool_choice"},
		{"forced namespace tool", map[string]any{"input": "x", "tools": []any{map[string]any{"type": "namespace", "name": "mcp"}}, "tool_choice": map[string]any{"type": "function", "name": "mcp"}}, "tool_choice"},
		{"bad format", map[string]any{"input": "x", "text": map[string]any{"format": map[string]any{"type": "yaml"}}}, "text.format.type"},
		{"max_output_tokens 0", map[string]any{"input": "x", "max_output_tokens": 0}, "max_output_tokens"},
		{"top_logprobs over 20", map[string]any{"input": "x", "top_logprobs": 21}, "top_logprobs"},
		{"top_logprobs negative", map[string]any{"input": "x", "top_logprobs": -1}, "top_logprobs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkError(t, post(t, ts.url+"/v1/responses", tc.body), 400, tc.param)
		})
	}
	// store false is what stateless clients send: fine.
	if res := post(t, ts.url+"/v1/responses", map[string]any{"input": "x", "store": false, "max_output_tokens": 1}); res.status != 200 {
		t.Errorf("store false: %d %s", res.status, res.body)
	}
}

// TestResponsesCodex: a request shaped as Codex sends it: instructions, a
// developer message and a user message in input, tools of types the server
// cannot run beside a function tool. The other tools are left out with a
// log line, the system texts become one system message at the start, and
// the request is answered.
func TestResponsesCodex(t *testing.T) {
	ts := startServer(t, loadModel(t, fixtureDir, engine.LoadOptions{}), nil)
	body := map[string]any{"model": "mlx-4bit", "instructions": "You are Codex.", "max_output_tokens": 4, "temperature": 0, "store": false,
		"input": []any{
			map[string]any{"type": "message", "role": "developer", "content": []any{map[string]any{"type": "input_text", "text": "Sandbox: read-only."}}},
			map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": "List the files."}}},
			map[string]any{"type": "message", "role": "developer", "content": "Be brief."},
		},
		"tools": []any{
			map[string]any{"type": "function", "name": "shell", "parameters": map[string]any{"type": "object", "properties": map[string]any{"command": map[string]any{"type": "string"}}}},
			map[string]any{"type": "namespace", "name": "mcp__docs", "tools": []any{}},
			map[string]any{"type": "web_search"},
			map[string]any{"type": "custom", "name": "apply_patch", "format": map[string]any{"type": "grammar"}},
		},
		"tool_choice": "auto", "parallel_tool_calls": false}
	res := post(t, ts.url+"/v1/responses", body)
	if res.status != 200 {
		t.Fatalf("%d %s", res.status, res.body)
	}
	logs := ts.logs.String()
	for _, want := range []string{`tools[1] \"namespace\" \"mcp__docs\"`, `tools[2] \"web_search\"`, `tools[3] \"custom\" \"apply_patch\"`} {
		if !strings.Contains(logs, want) {
			t.Errorf("the log does not name %s:\n%s", want, logs)
		}
	}
	var req responsesRequest
	data, _ := json.Marshal(body)
	if err := decodeJSON(data, &req); err != nil {
		t.Fatal(err)
	}
	turn, err := req.turn()
	if err != nil {
		t.Fatal(err)
	}
	if len(turn.messages) != 2 || turn.messages[0].Role != "system" || turn.messages[0].Content != "You are Codex.\n\nSandbox: read-only.\n\nBe brief." ||
		turn.messages[1].Role != "user" || len(turn.tools) != 1 {
		t.Errorf("messages %+v, %d tools", turn.messages, len(turn.tools))
	}
}
