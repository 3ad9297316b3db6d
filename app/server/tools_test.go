package server

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/suzuran-app/suzuran/engine"
	"github.com/suzuran-app/suzuran/engine/chat"
)

// modelToolOutput is Qwen3.6 output with reasoning, text and two tool calls
// in the format the template teaches, cut into uneven pieces as tokens
// arrive.
const modelToolOutput = "Let me check.\n</think>\n\nI'll look both up.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n2\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=get_time>\n<parameter=zone>\nCET\n</parameter>\n</function>\n</tool_call>"

var weatherTools = func() []any {
	v, _ := chat.DecodeJSON([]byte(`[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}}}}},
		{"type":"function","function":{"name":"get_time","parameters":{"type":"object","properties":{"zone":{"type":"string"}}}}}]`))
	return v.([]any)
}()

// parsedSteps feeds the output through the parser in pieces of n bytes,
// as the engine's tokens would arrive.
func parsedSteps(output string, n int) [][]chat.Event {
	p := chat.NewParser(chat.ParserOptions{InReasoning: true, Tools: weatherTools})
	var steps [][]chat.Event
	for len(output) > 0 {
		k := min(n, len(output))
		steps = append(steps, p.Feed(output[:k]))
		output = output[k:]
	}
	return append(steps, p.Finish())
}

func TestChatToolCallDeltas(t *testing.T) {
	callIDs := map[int]string{}
	type call struct{ id, name, args string }
	var calls []call
	var content, reasoning strings.Builder
	for _, step := range parsedSteps(modelToolOutput, 5) {
		for _, ev := range step {
			d, ok := chatDelta(ev, callIDs)
			if !ok {
				continue
			}
			// Each delta marshals as a chat.completion.chunk delta.
			var back map[string]any
			data, _ := json.Marshal(d)
			json.Unmarshal(data, &back)
			if s, ok := back["content"].(string); ok {
				content.WriteString(s)
			}
			if s, ok := back["reasoning_content"].(string); ok {
				reasoning.WriteString(s)
			}
			if tc, ok := path(back, "tool_calls", 0).(map[string]any); ok {
				i := int(tc["index"].(float64))
				if id, ok := tc["id"].(string); ok {
					if i != len(calls) || tc["type"] != "function" || !strings.HasPrefix(id, "call_") {
						t.Fatalf("call start %v", tc)
					}
					calls = append(calls, call{id: id, name: path(tc, "function", "name").(string)})
				}
				calls[i].args += path(tc, "function", "arguments").(string)
			}
		}
	}
	if reasoning.String() != "Let me check." || content.String() != "I'll look both up." {
		t.Errorf("reasoning %q content %q", reasoning.String(), content.String())
	}
	if len(calls) != 2 || calls[0].name != "get_weather" || calls[1].name != "get_time" || calls[0].id == calls[1].id {
		t.Fatalf("calls %+v", calls)
	}
	// The arguments follow the schema: city stays a string, days a number.
	if calls[0].args != `{"city":"Paris","days":2}` || calls[1].args != `{"zone":"CET"}` {
		t.Errorf("arguments %q %q", calls[0].args, calls[1].args)
	}
}

func TestAnthropicToolUseBlocks(t *testing.T) {
	rec := newRecorder()
	sse := newSSE(rec)
	b := &blockWriter{sse: sse, index: -1}
	for _, step := range parsedSteps(modelToolOutput, 7) {
		b.feed(step)
	}
	b.closeBlock()
	sse.flush()
	var kinds []string
	inputs := map[int]*strings.Builder{}
	for _, ev := range readSSE(t, []byte(rec.body.String())) {
		v := decodeEvent(t, ev)
		switch ev.name {
		case "content_block_start":
			kinds = append(kinds, path(v, "content_block", "type").(string))
			if path(v, "content_block", "type") == "tool_use" {
				inputs[int(v["index"].(float64))] = &strings.Builder{}
			}
		case "content_block_delta":
			if path(v, "delta", "type") == "input_json_delta" {
				inputs[int(v["index"].(float64))].WriteString(path(v, "delta", "partial_json").(string))
			}
		}
	}
	if strings.Join(kinds, ",") != "thinking,text,tool_use,tool_use" {
		t.Errorf("blocks %v", kinds)
	}
	if inputs[2].String() != `{"city":"Paris","days":2}` || inputs[3].String() != `{"zone":"CET"}` {
		t.Errorf("inputs %q %q", inputs[2], inputs[3])
	}
}

