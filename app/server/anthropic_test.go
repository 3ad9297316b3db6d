package server

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/suzuran-app/suzuran/engine"
)

func TestMessages(t *testing.T) {
	ts := startServer(t, loadModel(t, fixtureDir, engine.LoadOptions{}), nil)
	res := post(t, ts.url+"/v1/messages", map[string]any{
		"model": "claude-sonnet-4-5", "max_tokens": 6, "temperature": 0,
		"system":   []any{map[string]any{"type": "text", "text": "Be brief."}},
		"messages": []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "Hi"}}}},
	})
	if res.status != 200 {
		t.Fatalf("%d %s", res.status, res.body)
	}
	v := res.json(t)
	if v["type"] != "message" || v["role"] != "assistant" || !strings.HasPrefix(v["id"].(string), "msg_") || v["model"] != "mlx-4bit" {
		t.Errorf("envelope: %s", res.body)
	}
	if v["stop_reason"] != "max_tokens" || path(v, "usage", "output_tokens") != 6.0 || path(v, "usage", "input_tokens") == 0.0 {
		t.Errorf("stop_reason/usage: %s", res.body)
	}
	// As the Anthropic API: no thinking unless the request asks for it,
	// whatever the template's default (which thinks).
	if path(v, "content", 0, "type") != "text" || len(v["content"].([]any)) != 1 {
		t.Errorf("a request without thinking: %s", res.body)
	}
	for _, thinking := range []string{"disabled", "adaptive", "enabled"} {
		got := post(t, ts.url+"/v1/messages", map[string]any{"max_tokens": 6, "temperature": 0, "thinking": map[string]any{"type": thinking},
			"messages": userMessage("Hi")}).json(t)
		// Adaptive is the model's default: this one thinks (the template's
		// default), the demo model does not (TestMessagesAdaptiveDemo).
		want := thinking != "disabled"
		if thinks := path(got, "content", 0, "type") == "thinking"; thinks != want {
			t.Errorf("thinking %s: %v", thinking, got["content"])
		}
	}
}

// TestMessagesAdaptiveDemo: the demo model cannot think (serve and the app
// set the thinking default off for it), so adaptive thinking answers
// without a thinking block, as it does without the field.
func TestMessagesAdaptiveDemo(t *testing.T) {
	off := false
	ts := startServer(t, loadModel(t, demoDir, engine.LoadOptions{}), func(c *Config) { c.ThinkingDefault = &off })
	for _, body := range []map[string]any{
		{"max_tokens": 8, "temperature": 0, "messages": userMessage("Hi"), "thinking": map[string]any{"type": "adaptive"}},
		{"max_tokens": 8, "temperature": 0, "messages": userMessage("Hi")},
	} {
		res := post(t, ts.url+"/v1/messages", body)
		v := res.json(t)
		if res.status != 200 || path(v, "content", 0, "type") != "text" || len(v["content"].([]any)) != 1 {
			t.Errorf("%v: %d %s", body["thinking"], res.status, res.body)
		}
	}
}

