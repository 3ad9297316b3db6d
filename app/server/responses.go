package server

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/suzuran-app/suzuran/engine"
	"github.com/suzuran-app/suzuran/engine/chat"
)

// responsesRequest is POST /v1/responses, the OpenAI Responses API served
// statelessly (as Ollama does): every request carries the whole
// conversation, nothing is stored.
type responsesRequest struct {
	Model           string      `json:"model"`
	Input           orderedJSON `json:"input"`
	Instructions    string      `json:"instructions"`
	MaxOutputTokens *int        `json:"max_output_tokens"`
	samplingFields
	Stream     bool        `json:"stream"`
	Tools      orderedJSON `json:"tools"`
	ToolChoice orderedJSON `json:"tool_choice"`
	Text       *struct {
		Format orderedJSON `json:"format"`
	} `json:"text"`
	Reasoning *struct {
		Effort *string `json:"effort"`
	} `json:"reasoning"`
	Store              *bool  `json:"store"`
	PreviousResponseID string `json:"previous_response_id"`
	// TopLogprobs (0 to 20), or include naming
	// "message.output_text.logprobs", asks for the answer's tokens'
	// log-probabilities on its output_text parts and their deltas.
	TopLogprobs *int     `json:"top_logprobs"`
	Include     []string `json:"include"`

	// dropped names the tools turn left out of the prompt, for the log.
	dropped []string
}

func (req *responsesRequest) turn() (*chatTurn, error) {
	if req.Store != nil && *req.Store {
		return nil, badRequest("store", "store: this server keeps no responses; send store false or leave it out, and send the whole conversation in input")
	}
	if req.PreviousResponseID != "" {
		return nil, badRequest("previous_response_id", "previous_response_id: this server keeps no responses; send the whole conversation in input instead")
	}
	if req.TopLogprobs != nil && (*req.TopLogprobs < 0 || *req.TopLogprobs > maxTopLogprobs) {
		return nil, badRequest("top_logprobs", "top_logprobs %d: must be between 0 and %d", *req.TopLogprobs, maxTopLogprobs)
	}
	var messages []chat.Message
	if req.Instructions != "" {
		messages = append(messages, chat.Message{Role: "system", Content: req.Instructions})
	}
	items, err := responseItems(req.Input.Value)
	if err != nil {
		return nil, err
	}
	messages = systemFirst(append(messages, items...))
	if len(messages) == 0 {
		return nil, badRequest("input", "input is empty: send a string or a list of items")
	}
	maxTokens, err := maxTokensOf(req.MaxOutputTokens)
	if err != nil {
		return nil, badRequest("max_output_tokens", "%v", strings.Replace(err.Error(), "max_completion_tokens", "max_output_tokens", 1))
	}
	tools, dropped, err := responsesTools(req.Tools)
	if err != nil {
		return nil, err
	}
	req.dropped = dropped
	if err := checkChoiceRunnable(req.ToolChoice, req.Tools); err != nil {
		return nil, err
	}
	choice, name, err := toolChoiceOf(req.ToolChoice, &tools)
	if err != nil {
		return nil, err
	}
	var constraint *constraintSpec
	if req.Text != nil {
		if constraint, err = decodeResponseFormat(req.Text.Format, "text.format"); err != nil {
			return nil, err
		}
	}
	var thinking *bool
	if req.Reasoning != nil && req.Reasoning.Effort != nil {
		on := *req.Reasoning.Effort != "none"
		thinking = &on
	}
	logprobs, top := slices.Contains(req.Include, "message.output_text.logprobs"), 0
	if req.TopLogprobs != nil {
		logprobs, top = true, *req.TopLogprobs
	}
	return &chatTurn{
		messages: messages, tools: tools, toolChoice: choice, toolName: name, thinking: thinking,
		sampling: req.samplingFields, maxTokens: maxTokens, constraint: constraint, conversation: "input",
		logprobs: logprobs, topLogprobs: top,
	}, nil
}

