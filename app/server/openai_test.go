package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/suzuran-app/suzuran/engine"
)

func userMessage(text string) []map[string]any {
	return []map[string]any{{"role": "user", "content": text}}
}

func TestChatCompletion(t *testing.T) {
	ts := startServer(t, loadModel(t, fixtureDir, engine.LoadOptions{}), nil)
	res := post(t, ts.url+"/v1/chat/completions", map[string]any{
		"model": "mlx-4bit", "messages": userMessage("Hello"), "max_tokens": 8, "temperature": 0,
	})
	if res.status != http.StatusOK {
		t.Fatalf("status %d: %s", res.status, res.body)
	}
	v := res.json(t)
	if v["object"] != "chat.completion" || !strings.HasPrefix(v["id"].(string), "chatcmpl-") || v["model"] != "mlx-4bit" {
		t.Errorf("envelope: %s", res.body)
	}
	if got := path(v, "choices", 0, "finish_reason"); got != "length" {
		t.Errorf("finish_reason %v, want length (max_tokens 8 cuts the noise model off)", got)
	}
	if got := path(v, "usage", "completion_tokens"); got != 8.0 {
		t.Errorf("completion_tokens %v, want 8", got)
	}
	prompt := path(v, "usage", "prompt_tokens").(float64)
	if prompt < 5 || path(v, "usage", "total_tokens") != prompt+8 {
		t.Errorf("usage %v", v["usage"])
	}
	// Thinking is on by default in the Qwen template: the output is
	// reasoning until </think>.
	if r, _ := path(v, "choices", 0, "message", "reasoning_content").(string); r == "" {
		t.Errorf("no reasoning_content with thinking on: %s", res.body)
	}
	// The same prompt again is served from the prefix cache.
	again := post(t, ts.url+"/v1/chat/completions", map[string]any{"messages": userMessage("Hello"), "max_tokens": 8, "temperature": 0}).json(t)
	if got := path(again, "usage", "prompt_tokens_details", "cached_tokens"); got != prompt-1 {
		t.Errorf("cached_tokens %v on the repeated prompt, want %v (all but the last prompt token)", got, prompt-1)
	}
	if path(again, "choices", 0, "message") == nil || fmt.Sprint(path(again, "choices", 0, "message")) != fmt.Sprint(path(v, "choices", 0, "message")) {
		t.Errorf("greedy answers differ:\n%v\n%v", path(again, "choices", 0, "message"), path(v, "choices", 0, "message"))
	}
}

func TestThinkingSwitches(t *testing.T) {
	ts := startServer(t, loadModel(t, fixtureDir, engine.LoadOptions{}), nil)
	for _, tc := range []struct {
		name  string
		extra map[string]any
		think bool
	}{
		{"default", nil, true},
		{"chat_template_kwargs off", map[string]any{"chat_template_kwargs": map[string]any{"enable_thinking": false}}, false},
		{"reasoning_effort none", map[string]any{"reasoning_effort": "none"}, false},
		{"reasoning_effort high", map[string]any{"reasoning_effort": "high"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := map[string]any{"messages": userMessage("Hi"), "max_tokens": 4, "temperature": 0}
			for k, v := range tc.extra {
				body[k] = v
			}
			v := post(t, ts.url+"/v1/chat/completions", body).json(t)
			_, hasReasoning := path(v, "choices", 0, "message").(map[string]any)["reasoning_content"]
			if hasReasoning != tc.think {
				t.Errorf("reasoning_content present %v, want %v: %v", hasReasoning, tc.think, v["choices"])
			}
			if n := path(v, "usage", "completion_tokens_details", "reasoning_tokens").(float64); (n > 0) != tc.think || n > 4 {
				t.Errorf("reasoning_tokens %v of 4 with thinking %v", n, tc.think)
			}
		})
	}
}

