package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/suzuran-app/suzuran/engine"
	"github.com/suzuran-app/suzuran/engine/chat"
)

// messagesRequest is POST /v1/messages, the Anthropic Messages API as
// Claude Code and the Anthropic SDKs send it.
type messagesRequest struct {
	Model         string             `json:"model"`
	MaxTokens     *int               `json:"max_tokens"`
	Messages      []anthropicMessage `json:"messages"`
	System        orderedJSON        `json:"system"`
	StopSequences []string           `json:"stop_sequences"`
	Stream        bool               `json:"stream"`
	samplingFields
	Tools      orderedJSON `json:"tools"`
	ToolChoice orderedJSON `json:"tool_choice"`
	Thinking   *struct {
		Type         string `json:"type"`
		BudgetTokens *int   `json:"budget_tokens"`
	} `json:"thinking"`
	// OutputConfig's format (a json_schema) constrains the answer as
	// OpenAI's response_format does. Claude Code's other fields:
	// context_management (what it asks the server to clear from long
	// conversations: nothing is stored here, so nothing to clear), metadata
	// (a user id for abuse tracking) and output_config's effort have no
	// meaning on a local model and are read as nothing; they are never
	// refused.
	OutputConfig *struct {
		Format orderedJSON `json:"format"`
	} `json:"output_config"`
}

// minThinkingBudget is the smallest thinking.budget_tokens Anthropic's API
// accepts.
const minThinkingBudget = 1024

type anthropicMessage struct {
	Role    string      `json:"role"`
	Content orderedJSON `json:"content"`
}

// turn turns an Anthropic request into the conversation the template
// renders: system blocks into a system message, tool_use blocks into the
// assistant's tool calls, tool_result blocks into tool messages.
func (req *messagesRequest) turn(countOnly bool) (*chatTurn, error) {
	maxTokens := 0
	if !countOnly {
		if req.MaxTokens == nil {
			return nil, badRequest("max_tokens", "max_tokens: field required")
		}
		if *req.MaxTokens < 1 {
			return nil, badRequest("max_tokens", "max_tokens %d: must be at least 1", *req.MaxTokens)
		}
		maxTokens = *req.MaxTokens
	}
	if len(req.Messages) == 0 {
		return nil, badRequest("messages", "messages: at least one message is required")
	}
	messages, err := req.conversation()
	if err != nil {
		return nil, err
	}
	tools, err := anthropicTools(req.Tools)
	if err != nil {
		return nil, err
	}
	choice, name := "auto", ""
	if req.ToolChoice.Set && req.ToolChoice.Value != nil {
		switch typ := stringField(req.ToolChoice.Value, "type"); typ {
		case "auto", "none":
			choice = typ
		case "any":
			choice = "required"
			if len(tools) == 0 {
				return nil, badRequest("tool_choice", "tool_choice any needs tools")
			}
		case "tool":
			choice, name = "function", stringField(req.ToolChoice.Value, "name")
			if err := checkToolName(tools, name, "tool_choice"); err != nil {
				return nil, err
			}
		default:
			return nil, badRequest("tool_choice.type", "tool_choice.type %q: use auto, any, tool or none", typ)
		}
	}
	var constraint *constraintSpec
	if req.OutputConfig != nil {
		if constraint, err = decodeResponseFormat(req.OutputConfig.Format, "output_config.format"); err != nil {
			return nil, err
		}
		if constraint != nil && (choice == "required" || choice == "function") {
			return nil, badRequest("output_config.format", "output_config.format and a forced tool_choice ask for two different answers: use tool_choice auto, or leave output_config.format out")
		}
	}
	thinking, err := req.thinking(choice == "required" || choice == "function", countOnly, maxTokens)
	if err != nil {
		return nil, err
	}
	return &chatTurn{
		messages: messages, tools: tools, toolChoice: choice, toolName: name, thinking: thinking,
		sampling: req.samplingFields, maxTokens: maxTokens, stop: req.StopSequences, constraint: constraint,
	}, nil
}