// TestMessagesForcedTool: a forced tool (tool_choice tool or any) answers
// with the call from its first token, thinking or not asked; with thinking
// enabled it is refused as Anthropic refuses it.
func TestMessagesForcedTool(t *testing.T) {
	ts := startServer(t, loadModel(t, fixtureDir, engine.LoadOptions{}), nil)
	tools := []any{map[string]any{"name": "get_weather", "description": "Weather in a city",
		"input_schema": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string", "enum": []any{"Paris", "Berlin"}}}, "required": []any{"city"}}}}
	for _, choice := range []map[string]any{{"type": "tool", "name": "get_weather"}, {"type": "any"}} {
		for _, thinking := range []any{nil, map[string]any{"type": "adaptive"}, map[string]any{"type": "disabled"}} {
			body := map[string]any{"max_tokens": 200, "temperature": 0, "messages": userMessage("Weather in Paris?"), "tools": tools, "tool_choice": choice, "stream": true}
			if thinking != nil {
				body["thinking"] = thinking
			}
			res := post(t, ts.url+"/v1/messages", body)
			if res.status != 200 {
				t.Fatalf("%v %v: %d %s", choice, thinking, res.status, res.body)
			}
			var starts []any
			for _, ev := range readSSE(t, res.body) {
				if ev.name == "content_block_start" {
					starts = append(starts, path(decodeEvent(t, ev), "content_block", "type"))
				}
			}
			if len(starts) != 1 || starts[0] != "tool_use" {
				t.Errorf("%v %v: blocks %v, want one tool_use", choice, thinking, starts)
			}
			if !strings.Contains(string(res.body), `"stop_reason":"tool_use"`) {
				t.Errorf("%v %v: no stop_reason tool_use: %s", choice, thinking, res.body)
			}
		}
		res := post(t, ts.url+"/v1/messages", map[string]any{"max_tokens": 2000, "messages": userMessage("x"), "tools": tools, "tool_choice": choice,
			"thinking": map[string]any{"type": "enabled", "budget_tokens": 1024}})
		v := res.json(t)
		if res.status != 400 || v["type"] != "error" || path(v, "error", "type") != "invalid_request_error" ||
			!strings.Contains(path(v, "error", "message").(string), "tool_choice forces tool use") {
			t.Errorf("%v with thinking enabled: %d %s", choice, res.status, res.body)
		}
	}
}

// TestMessagesSystemInMessages: system messages inside messages (Claude
// Code sends them beside the top-level system) join the one system message
// at the start, in order, and the request is answered.
func TestMessagesSystemInMessages(t *testing.T) {
	body := `{"max_tokens": 4, "temperature": 0, "system": [{"type": "text", "text": "First."}], "messages": [
		{"role": "system", "content": "Second."},
		{"role": "user", "content": "Hi"},
		{"role": "assistant", "content": "Hello."},
		{"role": "system", "content": [{"type": "text", "text": "Third."}]},
		{"role": "user", "content": "Again"}],
		"context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
		"metadata": {"user_id": "u"}, "output_config": {"effort": "medium"}, "thinking": {"type": "adaptive"}}`
	var req messagesRequest
	if err := decodeJSON([]byte(body), &req); err != nil {
		t.Fatal(err)
	}
	turn, err := req.turn(false)
	if err != nil {
		t.Fatal(err)
	}
	var roles []string
	for _, m := range turn.messages {
		roles = append(roles, m.Role)
	}
	if strings.Join(roles, ",") != "system,user,assistant,user" || turn.messages[0].Content != "First.\n\nSecond.\n\nThird." {
		t.Errorf("roles %v, system %q", roles, turn.messages[0].Content)
	}
	ts := startServer(t, loadModel(t, fixtureDir, engine.LoadOptions{}), nil)
	res := post(t, ts.url+"/v1/messages", json.RawMessage(body))
	if res.status != 200 {
		t.Errorf("%d %s", res.status, res.body)
	}
}

func TestMessagesStream(t *testing.T) {
	ts := startServer(t, loadModel(t, fixtureDir, engine.LoadOptions{}), nil)
	body := map[string]any{"max_tokens": 10, "temperature": 0.8, "seed": 5, "messages": userMessage("Hi")}
	whole := post(t, ts.url+"/v1/messages", body).json(t)
	body["stream"] = true
	res := post(t, ts.url+"/v1/messages", body)
	events := readSSE(t, res.body)
	var names []string
	blocks := map[int]*strings.Builder{}
	blockTypes := map[int]string{}
	open := -1
	var stopReason any
	for _, ev := range events {
		v := decodeEvent(t, ev)
		if v["type"] != ev.name {
			t.Fatalf("event %q carries type %v", ev.name, v["type"])
		}
		if ev.name != "content_block_delta" && ev.name != "ping" {
			names = append(names, ev.name)
		}
		switch ev.name {
		case "content_block_start":
			if open != -1 {
				t.Fatalf("block %v started while %d is open", v["index"], open)
			}
			open = int(v["index"].(float64))
			blocks[open] = &strings.Builder{}
			blockTypes[open] = path(v, "content_block", "type").(string)
		case "content_block_delta":
			if int(v["index"].(float64)) != open {
				t.Fatalf("delta for block %v while %d is open", v["index"], open)
			}
			d := v["delta"].(map[string]any)
			switch d["type"] {
			case "text_delta":
				blocks[open].WriteString(d["text"].(string))
			case "thinking_delta":
				blocks[open].WriteString(d["thinking"].(string))
			default:
				t.Fatalf("delta type %v", d["type"])
			}
		case "content_block_stop":
			open = -1
		case "message_delta":
			stopReason = path(v, "delta", "stop_reason")
			if path(v, "usage", "output_tokens") != 10.0 {
				t.Errorf("message_delta usage: %v", v["usage"])
			}
		}
	}
	if names[0] != "message_start" || names[len(names)-1] != "message_stop" || names[len(names)-2] != "message_delta" {
		t.Errorf("event sequence %v", names)
	}
	if stopReason != "max_tokens" {
		t.Errorf("stop_reason %v", stopReason)
	}
	// The streamed blocks are the whole answer's, with the same seed.
	for i, block := range whole["content"].([]any) {
		b := block.(map[string]any)
		text, _ := b["text"].(string)
		if b["type"] == "thinking" {
			text = b["thinking"].(string)
		}
		if blocks[i] == nil || blockTypes[i] != b["type"] || blocks[i].String() != text {
			t.Errorf("block %d: streamed %q %q, whole %v %q", i, blockTypes[i], blocks[i], b["type"], text)
		}
	}
}

func TestMessagesStopSequence(t *testing.T) {
	ts := startServer(t, loadModel(t, fixtureDir, engine.LoadOptions{}), nil)
	body := map[string]any{"max_tokens": 20, "temperature": 0, "thinking": map[string]any{"type": "disabled"}, "messages": userMessage("x")}
	whole := post(t, ts.url+"/v1/messages", body).json(t)
	text := path(whole, "content", 0, "text").(string)
	stop := asciiStop(t, text)
	body["stop_sequences"] = []string{stop}
	v := post(t, ts.url+"/v1/messages", body).json(t)
	if v["stop_reason"] != "stop_sequence" || v["stop_sequence"] != stop || path(v, "content", 0, "text") != text[:strings.Index(text, stop)] {
		t.Errorf("stop %q in %q: %v %v %q", stop, text, v["stop_reason"], v["stop_sequence"], path(v, "content", 0, "text"))
	}
}

func TestCountTokens(t *testing.T) {
	ts := startServer(t, loadModel(t, fixtureDir, engine.LoadOptions{}), nil)
	body := map[string]any{"model": "claude-haiku-4-5", "messages": userMessage("Hi there"), "system": "Be brief."}
	v := post(t, ts.url+"/v1/messages/count_tokens", body).json(t)
	n, ok := v["input_tokens"].(float64)
	if !ok || n < 5 {
		t.Fatalf("count_tokens: %v", v)
	}
	body["max_tokens"] = 1
	m := post(t, ts.url+"/v1/messages", body).json(t)
	if got := path(m, "usage", "input_tokens").(float64) + path(m, "usage", "cache_read_input_tokens").(float64); got != n {
		t.Errorf("count_tokens %v, the request's input %v", n, got)
	}
}

func TestMessagesErrors(t *testing.T) {
	ts := startServer(t, loadModel(t, fixtureDir, engine.LoadOptions{}), nil)
	msgs := userMessage("x")
	for _, tc := range []struct {
		name   string
		body   any
		status int
	}{
		{"no max_tokens", map[string]any{"messages": msgs}, 400},
		{"not JSON", "{", 400},
		{"system messages only", map[string]any{"max_tokens": 1, "messages": []any{map[string]any{"role": "system", "content": "x"}}}, 400},
		{"unknown role", map[string]any{"max_tokens": 1, "messages": []any{map[string]any{"role": "tool", "content": "x"}}}, 400},
		{"image block", map[string]any{"max_tokens": 1, "messages": []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "image", "source": map[string]any{}}}}}}, 400},
		{"server tool", map[string]any{"max_tokens": 1, "messages": msgs, "tools": []any{map[string]any{"type": "web_search_20250305", "name": "web_search"}}}, 400},
		{"tool without schema", map[string]any{"max_tokens": 1, "messages": msgs, "tools": []any{map[string]any{"name": "f"}}}, 400},
		{"forced unknown tool", map[string]any{"max_tokens": 1, "messages": msgs, "tool_choice": map[string]any{"type": "tool", "name": "g"}}, 400},
		{"bad thinking", map[string]any{"max_tokens": 1, "messages": msgs, "thinking": map[string]any{"type": "maybe"}}, 400},
		{"thinking budget below 1024", map[string]any{"max_tokens": 4000, "messages": msgs, "thinking": map[string]any{"type": "enabled", "budget_tokens": 1023}}, 400},
		{"thinking budget at max_tokens", map[string]any{"max_tokens": 2048, "messages": msgs, "thinking": map[string]any{"type": "enabled", "budget_tokens": 2048}}, 400},
		{"other model", map[string]any{"model": "gpt-4o", "max_tokens": 1, "messages": msgs}, 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := post(t, ts.url+"/v1/messages", tc.body)
			v := res.json(t)
			if res.status != tc.status || v["type"] != "error" || path(v, "error", "type") == nil || path(v, "error", "message") == "" {
				t.Errorf("%d %s", res.status, res.body)
			}
			if tc.status == 400 && path(v, "error", "type") != "invalid_request_error" {
				t.Errorf("error type %v, want Anthropic's invalid_request_error: %s", path(v, "error", "type"), res.body)
			}
		})
	}
	// A budget Anthropic takes (at least 1,024, below max_tokens) is taken.
	ok := post(t, ts.url+"/v1/messages", map[string]any{"max_tokens": 1025, "messages": msgs, "thinking": map[string]any{"type": "enabled", "budget_tokens": 1024}, "stream": true})
	if ok.status != 200 {
		t.Errorf("budget 1024 below max_tokens 1025: %d %s", ok.status, ok.body)
	}
}