// streamChat streams a chat completion and returns its chunks (without
// [DONE]) and whether [DONE] ended the stream.
func streamChat(t *testing.T, url string, body map[string]any) ([]map[string]any, bool) {
	t.Helper()
	body["stream"] = true
	res := post(t, url+"/v1/chat/completions", body)
	if res.status != http.StatusOK || !strings.HasPrefix(res.header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d, Content-Type %q: %s", res.status, res.header.Get("Content-Type"), res.body)
	}
	var chunks []map[string]any
	done := false
	for _, ev := range readSSE(t, res.body) {
		if done {
			t.Fatalf("event after [DONE]: %s", ev.data)
		}
		if ev.data == "[DONE]" {
			done = true
			continue
		}
		chunks = append(chunks, decodeEvent(t, ev))
	}
	return chunks, done
}

func TestChatStreaming(t *testing.T) {
	ts := startServer(t, loadModel(t, fixtureDir, engine.LoadOptions{}), nil)
	request := func() map[string]any {
		return map[string]any{"messages": userMessage("Tell me"), "max_tokens": 12, "temperature": 0.9, "seed": 7,
			"stream_options": map[string]any{"include_usage": true}}
	}
	chunks, done := streamChat(t, ts.url, request())
	if !done {
		t.Fatal("the stream did not end with [DONE]")
	}
	if path(chunks[0], "choices", 0, "delta", "role") != "assistant" {
		t.Errorf("first chunk carries no role: %v", chunks[0])
	}
	usage := chunks[len(chunks)-1]
	if choices := usage["choices"].([]any); len(choices) != 0 || path(usage, "usage", "completion_tokens") != 12.0 {
		t.Errorf("last chunk is not the usage chunk: %v", usage)
	}
	last := chunks[len(chunks)-2]
	if path(last, "choices", 0, "finish_reason") != "length" {
		t.Errorf("finish_reason is not on the last choice chunk: %v", last)
	}
	var content, reasoning strings.Builder
	for i, c := range chunks[:len(chunks)-1] {
		if _, ok := c["usage"]; !ok || c["usage"] != nil {
			t.Errorf("chunk %d: usage %v, want null with include_usage", i, c["usage"])
		}
		if i < len(chunks)-2 && path(c, "choices", 0, "finish_reason") != nil {
			t.Errorf("chunk %d has a finish_reason before the end", i)
		}
		s, _ := path(c, "choices", 0, "delta", "content").(string)
		content.WriteString(s)
		s, _ = path(c, "choices", 0, "delta", "reasoning_content").(string)
		reasoning.WriteString(s)
	}

	// The same seed gives the same answer, streamed or not.
	body := request()
	delete(body, "stream_options")
	whole := post(t, ts.url+"/v1/chat/completions", body).json(t)
	wantContent, _ := path(whole, "choices", 0, "message", "content").(string)
	wantReasoning, _ := path(whole, "choices", 0, "message", "reasoning_content").(string)
	if content.String() != wantContent || reasoning.String() != wantReasoning {
		t.Errorf("streamed %q/%q, whole %q/%q with the same seed", reasoning.String(), content.String(), wantReasoning, wantContent)
	}

	// Without include_usage, no chunk has a usage field.
	chunks, _ = streamChat(t, ts.url, map[string]any{"messages": userMessage("Tell me"), "max_tokens": 3})
	for _, c := range chunks {
		if _, ok := c["usage"]; ok {
			t.Fatalf("usage without include_usage: %v", c)
		}
	}
}

// greedyText is the fixture's greedy completion of prompt.
func greedyText(t *testing.T, url, prompt string, maxTokens int) string {
	t.Helper()
	v := post(t, url+"/v1/completions", map[string]any{"prompt": prompt, "max_tokens": maxTokens, "temperature": 0}).json(t)
	return path(v, "choices", 0, "text").(string)
}

