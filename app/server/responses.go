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
	response *responseObject
	items    []*responseItem
	// open is the item being written (its index in items), -1 for none.
	open     int
	openKind string
	text     strings.Builder // the open item's text or arguments
	// logprobs, when set, hands out the logprob entries of the tokens
	// received since it was last called; the answer's go on its
	// output_text (textLogprobs), the reasoning's and the calls' nowhere.
	logprobs     func() []logprobEntry
	textLogprobs []logprobEntry
}

// takeLogprobs is the entries of the tokens since the last call, for the
// answer's text when forText.
func (b *responseBuilder) takeLogprobs(forText bool) []logprobEntry {
	if b.logprobs == nil {
		return nil
	}
	entries := b.logprobs()
	if !forText {
		return nil
	}
	out := append([]logprobEntry{}, entries...)
	b.textLogprobs = append(b.textLogprobs, out...)
	return out
}

// stamper is a stream event, which emit numbers.
type stamper interface{ stamp(typ string, seq int) }

func (b *responseBuilder) emit(typ string, ev stamper) {
	if b.sse == nil {
		return
	}
	ev.stamp(typ, b.seq)
	b.seq++
	b.sse.event(typ, ev)
}

// first is the index of an item's only content or summary part.
var first = ptr(0)

func (b *responseBuilder) add(item *responseItem) {
	b.closeItem()
	b.items = append(b.items, item)
	b.open, b.openKind = len(b.items)-1, item.Type
	b.text.Reset()
	b.emit("response.output_item.added", &itemEvent{OutputIndex: b.open, Item: item})
	switch item.Type {
	case "reasoning":
		b.emit("response.reasoning_summary_part.added", &partEvent{ItemID: item.ID, OutputIndex: b.open, SummaryIndex: first,
			Part: &responsePart{Type: "summary_text"}})
	case "message":
		part := outputTextPart("")
		b.emit("response.content_part.added", &partEvent{ItemID: item.ID, OutputIndex: b.open, ContentIndex: first, Part: &part})
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
		item.Content = some([]responsePart{{Type: "reasoning_text", Text: text}})
		summary := responsePart{Type: "summary_text", Text: text}
		item.Summary = some([]responsePart{summary})
		b.emit("response.reasoning_text.done", &textEvent{ItemID: item.ID, OutputIndex: i, ContentIndex: first, Text: &text})
		b.emit("response.reasoning_summary_text.done", &textEvent{ItemID: item.ID, OutputIndex: i, SummaryIndex: first, Text: &text})
		b.emit("response.reasoning_summary_part.done", &partEvent{ItemID: item.ID, OutputIndex: i, SummaryIndex: first, Part: &summary})
	case "message":
		part := outputTextPart(text)
		if b.logprobs != nil {
			part.Logprobs = some(append([]logprobEntry{}, b.textLogprobs...))
			b.textLogprobs = nil
		}
		item.Content = some([]responsePart{part})
		b.emit("response.output_text.done", &textEvent{ItemID: item.ID, OutputIndex: i, ContentIndex: first, Text: &text})
		b.emit("response.content_part.done", &partEvent{ItemID: item.ID, OutputIndex: i, ContentIndex: first, Part: &part})
	case "function_call":
		item.Arguments = some(text)
		b.emit("response.function_call_arguments.done", &textEvent{ItemID: item.ID, OutputIndex: i, Arguments: &text})
	}
	item.Status = "completed"
	b.emit("response.output_item.done", &itemEvent{OutputIndex: i, Item: item})
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
				b.add(&responseItem{Type: "reasoning", ID: newID("rs_"), Summary: some([]responsePart{})})
			}
			b.text.WriteString(ev.Text)
			id := b.items[b.open].ID
			b.emit("response.reasoning_text.delta", &textEvent{ItemID: id, OutputIndex: b.open, ContentIndex: first, Delta: ptr(ev.Text)})
			b.emit("response.reasoning_summary_text.delta", &textEvent{ItemID: id, OutputIndex: b.open, SummaryIndex: first, Delta: ptr(ev.Text)})
		case chat.ContentDelta:
			if b.openKind != "message" {
				b.add(&responseItem{Type: "message", ID: newID("msg_"), Status: "in_progress", Role: "assistant", Content: some([]responsePart{})})
			}
			b.text.WriteString(ev.Text)
			delta := &textEvent{ItemID: b.items[b.open].ID, OutputIndex: b.open, ContentIndex: first, Delta: ptr(ev.Text)}
			if b.logprobs != nil {
				delta.Logprobs = some(b.takeLogprobs(true))
			}
			b.emit("response.output_text.delta", delta)
		case chat.ToolCallStart:
			b.add(&responseItem{Type: "function_call", ID: newID("fc_"), CallID: newID("call_"), Name: ev.Name, Arguments: some(""), Status: "in_progress"})
		case chat.ToolCallArguments:
			if b.openKind == "function_call" {
				b.text.WriteString(ev.Text)
				b.emit("response.function_call_arguments.delta", &textEvent{ItemID: b.items[b.open].ID, OutputIndex: b.open, Delta: ptr(ev.Text)})
			}
		case chat.ToolCallEnd:
			b.closeItem()
		}
	}
}

// finish completes the response object with the output and usage.
func (b *responseBuilder) finish(res *genResult) *responseObject {
	b.closeItem()
	var text strings.Builder
	for _, item := range b.items {
		if item.Type == "message" {
			for _, part := range item.Content.v {
				text.WriteString(part.Text)
			}
		}
	}
	r := b.response
	r.Output = append([]*responseItem{}, b.items...)
	r.OutputText = some(text.String())
	r.Status = "completed"
	if res.stats.FinishReason == engine.FinishLength {
		r.Status = "incomplete"
		r.IncompleteDetails = &incompleteDetails{Reason: "max_output_tokens"}
	}
	r.Usage = &responsesUsage{
		InputTokens:         res.stats.PromptTokens,
		InputTokensDetails:  cachedTokens{res.stats.CachedTokens},
		OutputTokens:        res.stats.GeneratedTokens,
		OutputTokensDetails: reasoningTokens{res.reasoningTokens},
		TotalTokens:         res.stats.PromptTokens + res.stats.GeneratedTokens,
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
	b := &responseBuilder{open: -1, response: &responseObject{
		ID: newID("resp_"), Object: "response", CreatedAt: time.Now().Unix(), Status: "in_progress",
		Model: name, Output: []*responseItem{}, Instructions: nullString(req.Instructions), ParallelToolCalls: true, Tools: emptyList,
	}}
	if g.p.logprobs {
		b.logprobs = g.takeLogprobs
		b.response.TopLogprobs = some(g.p.topLogprobs)
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
	started := *b.response // the final response is built on b.response
	b.emit("response.created", &responseEvent{Response: &started})
	b.emit("response.in_progress", &responseEvent{Response: &started})
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
		b.emit("error", &errorEvent{Code: fail.Code, Message: fail.Message})
		b.sse.flush()
		return
	}
	final := b.finish(&res)
	typ := "response.completed"
	if final.Status == "incomplete" {
		typ = "response.incomplete"
	}
	b.emit(typ, &responseEvent{Response: final})
	b.sse.flush()
}
