package server

import (
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
		{"builtin tool", map[string]any{"input": "x", "tools": []any{map[string]any{"type": "web_search"}}}, "tools[0].type"},
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