func TestStopStrings(t *testing.T) {
	ts := startServer(t, loadModel(t, fixtureDir, engine.LoadOptions{}), nil)
	full := greedyText(t, ts.url, "The quick brown fox", 24)
	stop := asciiStop(t, full)
	want := full[:strings.Index(full, stop)]
	for _, tc := range []struct {
		name string
		stop any
	}{
		{"string", stop},
		{"list", []string{"\x00never", stop}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := post(t, ts.url+"/v1/completions", map[string]any{"prompt": "The quick brown fox", "max_tokens": 24, "temperature": 0, "stop": tc.stop}).json(t)
			if got := path(v, "choices", 0, "text"); got != want {
				t.Errorf("text %q, want %q (cut before stop %q in %q)", got, want, stop, full)
			}
			if got := path(v, "choices", 0, "finish_reason"); got != "stop" {
				t.Errorf("finish_reason %v, want stop", got)
			}
		})
	}
	// Streamed, the stop string is never sent either.
	res := post(t, ts.url+"/v1/completions", map[string]any{"prompt": "The quick brown fox", "max_tokens": 24, "temperature": 0, "stop": stop, "stream": true})
	var text strings.Builder
	var finish any
	for _, ev := range readSSE(t, res.body) {
		if ev.data == "[DONE]" {
			continue
		}
		c := decodeEvent(t, ev)
		text.WriteString(path(c, "choices", 0, "text").(string))
		if f := path(c, "choices", 0, "finish_reason"); f != nil {
			finish = f
		}
	}
	if text.String() != want || finish != "stop" {
		t.Errorf("streamed %q finish %v, want %q stop", text.String(), finish, want)
	}
}

func TestCompletions(t *testing.T) {
	l := loadModel(t, fixtureDir, engine.LoadOptions{})
	ts := startServer(t, l, nil)
	e, _, _ := l.Current(t.Context())
	ids := e.Tokenizer().Encode("The quick brown fox")
	byText := greedyText(t, ts.url, "The quick brown fox", 6)
	v := post(t, ts.url+"/v1/completions", map[string]any{"prompt": ids, "max_tokens": 6, "temperature": 0}).json(t)
	if got := path(v, "choices", 0, "text"); got != byText {
		t.Errorf("token-id prompt gave %q, the same text as a string %q", got, byText)
	}
	if v["object"] != "text_completion" || path(v, "usage", "prompt_tokens") != float64(len(ids)) {
		t.Errorf("envelope or usage: %v", v)
	}
	v = post(t, ts.url+"/v1/completions", map[string]any{"prompt": []any{ids}, "max_tokens": 6, "temperature": 0}).json(t)
	if got := path(v, "choices", 0, "text"); got != byText {
		t.Errorf("a batch of one token list gave %q, want %q", got, byText)
	}
}

// checkError asserts an OpenAI-shaped error.
func checkError(t *testing.T, res response, status int, param string) {
	t.Helper()
	if res.status != status {
		t.Fatalf("status %d, want %d: %s", res.status, status, res.body)
	}
	v := res.json(t)
	e, ok := v["error"].(map[string]any)
	if !ok || e["message"] == "" || e["type"] == "" {
		t.Fatalf("not an OpenAI error: %s", res.body)
	}
	for _, k := range []string{"message", "type", "param", "code"} {
		if _, ok := e[k]; !ok {
			t.Errorf("error has no %q: %s", k, res.body)
		}
	}
	if param != "" && e["param"] != param {
		t.Errorf("param %v, want %s: %s", e["param"], param, res.body)
	}
}