// responseItems turns Responses input (a string, or items: messages,
// function_call, function_call_output, reasoning) into a conversation.
func responseItems(input any) ([]chat.Message, error) {
	switch in := input.(type) {
	case nil:
		return nil, nil
	case string:
		return []chat.Message{{Role: "user", Content: in}}, nil
	case []any:
		var out []chat.Message
		var reasoning string
		// lastAssistant returns the assistant message to add a call to:
		// consecutive function_call items are one turn's calls.
		lastAssistant := func() *chat.Message {
			if n := len(out); n > 0 && out[n-1].Role == "assistant" {
				return &out[n-1]
			}
			out = append(out, chat.Message{Role: "assistant", Content: ""})
			return &out[len(out)-1]
		}
		for i, item := range in {
			param := fmt.Sprintf("input[%d]", i)
			typ := stringField(item, "type")
			if typ == "" && stringField(item, "role") != "" {
				typ = "message"
			}
			switch typ {
			case "message":
				role := stringField(item, "role")
				switch role {
				case "developer":
					role = "system"
				case "system", "user", "assistant":
				default:
					return nil, badRequest(param+".role", "%s.role %q: use system, developer, user or assistant", param, role)
				}
				var content any
				var err error
				if role == "user" {
					content, err = userContent(field(item, "content"), param+".content")
				} else {
					content, err = textOf(field(item, "content"), param+".content")
				}
				if err != nil {
					return nil, err
				}
				m := chat.Message{Role: role, Content: content}
				if role == "assistant" && reasoning != "" {
					r := reasoning
					m.ReasoningContent, reasoning = &r, ""
				}
				out = append(out, m)
			case "function_call":
				name := stringField(item, "name")
				if name == "" {
					return nil, badRequest(param+".name", "%s: a function_call needs a name", param)
				}
				args, err := chat.DecodeJSON([]byte(stringField(item, "arguments")))
				if _, isObj := args.(*chat.Object); err != nil || !isObj {
					return nil, badRequest(param+".arguments", "%s.arguments must be a JSON object as a string", param)
				}
				m := lastAssistant()
				if reasoning != "" {
					r := reasoning
					m.ReasoningContent, reasoning = &r, ""
				}
				m.ToolCalls = append(m.ToolCalls, chat.ToolCall{ID: stringField(item, "call_id"), Type: "function",
					Function: chat.FunctionCall{Name: name, Arguments: args}})
			case "function_call_output":
				output, err := textOf(field(item, "output"), param+".output")
				if err != nil {
					return nil, err
				}
				out = append(out, chat.Message{Role: "tool", Content: output, ToolCallID: stringField(item, "call_id")})
			case "reasoning":
				var b strings.Builder
				for _, key := range []string{"content", "summary"} {
					if parts, ok := field(item, key).([]any); ok {
						for _, part := range parts {
							b.WriteString(stringField(part, "text"))
						}
					}
					if b.Len() > 0 {
						break
					}
				}
				reasoning = b.String()
			default:
				return nil, badRequest(param+".type", "%s is a %q item: use message, function_call, function_call_output or reasoning", param, typ)
			}
		}
		return out, nil
	}
	return nil, badRequest("input", "input must be a string or a list of items, not %s", kindOf(input))
}

// toolLabel names a tool in the log and in errors: its type, and its name
// when it has one.
func toolLabel(tool any) string {
	label := fmt.Sprintf("%q", stringField(tool, "type"))
	if name := stringField(tool, "name"); name != "" {
		label += fmt.Sprintf(" %q", name)
	}
	return label
}

// checkChoiceRunnable refuses a tool_choice that forces a tool of a type
// this server cannot run ({"type": "web_search"}, or a name of such a
// tool): dropping it as responsesTools does would not do what was asked.
func checkChoiceRunnable(choice, tools orderedJSON) error {
	c, ok := choice.Value.(*chat.Object)
	if !choice.Set || !ok {
		return nil
	}
	typ := stringField(c, "type")
	if typ != "" && typ != "function" && typ != "allowed_tools" {
		return badRequest("tool_choice", "tool_choice forces a %q tool, which this server cannot run: it runs function tools only", typ)
	}
	name := stringField(c, "name")
	if name == "" {
		name = stringField(field(c, "function"), "name")
	}
	list, _ := tools.Value.([]any)
	for _, tool := range list {
		if stringField(tool, "type") != "function" && stringField(tool, "name") == name && name != "" {
			return badRequest("tool_choice", "tool_choice forces the %s tool, which this server cannot run: it runs function tools only", toolLabel(tool))
		}
	}
	return nil
}

