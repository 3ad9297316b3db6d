package chat

import (
	"encoding/json"
	"os"
	"slices"
	"testing"

	"github.com/suzuran-app/suzuran/engine/internal/fixtures"
	"github.com/suzuran-app/suzuran/engine/tokenizer"
)

type chatCase struct {
	Name                string          `json:"name"`
	Messages            json.RawMessage `json:"messages"`
	Tools               json.RawMessage `json:"tools"`
	Kwargs              json.RawMessage `json:"kwargs"`
	AddGenerationPrompt json.RawMessage `json:"add_generation_prompt"`
	Text                string          `json:"text"`
	IDs                 []int           `json:"ids"`
}

// request turns a fixture case into the JSON a client would send.
func (c chatCase) request(t testing.TB) RenderRequest {
	t.Helper()
	data, err := json.Marshal(map[string]json.RawMessage{
		"messages":              c.Messages,
		"tools":                 c.Tools,
		"add_generation_prompt": c.AddGenerationPrompt,
		"chat_template_kwargs":  c.Kwargs,
	})
	if err != nil {
		t.Fatal(err)
	}
	req, err := DecodeRenderRequest(data)
	if err != nil {
		t.Fatalf("%s: %v", c.Name, err)
	}
	return req
}

func loadChatCases(t testing.TB) []chatCase {
	t.Helper()
	data, err := os.ReadFile(fixtures.Path(t, "chat", "chat-public.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Cases []chatCase `json:"cases"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Cases) == 0 {
		t.Fatal("chat-public.json has no cases")
	}
	return f.Cases
}

func tinyModel(t testing.TB) (*Template, *tokenizer.Tokenizer) {
	t.Helper()
	dir := fixtures.Path(t, "qwen35moe-tiny", "hf-bf16")
	tmpl, err := LoadTemplate(dir)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return tmpl, tok
}

func TestRenderFixtureConversations(t *testing.T) {
	tmpl, tok := tinyModel(t)
	for _, c := range loadChatCases(t) {
		p, err := tmpl.Encode(tok, c.request(t))
		if err != nil {
			t.Errorf("%s: %v", c.Name, err)
			continue
		}
		if p.Text != c.Text {
			t.Errorf("%s: text differs\n got  %q\n want %q", c.Name, p.Text, c.Text)
		}
		if !slices.Equal(p.IDs, c.IDs) {
			t.Errorf("%s: ids differ\n got  %v\n want %v", c.Name, p.IDs, c.IDs)
		}
	}
}

// Content given as a list of parts renders as the template lays it out,
// and the checkpoint logic reads the text parts too.
func TestContentParts(t *testing.T) {
	tmpl, tok := tinyModel(t)
	req, err := DecodeRenderRequest([]byte(`{"messages": [
		{"role": "user", "content": [{"type": "text", "text": "Look: "}, {"type": "image_url", "image_url": {"url": "data:,"}}, {"type": "text", "text": "what is it?"}]}
	], "add_generation_prompt": true}`))
	if err != nil {
		t.Fatal(err)
	}
	p, err := tmpl.Encode(tok, req)
	if err != nil {
		t.Fatal(err)
	}
	want := "<|im_start|>user\nLook: <|vision_start|><|image_pad|><|vision_end|>what is it?<|im_end|>\n<|im_start|>assistant\n<think>\n"
	if p.Text != want {
		t.Errorf("got %q, want %q", p.Text, want)
	}
	header := tok.EncodeWithSpecials("<|im_start|>assistant\n")
	if len(p.Checkpoints) != 1 || p.Checkpoints[0] != len(p.IDs)-2 || !slices.Equal(p.IDs[p.Checkpoints[0]-len(header):p.Checkpoints[0]], header) {
		t.Errorf("checkpoints %v for %d ids, want just past the generation prompt's header", p.Checkpoints, len(p.IDs))
	}
}

// Keyword arguments reach the template only when given, as in
// transformers, so that `is defined` tests behave the same.
func TestTemplateVariables(t *testing.T) {
	tmpl, err := ParseTemplate("{{ enable_thinking is defined }}/{{ preserve_thinking is defined }}/{{ tools is none }}/{{ add_generation_prompt }}/{{ extra }}")
	if err != nil {
		t.Fatal(err)
	}
	off := false
	for _, tc := range []struct {
		req  RenderRequest
		want string
	}{
		{RenderRequest{}, "False/False/True/False/"},
		{RenderRequest{EnableThinking: &off, PreserveThinking: true, AddGenerationPrompt: true, Extra: map[string]any{"extra": "x"}}, "True/True/True/True/x"},
		{RenderRequest{Tools: []any{NewObject()}}, "False/False/False/False/"},
	} {
		got, err := tmpl.Render(tc.req)
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}