func TestChatRequestErrors(t *testing.T) {
	ts := startServer(t, loadModel(t, fixtureDir, engine.LoadOptions{}), nil)
	msgs := userMessage("Hi")
	tool := map[string]any{"type": "function", "function": map[string]any{"name": "f", "parameters": map[string]any{"type": "object"}}}
	for _, tc := range []struct {
		name   string
		body   any
		status int
		param  string
	}{
		{"not JSON", `{"messages": [`, 400, ""},
		{"empty body", ``, 400, ""},
		{"array body", `[1,2]`, 400, ""},
		{"no messages", map[string]any{}, 400, "messages"},
		{"wrong type", map[string]any{"messages": msgs, "temperature": "hot"}, 400, "temperature"},
		{"negative temperature", map[string]any{"messages": msgs, "temperature": -1}, 400, "temperature"},
		{"top_p above 1", map[string]any{"messages": msgs, "top_p": 1.5}, 400, "top_p"},
		{"negative top_k", map[string]any{"messages": msgs, "top_k": -2}, 400, "top_k"},
		{"min_p above 1", map[string]any{"messages": msgs, "min_p": 3}, 400, "min_p"},
		{"n 2", map[string]any{"messages": msgs, "n": 2}, 400, "n"},
		{"max_tokens 0", map[string]any{"messages": msgs, "max_tokens": 0}, 400, "max_tokens"},
		{"max_completion_tokens -1", map[string]any{"messages": msgs, "max_completion_tokens": -1}, 400, "max_completion_tokens"},
		{"stop not text", map[string]any{"messages": msgs, "stop": 5}, 400, "stop"},
		{"unknown role", map[string]any{"messages": []any{map[string]any{"role": "robot", "content": "x"}}}, 400, "messages[0].role"},
		{"image file url", map[string]any{"messages": []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "image_url", "image_url": map[string]any{"url": "file:///etc/passwd"}}}}}}, 400, "messages[0].content[0].image_url.url"},
		{"unknown model", map[string]any{"model": "gpt-4o", "messages": msgs}, 404, "model"},
		{"required without tools", map[string]any{"messages": msgs, "tool_choice": "required"}, 400, "tool_choice"},
		{"named tool not offered", map[string]any{"messages": msgs, "tools": []any{tool}, "tool_choice": map[string]any{"type": "function", "function": map[string]any{"name": "g"}}}, 400, "tool_choice"},
		{"tool of another type", map[string]any{"messages": msgs, "tools": []any{map[string]any{"type": "web_search"}}}, 400, "tools[0].type"},
		{"bad response_format", map[string]any{"messages": msgs, "response_format": map[string]any{"type": "xml"}}, 400, "response_format.type"},
		{"bad tool arguments", map[string]any{"messages": []any{map[string]any{"role": "assistant", "tool_calls": []any{map[string]any{"id": "1", "type": "function", "function": map[string]any{"name": "f", "arguments": "[1"}}}}}}, 400, ""},
		{"enable_thinking not bool", map[string]any{"messages": msgs, "chat_template_kwargs": map[string]any{"enable_thinking": "yes"}}, 400, "chat_template_kwargs.enable_thinking"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkError(t, post(t, ts.url+"/v1/chat/completions", tc.body), tc.status, tc.param)
		})
	}
	// The server keeps serving after every bad request.
	if res := post(t, ts.url+"/v1/chat/completions", map[string]any{"messages": msgs, "max_tokens": 2}); res.status != 200 {
		t.Fatalf("after the bad requests: %d %s", res.status, res.body)
	}
}

func TestUnknownFieldsIgnored(t *testing.T) {
	ts := startServer(t, loadModel(t, fixtureDir, engine.LoadOptions{}), nil)
	res := post(t, ts.url+"/v1/chat/completions", map[string]any{
		"messages": userMessage("Hi"), "max_tokens": 2, "user": "u-1", "metadata": map[string]any{"a": "b"},
		"parallel_tool_calls": true, "service_tier": "auto", "store": false, "logit_bias": map[string]any{"5": 1},
		"logprobs": true, "top_logprobs": 2, "prediction": nil, "some_future_field": []any{1, 2},
		"stop": nil, "tools": nil, "tool_choice": nil, "response_format": nil, "n": nil, "temperature": nil, "stream_options": nil,
		"frequency_penalty": 0.5, "presence_penalty": 0.1, "repetition_penalty": 1.1, "min_p": 0.05, "top_k": 10, "top_p": 0.9,
	})
	if res.status != 200 {
		t.Fatalf("status %d: %s", res.status, res.body)
	}
	if v := res.json(t); len(path(v, "choices", 0, "logprobs", "content").([]any)) != 2 {
		t.Errorf("logprobs %v: want one entry per token", path(v, "choices", 0, "logprobs"))
	}
}

func TestPromptTooLong(t *testing.T) {
	ts := startServer(t, loadModel(t, fixtureDir, engine.LoadOptions{ContextTokens: 32}), nil)
	long := strings.Repeat("many words ", 40)
	res := post(t, ts.url+"/v1/chat/completions", map[string]any{"messages": userMessage(long)})
	checkError(t, res, 400, "messages")
	if code := path(res.json(t), "error", "code"); code != "context_length_exceeded" {
		t.Errorf("code %v", code)
	}
	checkError(t, post(t, ts.url+"/v1/completions", map[string]any{"prompt": long}), 400, "prompt")
	checkError(t, post(t, ts.url+"/v1/responses", map[string]any{"input": long}), 400, "input")
	anth := post(t, ts.url+"/v1/messages", map[string]any{"max_tokens": 4, "messages": userMessage(long)})
	if anth.status != 400 || path(anth.json(t), "error", "type") != "invalid_request_error" {
		t.Errorf("Anthropic prompt too long: %d %s", anth.status, anth.body)
	}
}

