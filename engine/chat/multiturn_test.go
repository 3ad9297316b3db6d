package chat

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// For every assistant turn k of a conversation, the engine saw the prompt
// of turn k (messages[:k] plus the generation prompt) followed by what the
// model generated, which is how turn k renders as the latest turn. The next
// prompt must share exactly the tokens up to the checkpoint when a user
// message follows (the reasoning is dropped), and everything when only tool
// results follow (the reasoning is kept).
func checkDivergence(t *testing.T, name string, tmpl *Template, tok tokenizerLike, req RenderRequest) {
	t.Helper()
	checked := 0
	for k, m := range req.Messages {
		if m.Role != "assistant" {
			continue
		}
		turn := req
		turn.Messages = req.Messages[:k]
		turn.AddGenerationPrompt = true
		prev, err := tmpl.Encode(tok.t, turn)
		if err != nil {
			t.Fatalf("%s turn %d: %v", name, k, err)
		}
		if len(prev.Checkpoints) != 1 {
			t.Fatalf("%s turn %d: checkpoints %v, want one", name, k, prev.Checkpoints)
		}
		cp := prev.Checkpoints[0]

		done := req
		done.Messages = req.Messages[:k+1]
		done.AddGenerationPrompt = false
		seenText, err := tmpl.Render(done)
		if err != nil {
			t.Fatalf("%s turn %d: %v", name, k, err)
		}
		if !strings.HasPrefix(seenText, prev.Text) {
			t.Fatalf("%s turn %d: the answer as latest turn does not extend its generation prompt:\n%q\n%q", name, k, prev.Text, seenText)
		}
		seen := tok.t.EncodeWithSpecials(seenText)

		if k+1 == len(req.Messages) {
			continue
		}
		next := req
		next.AddGenerationPrompt = true
		nextPrompt, err := tmpl.Encode(tok.t, next)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		common := CommonPrefixLen(seen, nextPrompt.IDs)
		userFollows := false
		for _, later := range req.Messages[k+1:] {
			userFollows = userFollows || later.Role == "user"
		}
		want := len(seen)
		if userFollows {
			want = cp
		}
		if common != want {
			t.Errorf("%s turn %d: next prompt shares %d tokens, want %d (checkpoint %d, %d seen)", name, k, common, want, cp, len(seen))
		}
		checked++
	}
	if checked == 0 && strings.HasPrefix(name, "multi") {
		t.Errorf("%s: no turn was checked", name)
	}
}

func TestMultiTurnDivergence(t *testing.T) {
	tmpl, tok := tinyModel(t)
	tk := tokenizerLike{tok}
	for _, c := range loadChatCases(t) {
		checkDivergence(t, c.Name, tmpl, tk, c.request(t))
	}

	// A longer conversation, with thinking on and off.
	conv := `{"messages": [
		{"role": "system", "content": "Be brief."},
		{"role": "user", "content": "Name a prime."},
		{"role": "assistant", "reasoning_content": "2 is prime.", "content": "2"},
		{"role": "user", "content": "Another?"},
		{"role": "assistant", "content": "<think>\n3 works.\n</think>\n\n3"},
		{"role": "user", "content": "Weather in Paris?"},
		{"role": "assistant", "reasoning_content": "Use the tool.", "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"unit\": \"c\", \"city\": \"Paris\"}"}}]},
		{"role": "tool", "tool_call_id": "c1", "content": "{\"temp\": 21}"},
		{"role": "assistant", "reasoning_content": "It is mild.", "content": "21 °C."},
		{"role": "user", "content": "Thanks"}
	], "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"unit": {"type": "string"}, "city": {"type": "string"}}}}}]}`
	req, err := DecodeRenderRequest([]byte(conv))
	if err != nil {
		t.Fatal(err)
	}
	checkDivergence(t, "multi-turn", tmpl, tk, req)

	// With thinking off the model writes no reasoning, and the generation
	// prompt's empty think block is dropped from earlier turns just the same.
	off := false
	req.EnableThinking = &off
	for i := range req.Messages {
		req.Messages[i].ReasoningContent = nil
		if c, ok := req.Messages[i].Content.(string); ok && strings.HasPrefix(c, "<think>") {
			req.Messages[i].Content = c[strings.Index(c, "</think>")+len("</think>\n\n"):]
		}
	}
	checkDivergence(t, "multi-turn-thinking-off", tmpl, tk, req)
}

// tokenizerLike wraps the tokenizer so the helper's signature stays short.
type tokenizerLike struct{ t tokenizerT }

