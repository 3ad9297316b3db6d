package server

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/suzuran-app/suzuran/engine"
)

// TestMessagesContextErrors: the Anthropic route words the context's
// errors as Anthropic does, with the numbers where Claude Code's patterns
// find them: "prompt is too long: N tokens > M maximum" (it compacts) and
// "input length and `max_tokens` exceed context limit: N + M > C" (it
// retries with max_tokens C - N - 1000, which must then be answered).
func TestMessagesContextErrors(t *testing.T) {
	const ctx = 256
	ts := startServer(t, loadModel(t, fixtureDir, engine.LoadOptions{ContextTokens: ctx}), nil)
	tooLong := regexp.MustCompile(`^prompt is too long: (\d+) tokens > (\d+) maximum$`)
	overflow := regexp.MustCompile("^input length and `max_tokens` exceed context limit: (\\d+) \\+ (\\d+) > (\\d+)")
	errorOf := func(res response) string {
		t.Helper()
		v := res.json(t)
		if res.status != 400 || v["type"] != "error" || path(v, "error", "type") != "invalid_request_error" {
			t.Fatalf("want a 400 in Anthropic's shape: %d %s", res.status, res.body)
		}
		return path(v, "error", "message").(string)
	}

	long := strings.Repeat("word ", 400)
	msg := errorOf(post(t, ts.url+"/v1/messages", map[string]any{"max_tokens": 1, "messages": userMessage(long)}))
	m := tooLong.FindStringSubmatch(msg)
	if m == nil {
		t.Fatalf("prompt over the context: %q", msg)
	}
	n, _ := strconv.Atoi(m[1])
	if max, _ := strconv.Atoi(m[2]); n <= max || max != ctx-1 {
		t.Errorf("%q: want N > M and M = %d", msg, ctx-1)
	}
	// Counting stops at the context (a huge prompt costs no more than the
	// context's worth of work): count_tokens refuses it in the same words.
	if again := errorOf(post(t, ts.url+"/v1/messages/count_tokens", map[string]any{"messages": userMessage(long)})); again != msg {
		t.Errorf("count_tokens says %q, messages %q", again, msg)
	}
	// A prompt that fits is counted exactly, and its refusal for max_tokens
	// names the same count.
	fits := map[string]any{"messages": userMessage(strings.Repeat("word ", 40))}
	count := post(t, ts.url+"/v1/messages/count_tokens", fits).json(t)
	fits["max_tokens"] = ctx
	over := overflow.FindStringSubmatch(errorOf(post(t, ts.url+"/v1/messages", fits)))
	if over == nil || over[1] != fmt.Sprint(count["input_tokens"]) {
		t.Errorf("count_tokens %v, the max_tokens refusal %v", count["input_tokens"], over)
	}

	body := map[string]any{"max_tokens": ctx, "temperature": 0, "messages": userMessage("Hi"), "thinking": map[string]any{"type": "disabled"}}
	msg = errorOf(post(t, ts.url+"/v1/messages", body))
	m = overflow.FindStringSubmatch(msg)
	if m == nil {
		t.Fatalf("max_tokens over the context: %q", msg)
	}
	in, _ := strconv.Atoi(m[1])
	if m[2] != fmt.Sprint(ctx) || m[3] != fmt.Sprint(ctx) || in < 1 || in >= ctx {
		t.Errorf("%q: want input + %d > %d", msg, ctx, ctx)
	}
	// What fits is answered: the prompt and max_tokens filling the context.
	body["max_tokens"] = ctx - in
	if res := post(t, ts.url+"/v1/messages", body); res.status != 200 {
		t.Errorf("max_tokens %d with a %d-token prompt: %d %s", ctx-in, in, res.status, res.body)
	}
}