func TestCompletionErrors(t *testing.T) {
	ts := startServer(t, loadModel(t, fixtureDir, engine.LoadOptions{}), nil)
	for _, tc := range []struct {
		name  string
		body  any
		param string
	}{
		{"no prompt", map[string]any{}, "prompt"},
		{"empty prompt", map[string]any{"prompt": ""}, "prompt"},
		{"echo", map[string]any{"prompt": "a", "echo": true}, "echo"},
		{"batch of two", map[string]any{"prompt": []string{"a", "b"}}, "prompt"},
		{"id outside the vocabulary", map[string]any{"prompt": []int{1, 999999}}, ""},
		{"prompt object", map[string]any{"prompt": map[string]any{}}, "prompt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkError(t, post(t, ts.url+"/v1/completions", tc.body), 400, tc.param)
		})
	}
}

func TestModelsHealthEmbeddings(t *testing.T) {
	ts := startServer(t, loadModel(t, fixtureDir, engine.LoadOptions{ContextTokens: 4096}), nil)
	v := do(t, "GET", ts.url+"/v1/models", nil, nil).json(t)
	if path(v, "data", 0, "id") != "mlx-4bit" || path(v, "data", 0, "context_length") != 4096.0 || v["object"] != "list" {
		t.Errorf("/v1/models: %v", v)
	}
	if res := do(t, "GET", ts.url+"/v1/models/mlx-4bit", nil, nil); res.status != 200 {
		t.Errorf("/v1/models/mlx-4bit: %d", res.status)
	}
	checkError(t, do(t, "GET", ts.url+"/v1/models/gpt-4", nil, nil), 404, "model")
	h := do(t, "GET", ts.url+"/health", nil, nil)
	if hv := h.json(t); h.status != 200 || hv["status"] != "ready" || hv["model"] != "mlx-4bit" {
		t.Errorf("/health: %d %s", h.status, h.body)
	}
	res := post(t, ts.url+"/v1/embeddings", map[string]any{"input": "x", "model": "mlx-4bit"})
	checkError(t, res, 400, "model")
	if !strings.Contains(string(res.body), "no embeddings") {
		t.Errorf("embeddings error does not say why: %s", res.body)
	}
	checkError(t, do(t, "GET", ts.url+"/v1/nothing", nil, nil), 404, "")
	checkError(t, do(t, "GET", ts.url+"/", nil, nil), 404, "")
	checkError(t, do(t, "GET", ts.url+"/v1/chat/completions", nil, nil), 405, "")
}

func TestResponseIsValidJSONForAnyText(t *testing.T) {
	// writeJSON escapes what the model writes: a control character or a
	// half-decoded byte never breaks the JSON.
	ts := startServer(t, loadModel(t, fixtureDir, engine.LoadOptions{}), nil)
	res := post(t, ts.url+"/v1/completions", map[string]any{"prompt": "\x01\u2028<think>", "max_tokens": 16, "seed": 3})
	var v any
	if err := json.Unmarshal(res.body, &v); err != nil || res.status != 200 {
		t.Fatalf("status %d, %v: %s", res.status, err, res.body)
	}
}

