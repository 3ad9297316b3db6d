package grammar

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/suzuran-app/suzuran/engine/chat"
)

// weatherTools are the functions the tool-call tests force: string
// parameters (raw text in the call), an enum, numbers, a nested object and
// an array, required and optional.
const weatherTools = `[
 {"type":"function","function":{"name":"get_weather","parameters":{"type":"object",
  "properties":{"city":{"type":"string","description":"City name"},"unit":{"type":"string","enum":["celsius","fahrenheit"]},"days":{"type":"integer"}},
  "required":["city"]}}},
 {"type":"function","function":{"name":"book.trip","parameters":{"type":"object",
  "properties":{"to":{"type":"string","minLength":1,"maxLength":8},"when":{"type":"string","format":"date"},"people":{"type":"array","items":{"type":"object","properties":{"name":{"type":"string"},"age":{"type":["integer","null"]}},"required":["name","age"],"additionalProperties":false}},"window":{"type":"boolean"}},
  "required":["to","when","people"],"additionalProperties":false}}},
 {"type":"function","function":{"name":"ping","parameters":{"type":"object","properties":{}}}}
]`

// functionsOf turns OpenAI tools JSON into Functions, as the server will.
func functionsOf(t testing.TB, tools string) ([]Function, []any) {
	t.Helper()
	var list []struct {
		Function Function `json:"function"`
	}
	if err := json.Unmarshal([]byte(tools), &list); err != nil {
		t.Fatal(err)
	}
	var fns []Function
	for _, x := range list {
		fns = append(fns, x.Function)
	}
	decoded, err := chat.DecodeJSON([]byte(tools))
	if err != nil {
		t.Fatal(err)
	}
	return fns, decoded.([]any)
}

func TestToolCallAcceptsTheTemplateFormat(t *testing.T) {
	_, _, vocab := demoModel(t)
	fns, _ := functionsOf(t, weatherTools)
	g, err := ToolCall(vocab, fns, Options{})
	if err != nil {
		t.Fatal(err)
	}
	good := []string{
		"<tool_call>\n<function=get_weather>\n<parameter=city>\nKyoto\n</parameter>\n</function>\n</tool_call>",
		"<tool_call>\n<function=get_weather>\n<parameter=city>\nNew York <3\nline two\n</parameter>\n<parameter=unit>\ncelsius\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>",
		"<tool_call>\n<function=book.trip>\n<parameter=to>\nOslo\n</parameter>\n<parameter=when>\n2026-02-28\n</parameter>\n<parameter=people>\n[{\"name\": \"A\", \"age\": null}]\n</parameter>\n</function>\n</tool_call>",
		"<tool_call>\n<function=ping>\n</function>\n</tool_call>",
	}
	bad := []string{
		"<tool_call>\n<function=get_weather>\n</function>\n</tool_call>",                                                                                // city is required
		"<tool_call>\n<function=get_weather>\n<parameter=city>\na</b\n</parameter>\n</function>\n</tool_call>",                                          // "</" in a raw value
		"<tool_call>\n<function=get_weather>\n<parameter=city>\na\n<x\n</parameter>\n</function>\n</tool_call>",                                         // '<' after a newline
		"<tool_call>\n<function=get_weather>\n<parameter=city>\nKyoto\n</parameter>\n<parameter=unit>\nkelvin\n</parameter>\n</function>\n</tool_call>", // not in the enum
		"<tool_call>\n<function=nope>\n</function>\n</tool_call>",
		"<tool_call>\n<function=ping>\n</function>\n</tool_call>\n<tool_call>\n<function=ping>\n</function>\n</tool_call>", // one call only
	}
	for _, text := range good {
		if !accepts(g, text) {
			t.Errorf("refused %q", text)
		}
	}
	for _, text := range bad {
		if accepts(g, text) {
			t.Errorf("accepted %q", text)
		}
	}
	parallel, err := ToolCall(vocab, fns, Options{ParallelToolCalls: true})
	if err != nil {
		t.Fatal(err)
	}
	if !accepts(parallel, bad[len(bad)-1]) || !accepts(parallel, good[0]) {
		t.Error("ParallelToolCalls refuses one or two calls")
	}
}

// TestToolCallRandomWalksParse: every random walk through the tool-call
// grammar, read back by engine/chat's parser, is one call of a known
// function whose arguments validate against its parameter schema.
func TestToolCallRandomWalksParse(t *testing.T) {
	_, _, vocab := demoModel(t)
	fns, tools := functionsOf(t, weatherTools)
	validators := map[string]func(string) error{}
	for _, f := range fns {
		v := validator(t, string(f.Parameters))
		validators[f.Name] = func(args string) error { return validate(v, args) }
	}
	for _, parallel := range []bool{false, true} {
		g, err := ToolCall(vocab, fns, Options{ParallelToolCalls: parallel})
		if err != nil {
			t.Fatal(err)
		}
		dist := distances(t, g)
		rng := rand.New(rand.NewPCG(5, 5))
		for range 300 {
			text := randomText(g, dist, rng, rng.IntN(300))
			out := chat.ParseOutput(text, chat.ParserOptions{Tools: tools})
			if strings.TrimSpace(out.Content) != "" || len(out.ToolCalls) == 0 || (!parallel && len(out.ToolCalls) != 1) {
				t.Fatalf("random walk %q parsed as content %q and %d calls", text, out.Content, len(out.ToolCalls))
			}
			for _, call := range out.ToolCalls {
				check := validators[call.Name]
				if check == nil {
					t.Fatalf("random walk %q called unknown function %q", text, call.Name)
				}
				if err := check(call.Arguments); err != nil {
					t.Fatalf("random walk %q: arguments %s: %v", text, call.Arguments, err)
				}
			}
		}
	}
}

func TestToolCallRefusesWhatItCannotWrite(t *testing.T) {
	_, _, vocab := demoModel(t)
	for _, fns := range [][]Function{
		nil,
		{{Name: "has space", Parameters: json.RawMessage(`{"type":"object"}`)}},
		{{Name: "f", Parameters: json.RawMessage(`{"type":"array"}`)}},
		{{Name: "f", Parameters: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string","pattern":"x"}}}`)}},
		{{Name: "f", Parameters: json.RawMessage(`{"type":"object","properties":{"bad name":{"type":"integer"}}}`)}},
	} {
		if _, err := ToolCall(vocab, fns, Options{}); err == nil {
			t.Errorf("%+v: compiled, want an error", fns)
		}
	}
}
