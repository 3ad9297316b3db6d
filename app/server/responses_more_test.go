package server

import (
	"strings"
	"testing"

	"github.com/suzuran-app/suzuran/engine"
)

// twoTools are two function tools in the Responses API's shape.
var twoTools = []any{
	map[string]any{"type": "function", "name": "get_weather", "parameters": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []any{"city"}}},
	map[string]any{"type": "function", "name": "get_time", "parameters": map[string]any{"type": "object", "properties": map[string]any{"zone": map[string]any{"type": "string"}}, "required": []any{"zone"}}},
}

// TestResponsesToolChoiceForms: tool_choice "required" forces a call; an
// allowed_tools choice (what LangChain passes through unchanged, and what
// OpenAI documents for narrowing the tools) with mode required forces a
// call of one of the tools it names, on both APIs; one naming no tool of
// the request is a 400.
func TestResponsesToolChoiceForms(t *testing.T) {
	ts := startServer(t, loadModel(t, fixtureDir, engine.LoadOptions{}), nil)
	call := func(choice any) (string, response) {
		res := post(t, ts.url+"/v1/responses", map[string]any{"input": "What time is it in Paris?", "tools": twoTools, "tool_choice": choice,
			"max_output_tokens": 200, "reasoning": map[string]any{"effort": "none"}, "seed": 1})
		if res.status != 200 {
			return "", res
		}
		for _, item := range path(res.json(t), "output").([]any) {
			if path(item, "type") == "function_call" {
				return path(item, "name").(string), res
			}
		}
		return "", res
	}
	if name, res := call("required"); name == "" {
		t.Errorf("tool_choice required made no call: %d %s", res.status, res.body)
	}
	for i := range 3 {
		choice := map[string]any{"type": "allowed_tools", "mode": "required", "tools": []any{map[string]any{"type": "function", "name": "get_time"}}}
		if name, res := call(choice); name != "get_time" {
			t.Errorf("allowed_tools [get_time], run %d: called %q: %d %s", i, name, res.status, res.body)
		}
	}
	chat := post(t, ts.url+"/v1/chat/completions", map[string]any{"messages": userMessage("Weather?"), "max_tokens": 200, "chat_template_kwargs": map[string]any{"enable_thinking": false},
		"tools": []any{
			map[string]any{"type": "function", "function": map[string]any{"name": "get_weather", "parameters": map[string]any{"type": "object"}}},
			map[string]any{"type": "function", "function": map[string]any{"name": "get_time", "parameters": map[string]any{"type": "object"}}}},
		"tool_choice": map[string]any{"type": "allowed_tools", "allowed_tools": map[string]any{"mode": "required", "tools": []any{map[string]any{"type": "function", "function": map[string]any{"name": "get_weather"}}}}}})
	if got := path(chat.json(t), "choices", 0, "message", "tool_calls", 0, "function", "name"); got != "get_weather" {
		t.Errorf("chat allowed_tools [get_weather]: %d %s", chat.status, chat.body)
	}
	_, res := call(map[string]any{"type": "allowed_tools", "mode": "required", "tools": []any{map[string]any{"type": "function", "name": "nope"}}})
	checkError(t, res, 400, "tool_choice")
}