// asciiStop picks a stop string from the middle of a greedy answer: two
// ASCII letters after the first few bytes (the noise model writes broken
// UTF-8 too, which a stop string cannot name).
func asciiStop(t *testing.T, text string) string {
	t.Helper()
	isLetter := func(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
	for i := 3; i+1 < len(text); i++ {
		if isLetter(text[i]) && isLetter(text[i+1]) {
			return text[i : i+2]
		}
	}
	t.Fatalf("no stop string to pick in %q", text)
	return ""
}

// logprobs: true returns one entry per generated token (10 tokens, none of
// them the end of the turn: max_tokens cuts the noise model off), each with
// its text, its bytes, a logprob no larger than the best alternative's, and
// top_logprobs alternatives, most likely first; greedy picks the most likely
// token. Streaming hands out the same entries over its chunks, and a request
// without logprobs gets null.
func TestChatCompletionLogprobs(t *testing.T) {
	ts := startServer(t, loadModel(t, fixtureDir, engine.LoadOptions{}), nil)
	body := func() map[string]any {
		return map[string]any{"messages": userMessage("Hello"), "max_tokens": 10, "temperature": 0,
			"logprobs": true, "top_logprobs": 2}
	}
	v := post(t, ts.url+"/v1/chat/completions", body()).json(t)
	content, _ := path(v, "choices", 0, "logprobs", "content").([]any)
	if len(content) != 10 {
		t.Fatalf("%d logprob entries for 10 tokens: %v", len(content), path(v, "choices", 0, "logprobs"))
	}
	var text strings.Builder
	for i, c := range content {
		entry := c.(map[string]any)
		lp := entry["logprob"].(float64)
		top := entry["top_logprobs"].([]any)
		if len(top) != 2 || !(lp <= 0) {
			t.Fatalf("entry %d: %v", i, entry)
		}
		best := top[0].(map[string]any)
		if best["token"] != entry["token"] || best["logprob"].(float64) != lp || top[1].(map[string]any)["logprob"].(float64) > lp {
			t.Errorf("entry %d: greedy token %v is not the most likely of %v", i, entry, top)
		}
		raw := entry["bytes"].([]any)
		for _, b := range raw {
			text.WriteByte(byte(b.(float64)))
		}
	}
	message := path(v, "choices", 0, "message").(map[string]any)
	reasoning, _ := message["reasoning_content"].(string)
	answer, _ := message["content"].(string)
	// The noise model writes byte tokens that are not whole characters:
	// the message has U+FFFD where the bytes are invalid UTF-8.
	got := strings.ToValidUTF8(text.String(), "")
	want := strings.ReplaceAll(strings.TrimSpace(reasoning+answer), "\uFFFD", "")
	if !strings.Contains(got, want) {
		t.Errorf("the tokens' bytes %q do not hold the answer %q", got, want)
	}

	chunks, _ := streamChat(t, ts.url, body())
	var streamed []any
	for _, c := range chunks {
		if lps, ok := path(c, "choices", 0, "logprobs", "content").([]any); ok {
			streamed = append(streamed, lps...)
		}
	}
	if fmt.Sprint(streamed) != fmt.Sprint(content) {
		t.Errorf("streamed logprobs differ:\n%v\n%v", streamed, content)
	}

	plain := post(t, ts.url+"/v1/chat/completions", map[string]any{"messages": userMessage("Hello"), "max_tokens": 4, "temperature": 0}).json(t)
	if lp, ok := path(plain, "choices", 0).(map[string]any)["logprobs"]; !ok || lp != nil {
		t.Errorf("logprobs without asking: %v", lp)
	}
}

// legacyLogprobsOf reads a completion choice's legacy logprobs.
type legacyLogprobsOf struct {
	Tokens        []string             `json:"tokens"`
	TokenLogprobs []float64            `json:"token_logprobs"`
	TopLogprobs   []map[string]float64 `json:"top_logprobs"`
	TextOffset    []int                `json:"text_offset"`
}

func decodeLegacyLogprobs(t *testing.T, v any) legacyLogprobsOf {
	t.Helper()
	data, _ := json.Marshal(v)
	var lp legacyLogprobsOf
	if err := json.Unmarshal(data, &lp); err != nil {
		t.Fatalf("logprobs %s: %v", data, err)
	}
	return lp
}

// asciiOnly keeps the ASCII characters of s: the noise model writes byte
// tokens that are parts of characters, which read as U+FFFD one by one and
// as the character together, while ASCII is always whole tokens.
func asciiOnly(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 128 {
			return r
		}
		return -1
	}, s)
}