// responsesTools turns Responses function tools ({"type": "function",
// "name", "description", "parameters"}) into chat completions' shape.
// Tools of other types (OpenAI's hosted tools such as web_search, Codex's
// namespace, custom and local_shell tools) are left out of the prompt, as
// other local servers do: the model cannot call what nobody runs. dropped
// names them for the log.
func responsesTools(v orderedJSON) (tools []any, dropped []string, err error) {
	if !v.Set || v.Value == nil {
		return nil, nil, nil
	}
	list, ok := v.Value.([]any)
	if !ok {
		return nil, nil, badRequest("tools", "tools must be a list, not %s", kindOf(v.Value))
	}
	for i, tool := range list {
		param := fmt.Sprintf("tools[%d]", i)
		if _, ok := tool.(*chat.Object); !ok {
			return nil, nil, badRequest(param, "%s must be an object such as {\"type\": \"function\", \"name\": …}", param)
		}
		if typ := stringField(tool, "type"); typ != "function" {
			dropped = append(dropped, fmt.Sprintf("%s %s", param, toolLabel(tool)))
			continue
		}
		if nested, ok := field(tool, "function").(*chat.Object); ok {
			tool = nested // chat completions' shape, sent here by some clients
		}
		name := stringField(tool, "name")
		if name == "" {
			return nil, nil, badRequest(param+".name", "%s.name must be a non-empty string", param)
		}
		fn := chat.NewObject()
		fn.Set("name", name)
		if d := stringField(tool, "description"); d != "" {
			fn.Set("description", d)
		}
		if params := field(tool, "parameters"); params != nil {
			if _, ok := params.(*chat.Object); !ok {
				return nil, nil, badRequest(param+".parameters", "%s.parameters must be a JSON schema object", param)
			}
			fn.Set("parameters", params)
		}
		wrapped := chat.NewObject()
		wrapped.Set("type", "function")
		wrapped.Set("function", fn)
		tools = append(tools, wrapped)
	}
	return tools, dropped, nil
}

// responseBuilder assembles a response's output items from parsed events,
// and streams the typed events when it has a writer.
type responseBuilder struct {
	sse      *sseWriter
	seq      int
	response map[string]any
	items    []map[string]any
	// open is the item being written (its index in items), -1 for none.
	open     int
	openKind string
	text     strings.Builder // the open item's text or arguments
	// logprobs, when set, hands out the logprob entries of the tokens
	// received since it was last called; the answer's go on its
	// output_text (textLogprobs), the reasoning's and the calls' nowhere.
	logprobs     func() []map[string]any
	textLogprobs []any
}

// takeLogprobs is the entries of the tokens since the last call, for the
// answer's text when forText.
func (b *responseBuilder) takeLogprobs(forText bool) []any {
	if b.logprobs == nil {
		return nil
	}
	entries := b.logprobs()
	if !forText {
		return nil
	}
	out := make([]any, 0, len(entries))
	for _, e := range entries {
		out = append(out, e)
	}
	b.textLogprobs = append(b.textLogprobs, out...)
	return out
}

func (b *responseBuilder) emit(typ string, fields map[string]any) {
	if b.sse == nil {
		return
	}
	fields["type"] = typ
	fields["sequence_number"] = b.seq
	b.seq++
	b.sse.event(typ, fields)
}