// TestResponsesLogprobs: top_logprobs (or include
// message.output_text.logprobs) puts the answer's tokens' logprobs, each
// with that many alternatives, on its output_text part and on each delta.
func TestResponsesLogprobs(t *testing.T) {
	ts := startServer(t, loadModel(t, fixtureDir, engine.LoadOptions{}), nil)
	body := map[string]any{"input": "Hi", "max_output_tokens": 8, "top_logprobs": 3, "temperature": 0, "reasoning": map[string]any{"effort": "none"}}
	res := post(t, ts.url+"/v1/responses", body)
	v := res.json(t)
	var part any
	for _, item := range path(v, "output").([]any) {
		if path(item, "type") == "message" {
			part = path(item, "content", 0)
		}
	}
	entries, _ := path(part, "logprobs").([]any)
	if len(entries) == 0 {
		t.Fatalf("no logprobs on the output_text: %s", res.body)
	}
	var text strings.Builder
	for _, e := range entries {
		lp, _ := path(e, "logprob").(float64)
		if top, _ := path(e, "top_logprobs").([]any); len(top) != 3 || lp > 0 {
			t.Errorf("entry %v: want 3 alternatives and a logprob ≤ 0", e)
		}
		text.WriteString(path(e, "token").(string))
	}
	if got := path(part, "text"); text.String() != got {
		t.Errorf("the entries' tokens spell %q, the text is %q", text.String(), got)
	}

	body["stream"] = true
	n := 0
	for _, ev := range readSSE(t, post(t, ts.url+"/v1/responses", body).body) {
		if ev.name == "response.output_text.delta" {
			lps, _ := path(decodeEvent(t, ev), "logprobs").([]any)
			n += len(lps)
		}
	}
	if n != len(entries) {
		t.Errorf("the stream's deltas carry %d logprobs, the answer %d", n, len(entries))
	}
	// Without asking, none.
	delete(body, "stream")
	delete(body, "top_logprobs")
	if strings.Contains(string(post(t, ts.url+"/v1/responses", body).body), `"logprobs"`) {
		t.Error("logprobs sent unasked")
	}
}

// TestResponsesReasoningSummary: a reasoning item carries its text in its
// summary too (what @ai-sdk/openai reads), and the stream sends it as
// reasoning_summary_text deltas between a summary part's added and done.
func TestResponsesReasoningSummary(t *testing.T) {
	ts := startServer(t, loadModel(t, fixtureDir, engine.LoadOptions{}), nil)
	body := map[string]any{"input": "Think.", "max_output_tokens": 12, "reasoning": map[string]any{"effort": "high"}, "seed": 4}
	v := post(t, ts.url+"/v1/responses", body).json(t)
	reasoning := path(v, "output", 0)
	summary, _ := path(reasoning, "summary", 0, "text").(string)
	if path(reasoning, "type") != "reasoning" || summary == "" || summary != path(reasoning, "content", 0, "text") || path(reasoning, "summary", 0, "type") != "summary_text" {
		t.Fatalf("reasoning item %v", reasoning)
	}
	body["stream"] = true
	var names []string
	var deltas strings.Builder
	for _, ev := range readSSE(t, post(t, ts.url+"/v1/responses", body).body) {
		if strings.HasPrefix(ev.name, "response.reasoning_summary") {
			names = append(names, ev.name)
			if ev.name == "response.reasoning_summary_text.delta" {
				deltas.WriteString(path(decodeEvent(t, ev), "delta").(string))
			}
		}
	}
	if len(names) < 4 || names[0] != "response.reasoning_summary_part.added" || names[len(names)-1] != "response.reasoning_summary_part.done" || deltas.String() != summary {
		t.Errorf("summary events %v spell %q, want %q", names, deltas.String(), summary)
	}
}

// TestTemplateRefusalParam: a conversation the chat template refuses names
// the field that holds it (input on the Responses API) and the template's
// words, not its file's path.
func TestTemplateRefusalParam(t *testing.T) {
	ts := startServer(t, loadModel(t, fixtureDir, engine.LoadOptions{}), nil)
	onlyAssistant := []any{map[string]any{"role": "assistant", "content": "hi"}}
	for url, param := range map[string]string{"/v1/responses": "input", "/v1/chat/completions": "messages"} {
		res := post(t, ts.url+url, map[string]any{"input": onlyAssistant, "messages": onlyAssistant})
		checkError(t, res, 400, param)
		if msg := path(res.json(t), "error", "message").(string); strings.Contains(msg, ".jinja") || !strings.Contains(msg, "No user query") {
			t.Errorf("%s: %q", url, msg)
		}
	}
}
