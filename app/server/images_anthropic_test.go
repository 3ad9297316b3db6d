package server

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/suzuran-app/suzuran/engine"
	"github.com/suzuran-app/suzuran/engine/imageproc"
)

// TestAnthropicImagesBeyondUserText: an Anthropic image block inside a
// tool_result and in an earlier assistant turn reaches the tiny vision
// model (count_tokens and the answer's usage grow by exactly the image's
// tokens, and the answer's text changes with the pixels); an image in the
// system prompt, which Anthropic's API takes as text blocks only, is a
// 400 naming the block.
func TestAnthropicImagesBeyondUserText(t *testing.T) {
	ts := startServer(t, loadModel(t, visionDir, engine.LoadOptions{ContextTokens: 4096}), nil)
	cfg, err := imageproc.LoadConfig(visionDir)
	if err != nil {
		t.Fatal(err)
	}
	img0, img1 := readVisionImage(t, "image0.png"), readVisionImage(t, "image1.png")
	info, err := imageproc.Probe(img0)
	if err != nil {
		t.Fatal(err)
	}
	n, err := cfg.TokenCost(info.Width, info.Height)
	if err != nil {
		t.Fatal(err)
	}
	cost := float64(n + 2) // <|vision_start|> and <|vision_end|>
	imageOf := func(data []byte) map[string]any {
		return map[string]any{"type": "image", "source": map[string]any{"type": "base64", "media_type": "image/png",
			"data": base64.StdEncoding.EncodeToString(data)}}
	}
	image, other := imageOf(img0), imageOf(img1)
	text := func(s string) map[string]any { return map[string]any{"type": "text", "text": s} }
	tools := []any{map[string]any{"name": "screenshot", "input_schema": map[string]any{"type": "object"}}}
	toolTurn := func(result ...any) []any {
		return []any{
			map[string]any{"role": "user", "content": "Take a screenshot."},
			map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": "t1", "name": "screenshot", "input": map[string]any{}}}},
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": "t1", "content": result}}},
		}
	}
	assistantTurn := func(parts ...any) []any {
		return []any{
			map[string]any{"role": "user", "content": "Draw me something."},
			map[string]any{"role": "assistant", "content": parts},
			map[string]any{"role": "user", "content": "What did you draw?"},
		}
	}
	count := func(messages []any) float64 {
		t.Helper()
		res := post(t, ts.url+"/v1/messages/count_tokens", map[string]any{"messages": messages})
		v, ok := path(res.json(t), "input_tokens").(float64)
		if res.status != 200 || !ok {
			t.Fatalf("count_tokens: %d %s", res.status, res.body)
		}
		return v
	}
	answer := func(messages []any) (prompt float64, text string) {
		t.Helper()
		// No tools: their long system prompt would drown an image of an
		// earlier turn for the noise model.
		res := post(t, ts.url+"/v1/messages", map[string]any{"messages": messages, "max_tokens": 16, "temperature": 0})
		v := res.json(t)
		if res.status != 200 {
			t.Fatalf("messages: %d %s", res.status, res.body)
		}
		in, _ := path(v, "usage", "input_tokens").(float64)
		cached, _ := path(v, "usage", "cache_read_input_tokens").(float64)
		return in + cached, string(res.body[strings.Index(string(res.body), `"content"`):strings.Index(string(res.body), `"stop_reason"`)])
	}
	for _, tc := range []struct {
		name                 string
		without, with, other []any
	}{
		{"tool_result", toolTurn(text("Here it is.")), toolTurn(text("Here it is."), image), toolTurn(text("Here it is."), other)},
		{"assistant turn", assistantTurn(text("A drawing.")), assistantTurn(text("A drawing."), image), assistantTurn(text("A drawing."), other)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := count(tc.with) - count(tc.without); got != cost {
				t.Errorf("count_tokens grows by %v with the image, want %v", got, cost)
			}
			pWithout, _ := answer(tc.without)
			pWith, aWith := answer(tc.with)
			if pWith-pWithout != cost {
				t.Errorf("the prompt grows by %v with the image, want %v", pWith-pWithout, cost)
			}
			// image1 is as large as image0 (the same token count) and
			// looks different.
			if _, aOther := answer(tc.other); aWith == aOther {
				t.Errorf("image0 and image1 give the same answer (%s): the pixels do not reach the model", aWith)
			}
		})
	}

	t.Run("system", func(t *testing.T) {
		res := post(t, ts.url+"/v1/messages", map[string]any{"max_tokens": 4, "system": []any{text("You see."), image},
			"messages": []any{map[string]any{"role": "user", "content": "Hi"}}})
		checkAnthropicError(t, res, "system.1 is an image block")
		res = post(t, ts.url+"/v1/messages", map[string]any{"max_tokens": 4,
			"messages": []any{map[string]any{"role": "system", "content": []any{image}}, map[string]any{"role": "user", "content": "Hi"}}})
		checkAnthropicError(t, res, "messages.0.content.0 is an image block")
	})

	t.Run("tool_result with another block", func(t *testing.T) {
		doc := map[string]any{"type": "document", "source": map[string]any{"type": "text", "media_type": "text/plain", "data": "x"}}
		checkAnthropicError(t, post(t, ts.url+"/v1/messages", map[string]any{"max_tokens": 4, "tools": tools, "messages": toolTurn(doc)}),
			`messages.2.content.0.content.0 is a "document" block`)
	})
}

// checkAnthropicError checks a 400 in Anthropic's shape whose message
// holds want.
func checkAnthropicError(t *testing.T, res response, want string) {
	t.Helper()
	v := res.json(t)
	msg, _ := path(v, "error", "message").(string)
	if res.status != 400 || v["type"] != "error" || path(v, "error", "type") != "invalid_request_error" || !strings.Contains(msg, want) {
		t.Errorf("want a 400 saying %q, got %d %s", want, res.status, res.body)
	}
}
