package chat

import (
	"encoding/json"
	"fmt"
)

// Message is one turn of a conversation, with the fields the Qwen chat
// templates read.
type Message struct {
	Role string
	// Content is nil, a string, or a list of content parts
	// ([{"type": "text", "text": …}, …]) as ordered JSON values.
	Content any
	// ReasoningContent is the thinking of an assistant turn, nil when there
	// is none (the template then looks for <think> in Content).
	ReasoningContent *string
	ToolCalls        []ToolCall
	// ToolCallID and Name identify the call a tool message answers.
	ToolCallID string
	Name       string
}

// ToolCall is a function call made by an assistant turn.
type ToolCall struct {
	ID       string
	Type     string
	Function FunctionCall
}

// FunctionCall names the function and its arguments.
type FunctionCall struct {
	Name string
	// Arguments is an *Object, or a string holding a JSON object as OpenAI
	// clients send it; the template needs an object, so a string is parsed
	// when rendering.
	Arguments any
}

// UnmarshalJSON reads an OpenAI-style message. Reasoning is accepted as
// reasoning_content (llama.cpp, vLLM) or reasoning (mlx-lm).
func (m *Message) UnmarshalJSON(data []byte) error {
	var aux struct {
		Role             string          `json:"role"`
		Content          json.RawMessage `json:"content"`
		ReasoningContent *string         `json:"reasoning_content"`
		Reasoning        *string         `json:"reasoning"`
		ToolCalls        []ToolCall      `json:"tool_calls"`
		ToolCallID       string          `json:"tool_call_id"`
		Name             string          `json:"name"`
	}
	if err := json.Unmarshal(data, &aux); err != nil {
		return err
	}
	*m = Message{Role: aux.Role, ToolCalls: aux.ToolCalls, ToolCallID: aux.ToolCallID, Name: aux.Name}
	m.ReasoningContent = aux.ReasoningContent
	if m.ReasoningContent == nil {
		m.ReasoningContent = aux.Reasoning
	}
	if len(aux.Content) > 0 {
		c, err := DecodeJSON(aux.Content)
		if err != nil {
			return fmt.Errorf("content: %w", err)
		}
		switch c.(type) {
		case nil, string, []any:
		default:
			return fmt.Errorf("content must be a string, a list of parts or null, not %s", jsonKind(c))
		}
		m.Content = c
	}
	return nil
}

// UnmarshalJSON reads {"id", "type", "function": {"name", "arguments"}}.
func (c *ToolCall) UnmarshalJSON(data []byte) error {
	var aux struct {
		ID       string       `json:"id"`
		Type     string       `json:"type"`
		Function FunctionCall `json:"function"`
	}
	if err := json.Unmarshal(data, &aux); err != nil {
		return err
	}
	*c = ToolCall{ID: aux.ID, Type: aux.Type, Function: aux.Function}
	return nil
}

// UnmarshalJSON keeps the arguments' key order, whether they come as an
// object or as a JSON string.
func (f *FunctionCall) UnmarshalJSON(data []byte) error {
	var aux struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if err := json.Unmarshal(data, &aux); err != nil {
		return err
	}
	*f = FunctionCall{Name: aux.Name}
	if len(aux.Arguments) > 0 {
		v, err := DecodeJSON(aux.Arguments)
		if err != nil {
			return fmt.Errorf("function %q arguments: %w", aux.Name, err)
		}
		f.Arguments = v
	}
	return nil
}

// RenderRequest is what a chat template is rendered with.
type RenderRequest struct {
	Messages []Message
	// Tools are the function definitions offered to the model, as ordered
	// JSON values ({"type": "function", "function": {…}}).
	Tools               []any
	AddGenerationPrompt bool
	// EnableThinking nil leaves the template's default (thinking on for
	// Qwen3.5/3.6).
	EnableThinking *bool
	// PreserveThinking keeps the reasoning of earlier assistant turns, in
	// templates that support it.
	PreserveThinking bool
	// Extra holds further template variables (chat_template_kwargs).
	Extra map[string]any
}

// DecodeRenderRequest reads {"messages", "tools", "add_generation_prompt",
// "enable_thinking", "preserve_thinking", "chat_template_kwargs"} keeping the
// key order of every object.
func DecodeRenderRequest(data []byte) (RenderRequest, error) {
	var aux struct {
		Messages            []Message       `json:"messages"`
		Tools               json.RawMessage `json:"tools"`
		AddGenerationPrompt bool            `json:"add_generation_prompt"`
		EnableThinking      *bool           `json:"enable_thinking"`
		PreserveThinking    bool            `json:"preserve_thinking"`
		Kwargs              json.RawMessage `json:"chat_template_kwargs"`
	}
	if err := json.Unmarshal(data, &aux); err != nil {
		return RenderRequest{}, fmt.Errorf("render request: %w", err)
	}
	req := RenderRequest{
		Messages:            aux.Messages,
		AddGenerationPrompt: aux.AddGenerationPrompt,
		EnableThinking:      aux.EnableThinking,
		PreserveThinking:    aux.PreserveThinking,
	}
	if len(aux.Tools) > 0 {
		tools, err := DecodeJSON(aux.Tools)
		if err != nil {
			return RenderRequest{}, fmt.Errorf("render request: tools: %w", err)
		}
		switch t := tools.(type) {
		case nil:
		case []any:
			req.Tools = t
		default:
			return RenderRequest{}, fmt.Errorf("render request: tools must be a list, not %s", jsonKind(tools))
		}
	}
	if len(aux.Kwargs) > 0 {
		kw, err := DecodeJSON(aux.Kwargs)
		if err != nil {
			return RenderRequest{}, fmt.Errorf("render request: chat_template_kwargs: %w", err)
		}
		if obj, ok := kw.(*Object); ok {
			req.Extra = map[string]any{}
			for _, k := range obj.Keys() {
				req.Extra[k], _ = obj.Get(k)
			}
		} else if kw != nil {
			return RenderRequest{}, fmt.Errorf("render request: chat_template_kwargs must be an object, not %s", jsonKind(kw))
		}
	}
	return req, nil
}
