package chat

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

var weatherTools = mustTools(`[{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {
	"code": {"type": "string"}, "days": {"type": "integer"}, "flag": {"type": "boolean"}, "filters": {"type": "object"}}}}}]`)

func mustTools(s string) []any {
	v, err := DecodeJSON([]byte(s))
	if err != nil {
		panic(err)
	}
	return v.([]any)
}

var parseCases = []struct {
	name   string
	opts   ParserOptions
	output string
	want   Output
}{
	{"reasoning then answer", ParserOptions{InReasoning: true},
		"Let me think.\n\nMore.\n</think>\n\nThe answer is 4.",
		Output{Reasoning: "Let me think.\n\nMore.", Content: "The answer is 4."}},
	{"thinking off", ParserOptions{},
		"Hello <b>there</b>\n\nBye.",
		Output{Content: "Hello <b>there</b>\n\nBye."}},
	{"model opens its own think block", ParserOptions{},
		"<think>\nhmm\n</think>\n\nyes",
		Output{Reasoning: "hmm", Content: "yes"}},
	{"repeated think tag", ParserOptions{InReasoning: true},
		"<think>\nok\n</think>\n\ndone",
		Output{Reasoning: "ok", Content: "done"}},
	{"less-than at the start of reasoning", ParserOptions{InReasoning: true},
		"<t is a type parameter</think>x",
		Output{Reasoning: "<t is a type parameter", Content: "x"}},
	{"reasoning cut off", ParserOptions{InReasoning: true},
		"still thinking </thi",
		Output{Reasoning: "still thinking </thi"}},
	{"tool call as the template writes it", ParserOptions{InReasoning: true},
		"\n</think>\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nTokyo\n</parameter>\n<parameter=unit>\nc\n</parameter>\n</function>\n</tool_call>",
		Output{ToolCalls: []ParsedToolCall{{Name: "get_weather", Arguments: `{"city":"Tokyo","unit":"c"}`}}}},
	{"content before two calls, JSON values and schema types", ParserOptions{InReasoning: true, Tools: weatherTools},
		"Check first.\n</think>\n\nI'll look it up.\n\n<tool_call>\n<function=lookup>\n<parameter=code>\n42\n</parameter>\n<parameter=days>\n3\n</parameter>\n<parameter=flag>\ntrue\n</parameter>\n<parameter=filters>\n{\"z\": [1, 2], \"a\": {\"k\": null}}\n</parameter>\n<parameter=note>\nline one\nline \"two\" <&>\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=other>\n</function>\n</tool_call>",
		Output{Reasoning: "Check first.", Content: "I'll look it up.", ToolCalls: []ParsedToolCall{
			{Name: "lookup", Arguments: `{"code":"42","days":3,"flag":true,"filters":{"z":[1,2],"a":{"k":null}},"note":"line one\nline \"two\" <&>"}`},
			{Name: "other", Arguments: `{}`},
		}}},
	{"missing closing tags", ParserOptions{},
		"<tool_call>\n<function=f>\n<parameter=a>\n1\n<parameter=b>\nx\n</function>\n</tool_call>",
		Output{ToolCalls: []ParsedToolCall{{Name: "f", Arguments: `{"a":1,"b":"x"}`}}}},
	{"call cut off inside a value", ParserOptions{},
		"<tool_call>\n<function=f>\n<parameter=a>\nhello\n</para",
		Output{ToolCalls: []ParsedToolCall{{Name: "f", Arguments: `{"a":"hello"}`}}}},
	{"tag that is not a call", ParserOptions{},
		"Use <tool_call> tags like this.",
		Output{Content: "Use <tool_call> tags like this."}},
	{"look-alike prefixes stay text", ParserOptions{InReasoning: true},
		"a </thin b\n</think>\n\nc <tool_ d",
		Output{Reasoning: "a </thin b", Content: "c <tool_ d"}},
	{"unicode", ParserOptions{InReasoning: true},
		"考えています🤔\n</think>\n\n答えは「四」です。<tool_call>\n<function=f>\n<parameter=q>\n日本\n</parameter>\n</function>\n</tool_call>",
		Output{Reasoning: "考えています🤔", Content: "答えは「四」です。", ToolCalls: []ParsedToolCall{{Name: "f", Arguments: `{"q":"日本"}`}}}},
}