func TestOrderedToolJSON(t *testing.T) {
	tmpl, _ := tinyModel(t)
	// Keys deliberately out of alphabetical order, nested, with a number
	// that must stay an integer and text that Go would HTML-escape.
	req, err := DecodeRenderRequest([]byte(`{
		"messages": [
			{"role": "user", "content": "go"},
			{"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f", "arguments": {"z": 1, "a": {"y": [3, {"q": true, "b": null}], "x": "<&>"}}}}]},
			{"role": "tool", "content": "ok"}
		],
		"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"z": {"type": "integer"}, "a": {"type": "object"}}, "required": ["z"]}}}]
	}`))
	if err != nil {
		t.Fatal(err)
	}
	text, err := tmpl.Render(req)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"z": {"type": "integer"}, "a": {"type": "object"}}, "required": ["z"]}}}`,
		"<parameter=z>\n1\n</parameter>\n<parameter=a>\n{\"y\": [3, {\"q\": true, \"b\": null}], \"x\": \"<&>\"}\n</parameter>",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("rendered prompt lacks %q:\n%s", want, text)
		}
	}

	// Arguments sent as a JSON string (the OpenAI form) render the same.
	var asString RenderRequest
	asString, err = DecodeRenderRequest([]byte(`{"messages": [
		{"role": "user", "content": "go"},
		{"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f", "arguments": "{\"z\": 1, \"a\": {\"y\": [3, {\"q\": true, \"b\": null}], \"x\": \"<&>\"}}"}}]},
		{"role": "tool", "content": "ok"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	asString.Tools = req.Tools
	text2, err := tmpl.Render(asString)
	if err != nil {
		t.Fatal(err)
	}
	if text2 != text {
		t.Errorf("string arguments render differently:\n%s\n---\n%s", text2, text)
	}
}

func TestTemplateErrors(t *testing.T) {
	tmpl, _ := tinyModel(t)
	for _, tc := range []struct {
		name, request, want string
	}{
		{"no messages", `{"messages": []}`, "No messages provided."},
		{"no user", `{"messages": [{"role": "system", "content": "x"}]}`, "No user query found in messages."},
		{"bad role", `{"messages": [{"role": "user", "content": "x"}, {"role": "robot", "content": "y"}]}`, "Unexpected message role."},
		{"late system", `{"messages": [{"role": "user", "content": "x"}, {"role": "system", "content": "y"}]}`, "System message must be at the beginning."},
		{"bad arguments", `{"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "[1]"}}]}]}`, `function "f" arguments must be a JSON object`},
		{"broken arguments", `{"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{oops"}}]}]}`, `function "f" arguments are not valid JSON`},
	} {
		req, err := DecodeRenderRequest([]byte(tc.request))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		_, err = tmpl.Render(req)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
	if _, err := DecodeRenderRequest([]byte(`{"messages": [{"role": "user", "content": 5}]}`)); err == nil {
		t.Error("numeric content was accepted")
	}
	if _, err := ParseTemplate("{% if %}"); err == nil {
		t.Error("a broken template compiled")
	}
}

func TestLoadTemplateFromConfig(t *testing.T) {
	dir := t.TempDir()
	config := map[string]any{
		"eos_token":     "<|im_end|>",
		"chat_template": []map[string]string{{"name": "tool_use", "template": "T"}, {"name": "default", "template": "{{ eos_token }}{% for m in messages %}{{ m.role }}:{{ m.content }};{% endfor %}"}},
	}
	data, _ := json.Marshal(config)
	if err := writeFile(dir, "tokenizer_config.json", data); err != nil {
		t.Fatal(err)
	}
	tmpl, err := LoadTemplate(dir)
	if err != nil {
		t.Fatal(err)
	}
	got, err := tmpl.Render(RenderRequest{Messages: []Message{{Role: "user", Content: "hi"}}})
	if err != nil {
		t.Fatal(err)
	}
	if got != "<|im_end|>user:hi;" {
		t.Errorf("got %q", got)
	}
	if _, err := LoadTemplate(t.TempDir()); err == nil {
		t.Error("a folder without any template loaded")
	}
	missing := filepath.Join(dir, "no-such-folder")
	if _, err := LoadTemplate(missing); err == nil || !strings.Contains(err.Error(), "no folder "+missing) {
		t.Errorf("LoadTemplate of a missing folder: %v, want an error saying there is no such folder", err)
	}
}
