package chat

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ardanlabs/jinja"

	"github.com/suzuran-app/suzuran/engine/tokenizer"
)

// Template is a model's compiled chat template. It is safe for concurrent
// use.
type Template struct {
	tmpl *jinja.Template
	// Source is the template text.
	Source string
	// origin names where the template came from, for error messages.
	origin string
	// specials are bos_token, eos_token, … from tokenizer_config.json,
	// which transformers passes to every template.
	specials map[string]string
}

// LoadTemplate reads the chat template of the model folder dir:
// chat_template.jinja when present (as current checkpoints ship it), else
// the chat_template field of tokenizer_config.json.
func LoadTemplate(dir string) (*Template, error) {
	// A missing folder would otherwise surface as a missing template field,
	// which sends the user looking in the wrong place.
	if fi, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("chat template: there is no folder %s: pass the model folder that holds chat_template.jinja or tokenizer_config.json", dir)
	} else if err != nil {
		return nil, fmt.Errorf("chat template: %w", err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("chat template: %s is not a folder: pass the model folder that holds chat_template.jinja or tokenizer_config.json", dir)
	}
	configPath := filepath.Join(dir, "tokenizer_config.json")
	var config map[string]json.RawMessage
	if data, err := os.ReadFile(configPath); err == nil {
		if err := json.Unmarshal(data, &config); err != nil {
			return nil, fmt.Errorf("chat template: %s: %w", configPath, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("chat template: %w", err)
	}

	origin := filepath.Join(dir, "chat_template.jinja")
	source, err := os.ReadFile(origin)
	switch {
	case err == nil:
	case errors.Is(err, os.ErrNotExist):
		origin = configPath + " (chat_template)"
		s, ferr := templateFromConfig(config)
		if ferr != nil {
			return nil, fmt.Errorf("chat template: %s has no chat_template.jinja and %s: %w", dir, configPath, ferr)
		}
		source = []byte(s)
	default:
		return nil, fmt.Errorf("chat template: %w", err)
	}

	t, err := compile(string(source), origin)
	if err != nil {
		return nil, err
	}
	for _, name := range []string{"bos_token", "eos_token", "pad_token", "unk_token", "sep_token", "cls_token", "mask_token"} {
		if s, ok := tokenString(config[name]); ok {
			t.specials[name] = s
		}
	}
	return t, nil
}

// templateFromConfig returns tokenizer_config.json's chat_template, which
// is either a string or a list of named templates (then "default").
func templateFromConfig(config map[string]json.RawMessage) (string, error) {
	raw, ok := config["chat_template"]
	if !ok {
		return "", errors.New("no chat_template field")
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var named []struct {
		Name     string `json:"name"`
		Template string `json:"template"`
	}
	if err := json.Unmarshal(raw, &named); err != nil {
		return "", fmt.Errorf("chat_template is neither a string nor a list of named templates: %w", err)
	}
	for _, n := range named {
		if n.Name == "default" {
			return n.Template, nil
		}
	}
	return "", errors.New("chat_template lists no template named \"default\"")
}

// tokenString reads a special token given as a string or as an
// AddedToken object {"content": …}.
func tokenString(raw json.RawMessage) (string, bool) {
	if len(raw) == 0 {
		return "", false
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, true
	}
	var obj struct {
		Content *string `json:"content"`
	}
	if err := json.Unmarshal(raw, &obj); err == nil && obj.Content != nil {
		return *obj.Content, true
	}
	return "", false
}

// ParseTemplate compiles a chat template given as text.
func ParseTemplate(source string) (*Template, error) {
	return compile(source, "chat template")
}

func compile(source, origin string) (*Template, error) {
	tmpl, err := jinja.Compile(source)
	if err != nil {
		return nil, fmt.Errorf("chat template %s does not compile: %w", origin, err)
	}
	return &Template{tmpl: tmpl, Source: source, origin: origin, specials: map[string]string{}}, nil
}

// Render returns the prompt text for req, each ImagePart's <|image_pad|>
// repeated to its token count. Errors raised by the template
// itself (raise_exception, such as "No user query found in messages.") come
// back with the template's own message.
func (t *Template) Render(req RenderRequest) (string, error) {
	data, err := t.variables(req)
	if err != nil {
		return "", err
	}
	out, err := t.tmpl.RenderValues(data)
	if err != nil {
		return "", fmt.Errorf("chat template %s: %w", t.origin, err)
	}
	return expandImages(out, req.Messages)
}

// variables builds the template's variables the way transformers'
// apply_chat_template does: messages, tools (None when absent),
// add_generation_prompt, the special tokens, and keyword arguments only
// when given, so that `enable_thinking is defined` tests behave the same.
func (t *Template) variables(req RenderRequest) (map[string]jinja.Value, error) {
	data := make(map[string]jinja.Value, 8+len(req.Extra))
	for k, v := range t.specials {
		data[k] = jinja.NewString(v)
	}
	for k, v := range req.Extra {
		val, err := toValue(v)
		if err != nil {
			return nil, fmt.Errorf("chat_template_kwargs %q: %w", k, err)
		}
		data[k] = val
	}

	messages := make([]jinja.Value, len(req.Messages))
	for i, m := range req.Messages {
		v, err := messageValue(m)
		if err != nil {
			return nil, fmt.Errorf("messages[%d]: %w", i, err)
		}
		messages[i] = v
	}
	data["messages"] = jinja.NewList(messages)

	data["tools"] = jinja.None()
	if len(req.Tools) > 0 {
		tools, err := toValue(req.Tools)
		if err != nil {
			return nil, fmt.Errorf("tools: %w", err)
		}
		data["tools"] = tools
	}
	data["add_generation_prompt"] = jinja.NewBool(req.AddGenerationPrompt)
	if req.EnableThinking != nil {
		data["enable_thinking"] = jinja.NewBool(*req.EnableThinking)
	}
	if req.PreserveThinking {
		data["preserve_thinking"] = jinja.NewBool(true)
	}
	return data, nil
}

func messageValue(m Message) (jinja.Value, error) {
	v := jinja.NewDict()
	d := v.AsDict()
	d.Set("role", jinja.NewString(m.Role))
	content, err := toValue(m.Content)
	if err != nil {
		return v, fmt.Errorf("content: %w", err)
	}
	d.Set("content", content)
	if m.ReasoningContent != nil {
		d.Set("reasoning_content", jinja.NewString(*m.ReasoningContent))
	}
	if len(m.ToolCalls) > 0 {
		calls := make([]jinja.Value, len(m.ToolCalls))
		for i, c := range m.ToolCalls {
			cv, err := toolCallValue(c)
			if err != nil {
				return v, fmt.Errorf("tool_calls[%d]: %w", i, err)
			}
			calls[i] = cv
		}
		d.Set("tool_calls", jinja.NewList(calls))
	}
	if m.ToolCallID != "" {
		d.Set("tool_call_id", jinja.NewString(m.ToolCallID))
	}
	if m.Name != "" {
		d.Set("name", jinja.NewString(m.Name))
	}
	return v, nil
}

func toolCallValue(c ToolCall) (jinja.Value, error) {
	args := c.Function.Arguments
	if s, ok := args.(string); ok {
		// OpenAI clients send arguments as a JSON string; the template
		// iterates them as a mapping.
		parsed, err := DecodeJSON([]byte(s))
		if err != nil {
			return jinja.Undefined(), fmt.Errorf("function %q arguments are not valid JSON: %w", c.Function.Name, err)
		}
		args = parsed
	}
	if args == nil {
		args = NewObject()
	}
	switch args.(type) {
	case *Object, map[string]any:
	default:
		return jinja.Undefined(), fmt.Errorf("function %q arguments must be a JSON object, not %s", c.Function.Name, jsonKind(args))
	}
	argsValue, err := toValue(args)
	if err != nil {
		return jinja.Undefined(), fmt.Errorf("function %q arguments: %w", c.Function.Name, err)
	}
	fn := jinja.NewDict()
	fn.AsDict().Set("name", jinja.NewString(c.Function.Name))
	fn.AsDict().Set("arguments", argsValue)

	v := jinja.NewDict()
	if c.ID != "" {
		v.AsDict().Set("id", jinja.NewString(c.ID))
	}
	typ := c.Type
	if typ == "" {
		typ = "function"
	}
	v.AsDict().Set("type", jinja.NewString(typ))
	v.AsDict().Set("function", fn)
	return v, nil
}

// Prompt is a rendered conversation with its token ids.
type Prompt struct {
	Text string
	IDs  []int
	// Checkpoints are the positions worth snapshotting for the next turn
	// (see PromptCheckpoints).
	Checkpoints []int
	// Images are the request's ImageParts in prompt order: the k-th run of
	// <|image_pad|> ids is the k-th image's.
	Images []ImagePart
}

// Encode renders req and tokenizes the result, special tokens included.
func (t *Template) Encode(tok *tokenizer.Tokenizer, req RenderRequest) (Prompt, error) {
	text, err := t.Render(req)
	if err != nil {
		return Prompt{}, err
	}
	ids := tok.EncodeWithSpecials(text)
	return Prompt{Text: text, IDs: ids, Checkpoints: PromptCheckpoints(tok, req, ids), Images: req.Images()}, nil
}

// assistantHeader is how Qwen templates open an assistant turn.
const assistantHeader = "<|im_start|>assistant\n"

// PromptCheckpoints returns where the next turn of the conversation will
// stop matching this prompt (ids, rendered from req): the token count just
// past the "<|im_start|>assistant\n" of the first assistant turn after the
// last user query, counting the generation prompt as a turn. It returns nil
// when no assistant turn follows the last user query.
//
// The template renders assistant turns after the last user query with their
// reasoning ("<|im_start|>assistant\n<think>\n…") and earlier ones without
// it ("<|im_start|>assistant\n" and the answer). When the user speaks next,
// all those turns move before the last query and lose their reasoning, so
// the new prompt departs from the old one right after the first of their
// headers. A state snapshot there is the longest the next user turn can
// reuse. (When tool results come next instead, nothing is dropped, and the
// whole previous sequence is reusable: compare with CommonPrefixLen.)
//
// The header's newline is a token of its own in both renderings, because
// the template trims what follows it, so the position is the same in both.
func PromptCheckpoints(tok *tokenizer.Tokenizer, req RenderRequest, ids []int) []int {
	turns := 0
	if req.AddGenerationPrompt {
		turns++
	}
	for i := len(req.Messages) - 1; i >= 0 && !isUserQuery(req.Messages[i]); i-- {
		if req.Messages[i].Role == "assistant" {
			turns++
		}
	}
	if turns == 0 {
		return nil
	}
	header := tok.EncodeWithSpecials(assistantHeader)
	var ends []int
	for i := 0; i+len(header) <= len(ids); i++ {
		if equalInts(ids[i:i+len(header)], header) {
			ends = append(ends, i+len(header))
			i += len(header) - 1
		}
	}
	if len(ends) < turns {
		return nil
	}
	return []int{ends[len(ends)-turns]}
}

// isUserQuery applies the template's test for the last user query: a user
// message that is not a wrapped tool response.
func isUserQuery(m Message) bool {
	if m.Role != "user" {
		return false
	}
	text := strings.TrimSpace(contentText(m.Content))
	return !(strings.HasPrefix(text, "<tool_response>") && strings.HasSuffix(text, "</tool_response>"))
}

// contentText is the text of a message's content: the string, or the text
// parts of a list.
func contentText(content any) string {
	switch c := content.(type) {
	case string:
		return c
	case []any:
		var b strings.Builder
		for _, part := range c {
			if obj, ok := part.(*Object); ok {
				if text, ok := obj.Get("text"); ok {
					if s, ok := text.(string); ok {
						b.WriteString(s)
					}
				}
			}
		}
		return b.String()
	}
	return ""
}

// CommonPrefixLen returns how many leading ids a and b share.
func CommonPrefixLen(a, b []int) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// String returns where the template came from.
func (t *Template) String() string { return strings.TrimSpace(t.origin) }