func TestParseOutput(t *testing.T) {
	for _, tc := range parseCases {
		got := ParseOutput(tc.output, tc.opts)
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s:\n got  %#v\n want %#v", tc.name, got, tc.want)
		}
	}
}

// Fed in random pieces, the parser must produce the same result, with
// events in a valid order.
func TestParseStreaming(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 2))
	for _, tc := range parseCases {
		for trial := 0; trial < 200; trial++ {
			p := NewParser(tc.opts)
			var events []Event
			rest := tc.output
			for rest != "" {
				n := 1 + r.IntN(8)
				if n > len(rest) {
					n = len(rest)
				}
				for n < len(rest) && !utf8.RuneStart(rest[n]) {
					n++
				}
				events = append(events, p.Feed(rest[:n])...)
				rest = rest[n:]
			}
			events = append(events, p.Finish()...)
			checkEventOrder(t, tc.name, events)
			if got := Collect(events); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("%s (streamed):\n got  %#v\n want %#v", tc.name, got, tc.want)
			}
		}
	}
}

func checkEventOrder(t *testing.T, name string, events []Event) {
	t.Helper()
	open := -1
	next := 0
	for _, e := range events {
		switch e.Kind {
		case ToolCallStart:
			if open >= 0 || e.Index != next || e.Name == "" {
				t.Fatalf("%s: bad start %+v (open %d)", name, e, open)
			}
			open = e.Index
		case ToolCallArguments:
			if e.Index != open {
				t.Fatalf("%s: arguments for call %d while %d is open", name, e.Index, open)
			}
		case ToolCallEnd:
			if e.Index != open {
				t.Fatalf("%s: end of call %d while %d is open", name, e.Index, open)
			}
			open, next = -1, next+1
		case ReasoningDelta, ContentDelta:
			if open >= 0 || e.Text == "" {
				t.Fatalf("%s: text event %+v inside call %d", name, e, open)
			}
		}
	}
	if open >= 0 {
		t.Fatalf("%s: call %d never ended", name, open)
	}
}

// Parsing what the model wrote and rendering it back as the assistant turn
// gives the same text: the parser reads exactly the template's format.
func TestParseRenderRoundTrip(t *testing.T) {
	tmpl, _ := tinyModel(t)
	for _, c := range loadChatCases(t) {
		if c.Name != "tool_call_roundtrip" {
			continue
		}
		req := c.request(t)
		turn := req
		turn.Messages = req.Messages[:1]
		turn.AddGenerationPrompt = true
		prompt, err := tmpl.Render(turn)
		if err != nil {
			t.Fatal(err)
		}
		// The model's output is the text between the generation prompt and
		// <|im_end|> in the next prompt.
		rest, ok := strings.CutPrefix(c.Text, prompt)
		if !ok {
			t.Fatal("the next prompt does not extend the generation prompt")
		}
		output := rest[:strings.Index(rest, "<|im_end|>")]
		parsed := ParseOutput(output, ParserOptions{InReasoning: PromptOpensThinking(prompt), Tools: req.Tools})
		if len(parsed.ToolCalls) != 1 {
			t.Fatalf("parsed %#v from %q", parsed, output)
		}
		msg := Message{Role: "assistant", Content: parsed.Content, ReasoningContent: &parsed.Reasoning}
		for _, call := range parsed.ToolCalls {
			msg.ToolCalls = append(msg.ToolCalls, ToolCall{Type: "function", Function: FunctionCall{Name: call.Name, Arguments: call.Arguments}})
		}
		again := req
		again.Messages = append([]Message{req.Messages[0], msg}, req.Messages[2:]...)
		text, err := tmpl.Render(again)
		if err != nil {
			t.Fatal(err)
		}
		if text != c.Text {
			t.Errorf("round trip differs:\n got  %q\n want %q", text, c.Text)
		}
		return
	}
	t.Fatal("fixture tool_call_roundtrip not found")
}