// conversation is the request's system text and messages as chat messages,
// the system ones first.
func (req *messagesRequest) conversation() ([]chat.Message, error) {
	var messages []chat.Message
	if req.System.Set && req.System.Value != nil {
		system, err := systemText(req.System.Value, "system")
		if err != nil {
			return nil, err
		}
		messages = append(messages, chat.Message{Role: "system", Content: system})
	}
	for i, m := range req.Messages {
		param := fmt.Sprintf("messages.%d", i)
		var converted []chat.Message
		var err error
		switch m.Role {
		case "user":
			converted, err = userBlocks(m.Content.Value, param)
		case "assistant":
			converted, err = assistantBlocks(m.Content.Value, param)
		case "system":
			// Claude Code sends system messages inside messages beside the
			// top-level system; they join it (systemFirst).
			var text string
			if text, err = systemText(m.Content.Value, param+".content"); err == nil {
				converted = []chat.Message{{Role: "system", Content: text}}
			}
		default:
			return nil, badRequest(param+".role", "%s.role %q: use user, assistant or system", param, m.Role)
		}
		if err != nil {
			return nil, err
		}
		messages = append(messages, converted...)
	}
	messages = systemFirst(messages)
	if !hasRole(messages, "user") && !hasRole(messages, "assistant") {
		return nil, badRequest("messages", "messages: the conversation holds system messages only; add a user message")
	}
	return messages, nil
}

// thinking is whether the turn thinks (nil: the model's own default).
func (req *messagesRequest) thinking(forced, countOnly bool, maxTokens int) (*bool, error) {
	// The Anthropic API thinks only when asked: no thinking field is
	// thinking off, whatever the template's default. Adaptive leaves it to
	// the model, which here means the model's own default (off for a model
	// that cannot think, such as the demo model). A forced tool with
	// thinking enabled is refused as Anthropic refuses it; with adaptive
	// thinking a forced tool does not think, so that the answer starts at
	// the call.
	off, on := false, true
	thinking := &off
	if req.Thinking != nil {
		switch req.Thinking.Type {
		case "enabled":
			if forced {
				return nil, badRequest("thinking", "Thinking may not be enabled when tool_choice forces tool use: use tool_choice auto or none, or disable thinking")
			}
			thinking = &on
		case "adaptive":
			if !forced {
				thinking = nil
			}
		case "disabled":
		default:
			return nil, badRequest("thinking.type", "thinking.type %q: use enabled, adaptive or disabled", req.Thinking.Type)
		}
		// The budget is checked as Anthropic checks it, so that a request
		// this server takes is one the Anthropic API takes too.
		if b := req.Thinking.BudgetTokens; b != nil && req.Thinking.Type == "enabled" {
			if *b < minThinkingBudget {
				return nil, badRequest("thinking.budget_tokens", "thinking.budget_tokens %d: must be at least %d", *b, minThinkingBudget)
			}
			if !countOnly && *b >= maxTokens {
				return nil, badRequest("thinking.budget_tokens", "thinking.budget_tokens %d: must be less than max_tokens (%d): raise max_tokens or lower the budget", *b, maxTokens)
			}
		}
	}
	return thinking, nil
}

// blocksOf reads content: a string is one text block.
func blocksOf(content any, param string) ([]any, error) {
	switch c := content.(type) {
	case string:
		obj := chat.NewObject()
		obj.Set("type", "text")
		obj.Set("text", c)
		return []any{obj}, nil
	case []any:
		return c, nil
	}
	return nil, badRequest(param+".content", "%s.content must be a string or a list of content blocks, not %s", param, kindOf(content))
}

// userBlocks turns a user turn into messages: its text (with its documents,
// read by readDocuments) as a user message, each tool_result as a tool
// message, in their order.
func userBlocks(content any, param string) ([]chat.Message, error) {
	blocks, err := blocksOf(content, param)
	if err != nil {
		return nil, err
	}
	var out []chat.Message
	var text strings.Builder
	var documents []documentPart
	var images []imagePart
	flush := func() {
		switch {
		case len(documents)+len(images) > 0:
			out = append(out, chat.Message{Role: "user", Content: &documentContent{text: text.String(), parts: documents, images: images}})
		case text.Len() > 0:
			out = append(out, chat.Message{Role: "user", Content: text.String()})
		}
		text.Reset()
		documents, images = nil, nil
	}
	for j, block := range blocks {
		bp := fmt.Sprintf("%s.content.%d", param, j)
		switch typ := stringField(block, "type"); typ {
		case "text":
			s, ok := field(block, "text").(string)
			if !ok {
				return nil, badRequest(bp+".text", "%s.text must be a string", bp)
			}
			text.WriteString(s)
		case "document":
			d, err := decodeDocumentPart(block, bp)
			if err != nil {
				return nil, err
			}
			documents = append(documents, d)
		case "image":
			im, err := decodeImagePart(block, bp)
			if err != nil {
				return nil, err
			}
			images = append(images, im)
		case "tool_result":
			flush()
			result, resultImages, err := toolResultContent(field(block, "content"), bp+".content")
			if err != nil {
				return nil, err
			}
			if isErr, _ := field(block, "is_error").(bool); isErr {
				result = "Error: " + result
			}
			var content any = result
			if len(resultImages) > 0 {
				content = &documentContent{text: result, images: resultImages}
			}
			out = append(out, chat.Message{Role: "tool", Content: content, ToolCallID: stringField(block, "tool_use_id")})
		default:
			return nil, badRequest(bp+".type", "%s is a %q block: this model reads text, images, documents and tool results only", bp, typ)
		}
	}
	flush()
	if len(out) == 0 {
		out = append(out, chat.Message{Role: "user", Content: ""})
	}
	return out, nil
}