func TestResponsesFunctionCallItems(t *testing.T) {
	rec := newRecorder()
	b := &responseBuilder{open: -1, sse: newSSE(rec), response: &responseObject{}}
	for _, step := range parsedSteps(modelToolOutput, 3) {
		b.feed(step)
	}
	final := b.finish(&genResult{})
	b.sse.flush()
	var types []string
	for _, item := range final.Output {
		types = append(types, item.Type)
	}
	if strings.Join(types, ",") != "reasoning,message,function_call,function_call" {
		t.Fatalf("output items %v", types)
	}
	call := final.Output[2]
	if call.Name != "get_weather" || call.Arguments.v != `{"city":"Paris","days":2}` || call.Status != "completed" {
		t.Errorf("function_call item %+v", call)
	}
	if final.OutputText.v != "I'll look both up." {
		t.Errorf("output_text %q", final.OutputText.v)
	}
	var args strings.Builder
	seq := -1.0
	for _, ev := range readSSE(t, []byte(rec.body.String())) {
		v := decodeEvent(t, ev)
		if v["sequence_number"].(float64) != seq+1 || v["type"] != ev.name {
			t.Fatalf("event %s: sequence %v after %v", ev.name, v["sequence_number"], seq)
		}
		seq = v["sequence_number"].(float64)
		if ev.name == "response.function_call_arguments.delta" && v["output_index"] == 2.0 {
			args.WriteString(v["delta"].(string))
		}
	}
	if args.String() != `{"city":"Paris","days":2}` {
		t.Errorf("streamed arguments %q", args.String())
	}
}

func TestMalformedToolCallIsText(t *testing.T) {
	// A call the model never finishes naming comes back as text, not an
	// error.
	var all []chat.Event
	for _, step := range parsedSteps("</think>\n\nSure <tool_call>\n<funct", 4) {
		all = append(all, step...)
	}
	out := chat.Collect(all)
	if len(out.ToolCalls) != 0 || !strings.Contains(out.Content, "<tool_call>") {
		t.Errorf("malformed call parsed as %+v", out)
	}
}

func TestOpenAIToolRoundTripRenders(t *testing.T) {
	body := `{"messages": [
		{"role": "user", "content": "Weather?"},
		{"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
		{"role": "tool", "tool_call_id": "call_1", "content": "sunny"}],
		"tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]}`
	var req chatCompletionRequest
	if err := decodeJSON([]byte(body), &req); err != nil {
		t.Fatal(err)
	}
	turn, err := req.turn()
	if err != nil {
		t.Fatal(err)
	}
	if turn.toolChoice != "auto" || len(turn.tools) != 1 {
		t.Fatalf("turn %+v", turn)
	}
	if _, ok := turn.messages[1].ToolCalls[0].Function.Arguments.(*chat.Object); !ok {
		t.Errorf("string arguments are not decoded into an object for the template")
	}
	// tool_choice none renders no tools.
	req.ToolChoice = orderedJSON{Value: "none", Set: true}
	turn, _ = req.turn()
	if turn.toolChoice != "none" {
		t.Errorf("tool_choice none: %q", turn.toolChoice)
	}
}