// TestUnauthorizedNoRetry: every 401 says x-should-retry false, which the
// SDKs and Claude Code obey instead of retrying a wrong key.
func TestUnauthorizedNoRetry(t *testing.T) {
	ts := startServer(t, loadModel(t, fixtureDir, engine.LoadOptions{}), func(c *Config) { c.APIKey = "sk-right" })
	for _, p := range []string{"/v1/messages", "/v1/chat/completions", "/v1/responses", "/v1/models"} {
		method := "POST"
		if p == "/v1/models" {
			method = "GET"
		}
		res := do(t, method, ts.url+p, map[string]any{"max_tokens": 1, "messages": userMessage("x")}, map[string]string{"x-api-key": "sk-wrong"})
		if res.status != 401 || res.header.Get("X-Should-Retry") != "false" {
			t.Errorf("%s: %d, x-should-retry %q", p, res.status, res.header.Get("X-Should-Retry"))
		}
	}
}

// TestNoControlTokenText: the demo model, thinking, samples <|im_start|>
// among its first tokens (greedy); the token is generated (its logprob
// entry says so) but its text is never sent, streamed or not.
func TestNoControlTokenText(t *testing.T) {
	ts := startServer(t, loadModel(t, demoDir, engine.LoadOptions{}), nil)
	body := map[string]any{"messages": userMessage("Hi"), "max_tokens": 8, "temperature": 0, "logprobs": true,
		"chat_template_kwargs": map[string]any{"enable_thinking": true}}
	v := post(t, ts.url+"/v1/chat/completions", body).json(t)
	generated := false
	for _, lp := range path(v, "choices", 0, "logprobs", "content").([]any) {
		generated = generated || path(lp, "token") == "<|im_start|>"
	}
	if !generated {
		t.Fatalf("the demo model no longer samples <|im_start|> here; pick another prompt: %v", v)
	}
	whole := fmt.Sprint(path(v, "choices", 0, "message", "reasoning_content"), path(v, "choices", 0, "message", "content"))
	body["stream"] = true
	delete(body, "logprobs") // the logprobs name the token, as they should
	streamed := string(post(t, ts.url+"/v1/chat/completions", body).body)
	for name, text := range map[string]string{"whole": whole, "streamed": streamed} {
		if strings.Contains(text, "<|im_start|>") || strings.Contains(text, `\u003c|im_start|\u003e`) {
			t.Errorf("%s: a control token as text: %s", name, text)
		}
	}
}

// TestMessagesOutputFormat: output_config.format (a json_schema) constrains
// the answer as response_format does, thinking or not: the text parses and
// follows the schema. A build without constrained sampling refuses it,
// naming the field; it is never ignored.
func TestMessagesOutputFormat(t *testing.T) {
	ts := startServer(t, loadModel(t, fixtureDir, engine.LoadOptions{}), nil)
	schema := map[string]any{"type": "object", "properties": map[string]any{
		"answer": map[string]any{"type": "string", "enum": []string{"yes", "no"}}}, "required": []string{"answer"}, "additionalProperties": false}
	format := map[string]any{"format": map[string]any{"type": "json_schema", "schema": schema}}
	res := post(t, ts.url+"/v1/messages", map[string]any{"max_tokens": 300, "temperature": 0, "messages": userMessage("JSON please"), "output_config": format})
	v := res.json(t)
	if constrain == nil {
		if res.status != 400 || !strings.Contains(fmt.Sprint(path(v, "error", "message")), "output_config.format") {
			t.Errorf("%d %s", res.status, res.body)
		}
		return
	}
	text, _ := path(v, "content", 0, "text").(string)
	var out map[string]any
	if err := json.Unmarshal([]byte(text), &out); err != nil || (out["answer"] != "yes" && out["answer"] != "no") || len(out) != 1 {
		t.Errorf("output %q (%v): %s", text, err, res.body)
	}
	forced := post(t, ts.url+"/v1/messages", map[string]any{"max_tokens": 300, "messages": userMessage("x"), "output_config": format,
		"tools": []any{map[string]any{"name": "f", "input_schema": map[string]any{"type": "object"}}}, "tool_choice": map[string]any{"type": "any"}})
	if forced.status != 400 || !strings.Contains(string(forced.body), "output_config.format") {
		t.Errorf("format with a forced tool: %d %s", forced.status, forced.body)
	}
}