// systemText reads Anthropic's system prompt: a string or text blocks, as
// Anthropic's API takes it (an image there is refused by name).
func systemText(content any, param string) (string, error) {
	if list, ok := content.([]any); ok {
		for i, block := range list {
			if typ := stringField(block, "type"); typ == "image" || typ == "document" {
				bp := fmt.Sprintf("%s.%d", param, i)
				return "", badRequest(bp+".type", "%s is an %s block: the system prompt holds text blocks only; send the %s in a user message", bp, typ, typ)
			}
		}
	}
	return textOf(content, param)
}

// toolResultContent reads a tool_result's content: a string, or text and
// image blocks (the images for readImages, after the text's place).
func toolResultContent(content any, param string) (string, []imagePart, error) {
	list, ok := content.([]any)
	if !ok {
		text, err := textOf(content, param)
		return text, nil, err
	}
	var text strings.Builder
	var images []imagePart
	for i, block := range list {
		bp := fmt.Sprintf("%s.%d", param, i)
		switch typ := stringField(block, "type"); typ {
		case "image":
			im, err := decodeImagePart(block, bp)
			if err != nil {
				return "", nil, err
			}
			images = append(images, im)
		case "text":
			s, ok := field(block, "text").(string)
			if !ok {
				return "", nil, badRequest(bp+".text", "%s.text must be a string", bp)
			}
			text.WriteString(s)
		default:
			return "", nil, badRequest(bp+".type", "%s is a %q block: a tool_result holds text and image blocks", bp, typ)
		}
	}
	return text.String(), images, nil
}

// assistantBlocks turns an assistant turn into one message: text as its
// content, thinking as its reasoning, tool_use blocks as its tool calls.
func assistantBlocks(content any, param string) ([]chat.Message, error) {
	blocks, err := blocksOf(content, param)
	if err != nil {
		return nil, err
	}
	m := chat.Message{Role: "assistant"}
	var text, reasoning strings.Builder
	var images []imagePart
	for j, block := range blocks {
		bp := fmt.Sprintf("%s.content.%d", param, j)
		switch typ := stringField(block, "type"); typ {
		case "text":
			s, _ := field(block, "text").(string)
			text.WriteString(s)
		case "thinking":
			s, _ := field(block, "thinking").(string)
			reasoning.WriteString(s)
		case "redacted_thinking":
		case "image":
			im, err := decodeImagePart(block, bp)
			if err != nil {
				return nil, err
			}
			images = append(images, im)
		case "tool_use":
			name := stringField(block, "name")
			if name == "" {
				return nil, badRequest(bp+".name", "%s: a tool_use block needs a name", bp)
			}
			input := field(block, "input")
			if input == nil {
				input = chat.NewObject()
			}
			if _, ok := input.(*chat.Object); !ok {
				return nil, badRequest(bp+".input", "%s.input must be an object", bp)
			}
			m.ToolCalls = append(m.ToolCalls, chat.ToolCall{ID: stringField(block, "id"), Type: "function",
				Function: chat.FunctionCall{Name: name, Arguments: input}})
		default:
			return nil, badRequest(bp+".type", "%s is a %q block: an assistant turn holds text, image, thinking and tool_use blocks", bp, typ)
		}
	}
	m.Content = text.String()
	if len(images) > 0 {
		m.Content = &documentContent{text: text.String(), images: images}
	}
	if reasoning.Len() > 0 {
		r := reasoning.String()
		m.ReasoningContent = &r
	}
	return []chat.Message{m}, nil
}