func TestForcedToolChoiceAsksForAConstraint(t *testing.T) {
	// required and a named function go through constrained sampling; a
	// build without it says so with a 400 naming tool_choice.
	ts := startServer(t, loadModel(t, fixtureDir, engine.LoadOptions{}), nil)
	tools := []any{map[string]any{"type": "function", "function": map[string]any{"name": "f", "parameters": map[string]any{"type": "object"}}}}
	for _, choice := range []any{"required", map[string]any{"type": "function", "function": map[string]any{"name": "f"}}} {
		res := post(t, ts.url+"/v1/chat/completions", map[string]any{"messages": userMessage("x"), "tools": tools, "tool_choice": choice, "max_tokens": 64,
			// Thinking on, the noise model would reason past max_tokens
			// before the constrained call.
			"chat_template_kwargs": map[string]any{"enable_thinking": false}})
		if constrain == nil {
			checkError(t, res, 400, "tool_choice")
		} else if res.status != 200 || path(res.json(t), "choices", 0, "finish_reason") != "tool_calls" {
			t.Errorf("forced tool call: %d %s", res.status, res.body)
		} else {
			call := path(res.json(t), "choices", 0, "message", "tool_calls", 0)
			var args map[string]any
			if path(call, "function", "name") != "f" || json.Unmarshal([]byte(path(call, "function", "arguments").(string)), &args) != nil {
				t.Errorf("forced call %v", call)
			}
		}
	}
}

func TestResponseFormatAsksForAConstraint(t *testing.T) {
	// json_object and json_schema (chat's response_format, the Responses
	// API's text.format) go through constrained sampling: the output parses
	// and has the schema's properties. A build without it answers a 400
	// naming the field.
	ts := startServer(t, loadModel(t, fixtureDir, engine.LoadOptions{}), nil)
	schema := map[string]any{"type": "object", "properties": map[string]any{
		"answer": map[string]any{"type": "string", "enum": []string{"yes", "no"}},
		"score":  map[string]any{"type": "integer"}}, "required": []string{"answer", "score"}, "additionalProperties": false}
	off := map[string]any{"enable_thinking": false}
	for _, tc := range []struct {
		name, path, param string
		body              map[string]any
		text              func(map[string]any) any
	}{
		{"chat json_object", "/v1/chat/completions", "response_format",
			map[string]any{"messages": userMessage("JSON please"), "response_format": map[string]any{"type": "json_object"}, "max_tokens": 300, "chat_template_kwargs": off},
			func(v map[string]any) any { return path(v, "choices", 0, "message", "content") }},
		{"chat json_schema", "/v1/chat/completions", "response_format",
			map[string]any{"messages": userMessage("JSON please"), "response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "r", "schema": schema, "strict": true}}, "max_tokens": 300, "chat_template_kwargs": off},
			func(v map[string]any) any { return path(v, "choices", 0, "message", "content") }},
		{"responses text.format", "/v1/responses", "text.format",
			map[string]any{"input": "JSON please", "text": map[string]any{"format": map[string]any{"type": "json_schema", "name": "r", "schema": schema}}, "max_output_tokens": 300, "reasoning": map[string]any{"effort": "none"}},
			func(v map[string]any) any { return v["output_text"] }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := post(t, ts.url+tc.path, tc.body)
			if constrain == nil {
				checkError(t, res, 400, tc.param)
				return
			}
			if res.status != 200 {
				t.Fatalf("%d %s", res.status, res.body)
			}
			text, _ := tc.text(res.json(t)).(string)
			if tc.name == "chat json_object" {
				// json_object leaves keys and strings free, which the noise
				// model fills until max_tokens: only the start is checkable
				// here (the grammar's own tests walk whole objects).
				if !strings.HasPrefix(strings.TrimSpace(text), "{") {
					t.Errorf("json_object output does not start an object: %q", text)
				}
				return
			}
			var out map[string]any
			if err := json.Unmarshal([]byte(text), &out); err != nil {
				t.Fatalf("the output is not a JSON object: %v: %q", err, text)
			}
			if a := out["answer"]; (a != "yes" && a != "no") || len(out) != 2 {
				t.Errorf("the output does not follow the schema: %s", text)
			}
			if s, ok := out["score"].(float64); !ok || s != float64(int64(s)) {
				t.Errorf("score is not an integer: %s", text)
			}
		})
	}
	// An unsupported keyword is a 400 naming it (only a build with
	// constrained sampling reads the schema).
	if constrain != nil {
		bad := map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "integer", "multipleOf": 3}}}
		res := post(t, ts.url+"/v1/chat/completions", map[string]any{"messages": userMessage("x"),
			"response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "b", "schema": bad}}})
		checkError(t, res, 400, "response_format")
		if !strings.Contains(string(res.body), "multipleOf") {
			t.Errorf("the 400 does not name the keyword: %s", res.body)
		}
	}
}