func TestAnthropicConversation(t *testing.T) {
	// A tool round trip as Claude Code sends it: tool_use in the assistant
	// turn, tool_result in the next user turn.
	req := messagesRequest{}
	body := `{"max_tokens": 5, "system": "sys", "messages": [
		{"role": "user", "content": "Weather in Paris?"},
		{"role": "assistant", "content": [
			{"type": "thinking", "thinking": "I should call it.", "signature": "x"},
			{"type": "text", "text": "Checking."},
			{"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris", "days": 2}}]},
		{"role": "user", "content": [
			{"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "sunny"}]},
			{"type": "text", "text": "Thanks"}]}],
		"tools": [{"name": "get_weather", "description": "Weather", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}],
		"tool_choice": {"type": "auto"}}`
	if err := decodeJSON([]byte(body), &req); err != nil {
		t.Fatal(err)
	}
	turn, err := req.turn(false)
	if err != nil {
		t.Fatal(err)
	}
	var roles []string
	for _, m := range turn.messages {
		roles = append(roles, m.Role)
	}
	if strings.Join(roles, ",") != "system,user,assistant,tool,user" {
		t.Fatalf("roles %v", roles)
	}
	a := turn.messages[2]
	if a.Content != "Checking." || a.ReasoningContent == nil || *a.ReasoningContent != "I should call it." ||
		len(a.ToolCalls) != 1 || a.ToolCalls[0].Function.Name != "get_weather" || a.ToolCalls[0].ID != "toolu_1" {
		t.Errorf("assistant turn %+v", a)
	}
	args, _ := json.Marshal(a.ToolCalls[0].Function.Arguments)
	if string(args) != `{"city":"Paris","days":2}` {
		t.Errorf("arguments %s (key order must be kept)", args)
	}
	if turn.messages[3].Content != "sunny" || turn.messages[3].ToolCallID != "toolu_1" || turn.messages[4].Content != "Thanks" {
		t.Errorf("tool result and text: %+v %+v", turn.messages[3], turn.messages[4])
	}
	fn := field(turn.tools[0], "function")
	if stringField(fn, "name") != "get_weather" || field(fn, "parameters") == nil {
		t.Errorf("tool %v", turn.tools[0])
	}

	// The fixture's template renders the whole round trip.
	l := loadModel(t, fixtureDir, engine.LoadOptions{})
	e, _, _ := l.Current(t.Context())
	s, _ := New(Config{Models: l})
	p, err := s.prepare(e, turn)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"get_weather", "<tool_call>", "<function=get_weather>", "Paris", "<tool_response>", "sunny", "Thanks"} {
		if !strings.Contains(p.prompt.Text, want) {
			t.Errorf("the rendered prompt lacks %q:\n%s", want, p.prompt.Text)
		}
	}
	if len(p.render.Tools) != 1 || !p.snapshotAnswer {
		t.Errorf("tools are not handed to the parser: %+v", p.render.Tools)
	}
}