// anthropicTools turns Anthropic tools ({"name", "description",
// "input_schema"}) into the function tools the template renders.
func anthropicTools(v orderedJSON) ([]any, error) {
	if !v.Set || v.Value == nil {
		return nil, nil
	}
	list, ok := v.Value.([]any)
	if !ok {
		return nil, badRequest("tools", "tools must be a list, not %s", kindOf(v.Value))
	}
	var tools []any
	for i, tool := range list {
		param := fmt.Sprintf("tools.%d", i)
		if typ := stringField(tool, "type"); typ != "" && typ != "custom" {
			return nil, badRequest(param+".type", "%s is Anthropic's server tool %q, which this server does not run: define it as a custom tool with an input_schema", param, typ)
		}
		name := stringField(tool, "name")
		if name == "" {
			return nil, badRequest(param+".name", "%s.name must be a non-empty string", param)
		}
		schema := field(tool, "input_schema")
		if _, ok := schema.(*chat.Object); !ok {
			return nil, badRequest(param+".input_schema", "%s.input_schema must be a JSON schema object", param)
		}
		fn := chat.NewObject()
		fn.Set("name", name)
		if d := stringField(tool, "description"); d != "" {
			fn.Set("description", d)
		}
		fn.Set("parameters", schema)
		wrapped := chat.NewObject()
		wrapped.Set("type", "function")
		wrapped.Set("function", fn)
		tools = append(tools, wrapped)
	}
	return tools, nil
}

// checkAnthropicModel accepts Claude's model names too: Claude Code asks
// for its own models (a main one and a small fast one) by name, and a local
// server that serves one model answers them all with it.
func checkAnthropicModel(requested, served string) error {
	if strings.HasPrefix(requested, "claude-") {
		return nil
	}
	return checkModel(requested, served)
}

// anthropicFits refuses a prompt or an answer bound that does not fit in the
// context, in the Anthropic API's words: Claude Code reads "prompt is too
// long: N tokens > M maximum" as the cue to compact the conversation, and
// "input length and `max_tokens` exceed context limit: N + M > C" as the
// cue to retry with a smaller max_tokens (it parses the numbers). The
// prompt needs room for at least one answer token.
func anthropicFits(promptTokens, maxTokens, contextTokens int) error {
	if promptTokens >= contextTokens {
		e := badRequest("messages", "prompt is too long: %d tokens > %d maximum", promptTokens, contextTokens-1)
		e.Code = "context_length_exceeded"
		return e
	}
	if promptTokens+maxTokens > contextTokens {
		return badRequest("max_tokens", "input length and `max_tokens` exceed context limit: %d + %d > %d, decrease input length or `max_tokens` and try again",
			promptTokens, maxTokens, contextTokens)
	}
	return nil
}

// stopReason is Anthropic's stop_reason.
func stopReason(res *genResult) string {
	switch {
	case res.toolCalls > 0 && res.stats.FinishReason == engine.FinishStop:
		return "tool_use"
	case res.stats.FinishReason == engine.FinishLength:
		return "max_tokens"
	case res.stopSequence != "":
		return "stop_sequence"
	}
	return "end_turn"
}

// messageUsage is a whole message's usage: the prompt's tokens that were
// not in the prefix cache, the cached ones, and the answer's.
func messageUsage(st engine.Stats) anthropicUsage {
	return anthropicUsage{InputTokens: st.PromptTokens - st.CachedTokens, CacheReadInputTokens: ptr(st.CachedTokens),
		CacheCreationInputTokens: ptr(0), OutputTokens: st.GeneratedTokens}
}

// toolInput is a parsed call's arguments as JSON for a tool_use block.
func toolInput(arguments string) json.RawMessage {
	if json.Valid([]byte(arguments)) && strings.HasPrefix(arguments, "{") {
		return json.RawMessage(arguments)
	}
	return json.RawMessage("{}")
}