// /v1/completions with logprobs N answers in the legacy shape: for each of
// the 10 generated tokens (max_tokens cuts the noise model off) its text,
// its logprob, a map of the N most likely tokens (and the chosen one) to
// theirs, and where its text starts. Greedy, the chosen token is the most
// likely, so its logprob is the map's largest, exactly (both are the same
// number from the engine). Streamed, the chunks carry the same entries.
func TestCompletionLogprobs(t *testing.T) {
	ts := startServer(t, loadModel(t, fixtureDir, engine.LoadOptions{}), nil)
	body := func(logprobs int, stream bool) map[string]any {
		return map[string]any{"prompt": "The quick brown fox", "max_tokens": 10, "temperature": 0, "logprobs": logprobs, "stream": stream}
	}
	for _, n := range []int{0, 2, 5} {
		v := post(t, ts.url+"/v1/completions", body(n, false)).json(t)
		lp := decodeLegacyLogprobs(t, path(v, "choices", 0, "logprobs"))
		if len(lp.Tokens) != 10 || len(lp.TokenLogprobs) != 10 || len(lp.TopLogprobs) != 10 || len(lp.TextOffset) != 10 {
			t.Fatalf("logprobs %d: %d tokens, %d logprobs, %d top, %d offsets; want 10 of each: %+v",
				n, len(lp.Tokens), len(lp.TokenLogprobs), len(lp.TopLogprobs), len(lp.TextOffset), lp)
		}
		offset := 0
		for i, tok := range lp.Tokens {
			chosen := lp.TokenLogprobs[i]
			top := lp.TopLogprobs[i]
			if !(chosen <= 0) || top[tok] != chosen {
				t.Errorf("logprobs %d, token %d %q: logprob %v, in its map %v", n, i, tok, chosen, top)
			}
			// Up to n alternatives and the chosen token (fewer where two
			// tokens read the same); with n 0, the chosen token alone.
			if len(top) < 1 || len(top) > n+1 || (n == 0 && len(top) != 1) {
				t.Errorf("logprobs %d, token %d: %d entries in %v", n, i, len(top), top)
			}
			for alt, altLogprob := range top {
				if altLogprob > chosen {
					t.Errorf("logprobs %d, token %d: greedy chose %q (%v) over the more likely %q (%v)", n, i, tok, chosen, alt, altLogprob)
				}
			}
			if lp.TextOffset[i] != offset {
				t.Errorf("logprobs %d, token %d: text_offset %d, want %d", n, i, lp.TextOffset[i], offset)
			}
			offset += utf8.RuneCountInString(tok)
		}
		text := path(v, "choices", 0, "text").(string)
		if got := asciiOnly(strings.Join(lp.Tokens, "")); got != asciiOnly(text) {
			t.Errorf("logprobs %d: the tokens %q do not spell the text %q", n, lp.Tokens, text)
		}

		// Streamed: the same entries, spread over the chunks.
		var streamed legacyLogprobsOf
		for _, ev := range readSSE(t, post(t, ts.url+"/v1/completions", body(n, true)).body) {
			if ev.data == "[DONE]" {
				continue
			}
			c := decodeEvent(t, ev)
			if choices := path(c, "choices").([]any); len(choices) == 0 {
				continue
			}
			part := decodeLegacyLogprobs(t, path(c, "choices", 0, "logprobs"))
			streamed.Tokens = append(streamed.Tokens, part.Tokens...)
			streamed.TokenLogprobs = append(streamed.TokenLogprobs, part.TokenLogprobs...)
			streamed.TopLogprobs = append(streamed.TopLogprobs, part.TopLogprobs...)
			streamed.TextOffset = append(streamed.TextOffset, part.TextOffset...)
		}
		if fmt.Sprint(streamed) != fmt.Sprint(lp) {
			t.Errorf("logprobs %d: streamed logprobs differ:\n%+v\n%+v", n, streamed, lp)
		}
	}

	plain := post(t, ts.url+"/v1/completions", map[string]any{"prompt": "The quick brown fox", "max_tokens": 4, "temperature": 0}).json(t)
	if lp, ok := path(plain, "choices", 0).(map[string]any)["logprobs"]; !ok || lp != nil {
		t.Errorf("logprobs without asking: %v", lp)
	}
	for _, n := range []int{-1, 21} {
		checkError(t, post(t, ts.url+"/v1/completions", map[string]any{"prompt": "x", "logprobs": n}), 400, "logprobs")
	}
}