func (b *responseBuilder) add(kind string, item map[string]any) {
	b.closeItem()
	b.items = append(b.items, item)
	b.open, b.openKind = len(b.items)-1, kind
	b.text.Reset()
	b.emit("response.output_item.added", map[string]any{"output_index": b.open, "item": item})
	if kind == "reasoning" {
		b.emit("response.reasoning_summary_part.added", map[string]any{"item_id": item["id"], "output_index": b.open, "summary_index": 0,
			"part": map[string]any{"type": "summary_text", "text": ""}})
	}
	if kind == "message" {
		b.emit("response.content_part.added", map[string]any{"item_id": item["id"], "output_index": b.open, "content_index": 0,
			"part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}}})
	}
}

func (b *responseBuilder) closeItem() {
	if b.open < 0 {
		return
	}
	item, i, text := b.items[b.open], b.open, b.text.String()
	switch b.openKind {
	case "reasoning":
		// The reasoning is both the item's content (as open-weight models
		// send it) and its summary (what clients written for OpenAI's
		// models show, @ai-sdk/openai among them): nothing is summarised.
		item["content"] = []any{map[string]any{"type": "reasoning_text", "text": text}}
		summary := map[string]any{"type": "summary_text", "text": text}
		item["summary"] = []any{summary}
		b.emit("response.reasoning_text.done", map[string]any{"item_id": item["id"], "output_index": i, "content_index": 0, "text": text})
		b.emit("response.reasoning_summary_text.done", map[string]any{"item_id": item["id"], "output_index": i, "summary_index": 0, "text": text})
		b.emit("response.reasoning_summary_part.done", map[string]any{"item_id": item["id"], "output_index": i, "summary_index": 0, "part": summary})
	case "message":
		part := map[string]any{"type": "output_text", "text": text, "annotations": []any{}}
		if b.logprobs != nil {
			part["logprobs"] = append([]any{}, b.textLogprobs...)
			b.textLogprobs = nil
		}
		item["content"] = []any{part}
		b.emit("response.output_text.done", map[string]any{"item_id": item["id"], "output_index": i, "content_index": 0, "text": text})
		b.emit("response.content_part.done", map[string]any{"item_id": item["id"], "output_index": i, "content_index": 0, "part": part})
	case "function_call":
		item["arguments"] = text
		b.emit("response.function_call_arguments.done", map[string]any{"item_id": item["id"], "output_index": i, "arguments": text})
	}
	item["status"] = "completed"
	b.emit("response.output_item.done", map[string]any{"output_index": i, "item": item})
	b.open, b.openKind = -1, ""
}

func (b *responseBuilder) feed(events []chat.Event) {
	for _, ev := range events {
		if ev.Kind != chat.ContentDelta {
			b.takeLogprobs(false)
		}
		switch ev.Kind {
		case chat.ReasoningDelta:
			if b.openKind != "reasoning" {
				b.add("reasoning", map[string]any{"type": "reasoning", "id": newID("rs_"), "summary": []any{}})
			}
			b.text.WriteString(ev.Text)
			b.emit("response.reasoning_text.delta", map[string]any{"item_id": b.items[b.open]["id"], "output_index": b.open, "content_index": 0, "delta": ev.Text})
			b.emit("response.reasoning_summary_text.delta", map[string]any{"item_id": b.items[b.open]["id"], "output_index": b.open, "summary_index": 0, "delta": ev.Text})
		case chat.ContentDelta:
			if b.openKind != "message" {
				b.add("message", map[string]any{"type": "message", "id": newID("msg_"), "status": "in_progress", "role": "assistant", "content": []any{}})
			}
			b.text.WriteString(ev.Text)
			delta := map[string]any{"item_id": b.items[b.open]["id"], "output_index": b.open, "content_index": 0, "delta": ev.Text}
			if b.logprobs != nil {
				delta["logprobs"] = b.takeLogprobs(true)
			}
			b.emit("response.output_text.delta", delta)
		case chat.ToolCallStart:
			b.add("function_call", map[string]any{"type": "function_call", "id": newID("fc_"), "call_id": newID("call_"), "name": ev.Name, "arguments": "", "status": "in_progress"})
		case chat.ToolCallArguments:
			if b.openKind == "function_call" {
				b.text.WriteString(ev.Text)
				b.emit("response.function_call_arguments.delta", map[string]any{"item_id": b.items[b.open]["id"], "output_index": b.open, "delta": ev.Text})
			}
		case chat.ToolCallEnd:
			b.closeItem()
		}
	}
}

// finish completes the response object with the output and usage.
func (b *responseBuilder) finish(res *genResult) map[string]any {
	b.closeItem()
	output := make([]any, len(b.items))
	var text strings.Builder
	for i, item := range b.items {
		output[i] = item
		if item["type"] == "message" {
			for _, part := range item["content"].([]any) {
				text.WriteString(part.(map[string]any)["text"].(string))
			}
		}
	}
	r := b.response
	r["output"] = output
	r["output_text"] = text.String()
	r["status"] = "completed"
	if res.stats.FinishReason == engine.FinishLength {
		r["status"] = "incomplete"
		r["incomplete_details"] = map[string]any{"reason": "max_output_tokens"}
	}
	r["usage"] = map[string]any{
		"input_tokens":          res.stats.PromptTokens,
		"input_tokens_details":  map[string]any{"cached_tokens": res.stats.CachedTokens},
		"output_tokens":         res.stats.GeneratedTokens,
		"output_tokens_details": map[string]any{"reasoning_tokens": res.reasoningTokens},
		"total_tokens":          res.stats.PromptTokens + res.stats.GeneratedTokens,
	}
	return r
}

func (s *Server) handleResponses(w http.ResponseWriter, r *http.Request) {
	var req responsesRequest
	if err := decodeBody(r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	turn, err := req.turn()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if len(req.dropped) > 0 {
		s.log.Info().Strs("tools", req.dropped).Msg("tools this server cannot run (it runs function tools) left out of the prompt")
	}
	g, name, ok := s.startTurn(w, r, turn, turnStart{api: "responses", model: req.Model, stream: req.Stream, checkModel: checkModel,
		submitErr: func(err error) error {
			if errors.Is(err, engine.ErrPromptTooLong) {
				if e, ok := err.(*apiError); ok && e.cause != nil {
					err = e.cause // found while encoding: the engine's words
				}
				return contextExceeded(err, "input", "the input")
			}
			return err
		}})
	if !ok {
		return
	}
	b := &responseBuilder{open: -1, response: map[string]any{
		"id": newID("resp_"), "object": "response", "created_at": time.Now().Unix(), "status": "in_progress",
		"model": name, "output": []any{}, "error": nil, "incomplete_details": nil, "store": false,
		"instructions": nullable(req.Instructions), "parallel_tool_calls": true, "tools": []any{}, "usage": nil,
	}}
	if g.p.logprobs {
		b.logprobs = g.takeLogprobs
		b.response["top_logprobs"] = g.p.topLogprobs
	}
	if !req.Stream {
		res := g.run(func(events []chat.Event, _ time.Time) error {
			b.feed(events)
			return nil
		})
		switch {
		case res.err != nil:
			s.writeError(w, r, res.err)
		case res.stats.FinishReason == engine.FinishCancelled:
			s.writeError(w, r, cancelledError())
		default:
			writeJSON(w, http.StatusOK, b.finish(&res))
		}
		return
	}
	b.sse = newSSE(w)
	b.emit("response.created", map[string]any{"response": copyMap(b.response)})
	b.emit("response.in_progress", map[string]any{"response": copyMap(b.response)})
	b.sse.flush()
	g.keepAlive = func() error { return b.sse.comment(g.waitNote()) }
	res := g.run(func(events []chat.Event, received time.Time) error {
		b.feed(events)
		return s.flushToken(b.sse, received)
	})
	if res.err != nil || res.stats.FinishReason == engine.FinishCancelled {
		fail := cancelledError()
		if res.err != nil {
			fail = &apiError{Status: http.StatusInternalServerError, Type: "server_error", Message: "generation failed: " + res.err.Error()}
		}
		b.emit("error", map[string]any{"code": fail.Code, "message": fail.Message, "param": nil})
		b.sse.flush()
		return
	}
	final := b.finish(&res)
	typ := "response.completed"
	if final["status"] == "incomplete" {
		typ = "response.incomplete"
	}
	b.emit(typ, map[string]any{"response": final})
	b.sse.flush()
}

func copyMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