func (s *Server) handleMessages(w http.ResponseWriter, r *http.Request) {
	var req messagesRequest
	if err := decodeBody(r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	turn, err := req.turn(false)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	g, name, ok := s.startTurn(w, r, turn, turnStart{api: "messages", model: req.Model, stream: req.Stream, checkModel: checkAnthropicModel,
		fits: anthropicFits})
	if !ok {
		return
	}
	id := newID("msg_")
	if req.Stream {
		s.streamMessage(w, r, g, id, name)
		return
	}
	events, res, ok := s.runToEnd(w, r, g)
	if !ok {
		return
	}
	out := chat.Collect(events)
	content := []anthropicBlock{}
	if out.Reasoning != "" {
		content = append(content, thinkingBlock(out.Reasoning))
	}
	if out.Content != "" || (len(out.ToolCalls) == 0 && out.Reasoning == "") {
		content = append(content, textBlock(out.Content))
	}
	for _, c := range out.ToolCalls {
		content = append(content, toolUseBlock(c.Name, toolInput(c.Arguments)))
	}
	writeJSON(w, http.StatusOK, anthropicMessageOut{
		ID: id, Type: "message", Role: "assistant", Model: name, Content: content,
		StopReason: nullString(stopReason(&res)), StopSequence: nullString(res.stopSequence), Usage: messageUsage(res.stats),
	})
}

// streamMessage streams Anthropic's event sequence: message_start, then
// each content block as content_block_start, its deltas (text_delta,
// thinking_delta, input_json_delta) and content_block_stop, then
// message_delta with the stop reason and usage, and message_stop.
func (s *Server) streamMessage(w http.ResponseWriter, r *http.Request, g *generation, id, model string) {
	sse := newSSE(w)
	sse.event("message_start", messageStartEvent{Type: "message_start", Message: anthropicMessageOut{
		ID: id, Type: "message", Role: "assistant", Model: model, Content: []anthropicBlock{},
		Usage: anthropicUsage{InputTokens: len(g.p.prompt.IDs)},
	}})
	sse.event("ping", anthropicEvent{Type: "ping"})
	sse.flush()
	blocks := &blockWriter{sse: sse, index: -1}
	g.keepAlive = func() error {
		sse.event("ping", anthropicEvent{Type: "ping"})
		return sse.flush()
	}
	res := g.run(func(events []chat.Event, received time.Time) error {
		blocks.feed(events)
		return s.flushToken(sse, received)
	})
	if !s.endStream(r, sse, res, anthropicErrors) {
		return
	}
	blocks.closeBlock()
	end := messageDeltaEvent{Type: "message_delta", Usage: anthropicUsage{OutputTokens: res.stats.GeneratedTokens,
		InputTokens: res.stats.PromptTokens - res.stats.CachedTokens, CacheReadInputTokens: ptr(res.stats.CachedTokens)}}
	end.Delta.StopReason, end.Delta.StopSequence = stopReason(&res), nullString(res.stopSequence)
	sse.event("message_delta", end)
	sse.event("message_stop", anthropicEvent{Type: "message_stop"})
	sse.flush()
}

// blockWriter streams parsed events as Anthropic content blocks: a block
// opens when the kind of output changes (thinking, text, a tool call), and
// only one is open at a time.
type blockWriter struct {
	sse   *sseWriter
	index int
	open  string
}

func (b *blockWriter) closeBlock() {
	if b.open != "" {
		b.sse.event("content_block_stop", blockEvent{Type: "content_block_stop", Index: b.index})
		b.open = ""
	}
}

func (b *blockWriter) openBlock(block anthropicBlock) {
	b.closeBlock()
	b.index++
	b.open = block.Type
	b.sse.event("content_block_start", blockEvent{Type: "content_block_start", Index: b.index, ContentBlock: &block})
}

func (b *blockWriter) delta(d anthropicDelta) {
	b.sse.event("content_block_delta", blockEvent{Type: "content_block_delta", Index: b.index, Delta: &d})
}

func (b *blockWriter) feed(events []chat.Event) {
	for _, ev := range events {
		switch ev.Kind {
		case chat.ReasoningDelta:
			if b.open != "thinking" {
				b.openBlock(thinkingBlock(""))
			}
			b.delta(anthropicDelta{Type: "thinking_delta", Thinking: ptr(ev.Text)})
		case chat.ContentDelta:
			if b.open != "text" {
				b.openBlock(textBlock(""))
			}
			b.delta(anthropicDelta{Type: "text_delta", Text: ptr(ev.Text)})
		case chat.ToolCallStart:
			b.openBlock(toolUseBlock(ev.Name, json.RawMessage("{}")))
		case chat.ToolCallArguments:
			if b.open == "tool_use" {
				b.delta(anthropicDelta{Type: "input_json_delta", PartialJSON: ptr(ev.Text)})
			}
		case chat.ToolCallEnd:
			b.closeBlock()
		}
	}
}

// handleCountTokens answers POST /v1/messages/count_tokens: the prompt's
// length as the template renders it.
func (s *Server) handleCountTokens(w http.ResponseWriter, r *http.Request) {
	var req messagesRequest
	if err := decodeBody(r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	turn, err := req.turn(true)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	e, name, err := s.current(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := checkAnthropicModel(req.Model, name); err != nil {
		s.writeError(w, r, err)
		return
	}
	turn.toolChoice = "auto" // counting forces nothing
	if err := s.readDocuments(r.Context(), e, turn); err != nil {
		s.writeError(w, r, err)
		return
	}
	p, err := s.prepare(e, turn)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, countTokensBody{InputTokens: len(p.prompt.IDs)})
}
