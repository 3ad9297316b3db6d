package server

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/suzuran-app/suzuran/app/modelhost"
	"github.com/suzuran-app/suzuran/engine"
	"github.com/suzuran-app/suzuran/engine/chat"
	"github.com/suzuran-app/suzuran/engine/model"
)

// chatCompletionRequest is POST /v1/chat/completions. Fields this server
// has no use for (user, metadata, parallel_tool_calls, …) are ignored.
type chatCompletionRequest struct {
	Model    string         `json:"model"`
	Messages []chat.Message `json:"messages"`
	samplingFields
	Stream        bool `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	MaxTokens           *int         `json:"max_tokens"`
	MaxCompletionTokens *int         `json:"max_completion_tokens"`
	Stop                stringOrList `json:"stop"`
	N                   *int         `json:"n"`
	// Logprobs asks for every generated token's log-probability (the
	// reasoning's tokens too; not the end-of-turn token), with the
	// TopLogprobs most likely alternatives.
	Logprobs           *bool       `json:"logprobs"`
	TopLogprobs        *int        `json:"top_logprobs"`
	User               string      `json:"user"`
	Tools              orderedJSON `json:"tools"`
	ToolChoice         orderedJSON `json:"tool_choice"`
	ResponseFormat     orderedJSON `json:"response_format"`
	ChatTemplateKwargs orderedJSON `json:"chat_template_kwargs"`
	ReasoningEffort    *string     `json:"reasoning_effort"`
	EnableThinking     *bool       `json:"enable_thinking"`
}

// chatTurn is what the chat APIs (chat completions, messages, responses)
// share once decoded: the conversation, the tools, and how to answer.
type chatTurn struct {
	messages   []chat.Message
	tools      []any  // function tools, OpenAI's shape
	toolChoice string // "auto", "none", "required", or "function"
	toolName   string // the function tool_choice names
	thinking   *bool
	extra      map[string]any // chat_template_kwargs
	sampling   samplingFields
	maxTokens  int
	stop       []string
	constraint *constraintSpec
	// logprobs asks for token log-probabilities (top: alternatives).
	logprobs    bool
	topLogprobs int
	// conversation names the request field that holds the conversation
	// ("input" on the Responses API), for errors; "" means messages.
	conversation string
	// documentTokens counts the tokens of the documents readDocuments
	// placed in the messages.
	documentTokens int
	// images are the turn's images (readImages), as ImagePart.Index
	// numbers them; imageTokens counts their tokens.
	images      []model.Image
	imageTokens int
}

// param is the request field that holds the conversation.
func (t *chatTurn) param() string {
	if t.conversation == "" {
		return "messages"
	}
	return t.conversation
}

// prepare renders a turn on the engine: the prompt, the sampling rule, and
// the parser for the output.
func (s *Server) prepare(e *engine.Engine, t *chatTurn) (genParams, error) {
	thinking := t.thinking
	if thinking == nil {
		thinking = s.thinkingDefault()
	}
	if thinking != nil && *thinking && !modelhost.Think(e.Dir(), true) {
		// A model that cannot think (the demo model, trained without it)
		// answers with thinking off, as in the window and the terminal.
		off := false
		thinking = &off
	}
	render := chat.RenderRequest{
		Messages:            t.messages,
		AddGenerationPrompt: true,
		EnableThinking:      thinking,
		Extra:               t.extra,
	}
	if t.toolChoice != "none" {
		render.Tools = t.tools
	}
	prompt, err := EncodePrompt(e, render)
	if err != nil {
		if errors.Is(err, engine.ErrPromptTooLong) {
			what := "the conversation"
			if t.documentTokens > 0 {
				what = fmt.Sprintf("the conversation or its documents (%d tokens of documents)", t.documentTokens)
			}
			if t.imageTokens > 0 {
				what += fmt.Sprintf(" with its images (%d tokens of images)", t.imageTokens)
			}
			return genParams{}, contextExceeded(err, t.param(), what)
		}
		if _, terr := e.Template(); terr != nil {
			return genParams{}, badRequest(t.param(), "this model has no chat template (%v): use /v1/completions with a prompt", terr)
		}
		// The template's own words, without the path of its file, which
		// names nothing the client sent.
		msg := err.Error()
		if inner := errors.Unwrap(err); inner != nil && strings.HasPrefix(msg, "chat template ") {
			msg = inner.Error()
		}
		return genParams{}, badRequest(t.param(), "the chat template refused the conversation: %s", msg)
	}
	opensThinking := chat.PromptOpensThinking(prompt.Text)
	p := genParams{
		prompt:         prompt,
		render:         render,
		images:         t.images,
		sampling:       t.sampling.resolve(opensThinking),
		seed:           t.sampling.seed(),
		maxTokens:      t.maxTokens,
		stop:           t.stop,
		parse:          true,
		thinking:       opensThinking,
		snapshotAnswer: len(render.Tools) > 0,
		constraint:     t.constraint,
		logprobs:       t.logprobs,
		topLogprobs:    t.topLogprobs,
	}
	if p.constraint == nil && (t.toolChoice == "required" || t.toolChoice == "function") {
		tools := t.tools
		if t.toolChoice == "function" {
			tools = nil
			for _, tool := range t.tools {
				if stringField(field(tool, "function"), "name") == t.toolName {
					tools = append(tools, tool)
				}
			}
		}
		p.constraint = &constraintSpec{Kind: constraintToolCall, Tools: tools, Param: "tool_choice"}
	}
	if p.constraint != nil {
		spec := *p.constraint // the turn's spec may serve several prepares (count_tokens)
		spec.Thinking = opensThinking
		p.constraint = &spec
	}
	return p, nil
}

// decodeTools checks OpenAI function tools ([{"type": "function",
// "function": {"name", "description", "parameters"}}]).
func decodeTools(v orderedJSON, param string) ([]any, error) {
	if !v.Set || v.Value == nil {
		return nil, nil
	}
	list, ok := v.Value.([]any)
	if !ok {
		return nil, badRequest(param, "%s must be a list of tools, not %s", param, kindOf(v.Value))
	}
	for i, tool := range list {
		if typ := stringField(tool, "type"); typ != "function" {
			return nil, badRequest(fmt.Sprintf("%s[%d].type", param, i), "%s[%d] is of type %q: this server runs function tools only", param, i, typ)
		}
		fn := field(tool, "function")
		if _, ok := fn.(*chat.Object); !ok {
			return nil, badRequest(fmt.Sprintf("%s[%d].function", param, i), "%s[%d].function must be an object with a name", param, i)
		}
		if stringField(fn, "name") == "" {
			return nil, badRequest(fmt.Sprintf("%s[%d].function.name", param, i), "%s[%d].function.name must be a non-empty string", param, i)
		}
		if params := field(fn, "parameters"); params != nil {
			if _, ok := params.(*chat.Object); !ok {
				return nil, badRequest(fmt.Sprintf("%s[%d].function.parameters", param, i), "%s[%d].function.parameters must be a JSON schema object", param, i)
			}
		}
	}
	return list, nil
}

// toolChoiceOf reads tool_choice, an allowed_tools one narrowing *tools.
func toolChoiceOf(v orderedJSON, tools *[]any) (choice, name string, err error) {
	allowed, mode, ok, err := allowedTools(v, *tools)
	if ok {
		if err == nil {
			*tools = allowed
		}
		return mode, "", err
	}
	return decodeToolChoice(v, *tools)
}

// decodeToolChoice reads OpenAI's tool_choice: "none", "auto", "required",
// or {"type": "function", "function": {"name": …}}.
func decodeToolChoice(v orderedJSON, tools []any) (choice, name string, err error) {
	if !v.Set || v.Value == nil {
		return "auto", "", nil
	}
	switch c := v.Value.(type) {
	case string:
		switch c {
		case "none", "auto":
			return c, "", nil
		case "required":
			if len(tools) == 0 {
				return "", "", badRequest("tool_choice", "tool_choice \"required\" needs tools")
			}
			return c, "", nil
		}
		return "", "", badRequest("tool_choice", "tool_choice %q: use none, auto, required or {\"type\": \"function\", \"function\": {\"name\": …}}", c)
	case *chat.Object:
		name := stringField(field(c, "function"), "name")
		if name == "" {
			name = stringField(c, "name") // the Responses API's flat form
		}
		if name == "" {
			return "", "", badRequest("tool_choice", "tool_choice must name a function: {\"type\": \"function\", \"function\": {\"name\": …}}")
		}
		return "function", name, checkToolName(tools, name, "tool_choice")
	}
	return "", "", badRequest("tool_choice", "tool_choice must be a string or an object, not %s", kindOf(v.Value))
}

// allowedTools reads a tool_choice of type allowed_tools, which limits the
// tools the model may call to some of the request's: the Responses API's
// {"type": "allowed_tools", "mode": "auto" | "required", "tools": [{"type":
// "function", "name": …}]}, or chat completions' with the same inside
// "allowed_tools" and tools named as {"function": {"name": …}}. The tools
// it leaves out are not offered; mode required forces a call of one of the
// others. ok is false for any other tool_choice.
func allowedTools(v orderedJSON, tools []any) (allowed []any, mode string, ok bool, err error) {
	if !v.Set || stringField(v.Value, "type") != "allowed_tools" {
		return nil, "", false, nil
	}
	spec := v.Value
	if nested := field(spec, "allowed_tools"); nested != nil {
		spec = nested
	}
	mode = stringField(spec, "mode")
	if mode == "" {
		mode = "auto"
	}
	if mode != "auto" && mode != "required" {
		return nil, "", true, badRequest("tool_choice.mode", "tool_choice.mode %q: use auto or required", mode)
	}
	list, _ := field(spec, "tools").([]any)
	names := map[string]bool{}
	for _, tool := range list {
		name := stringField(tool, "name")
		if name == "" {
			name = stringField(field(tool, "function"), "name")
		}
		if typ := stringField(tool, "type"); name == "" || (typ != "" && typ != "function") {
			continue // a tool of a type this server does not run was left out already
		}
		if err := checkToolName(tools, name, "tool_choice"); err != nil {
			return nil, "", true, err
		}
		names[name] = true
	}
	for _, tool := range tools {
		if names[stringField(field(tool, "function"), "name")] {
			allowed = append(allowed, tool)
		}
	}
	if len(allowed) == 0 {
		return nil, "", true, badRequest("tool_choice.tools", "tool_choice allowed_tools names none of the request's function tools: list them as {\"type\": \"function\", \"name\": …}")
	}
	return allowed, mode, true, nil
}

// checkToolName checks that a forced tool is among the tools.
func checkToolName(tools []any, name, param string) error {
	for _, tool := range tools {
		if stringField(field(tool, "function"), "name") == name {
			return nil
		}
	}
	return badRequest(param, "%s names the function %q, which is not among the request's tools", param, name)
}

// decodeResponseFormat reads response_format ({"type": "text" |
// "json_object" | "json_schema", "json_schema": {"name", "schema",
// "strict"}}).
func decodeResponseFormat(v orderedJSON, param string) (*constraintSpec, error) {
	if !v.Set || v.Value == nil {
		return nil, nil
	}
	if _, ok := v.Value.(*chat.Object); !ok {
		return nil, badRequest(param, "%s must be an object such as {\"type\": \"json_object\"}", param)
	}
	switch typ := stringField(v.Value, "type"); typ {
	case "text":
		return nil, nil
	case "json_object":
		return &constraintSpec{Kind: constraintJSONObject, Param: param}, nil
	case "json_schema":
		// Chat completions nest the schema in "json_schema"; the Responses
		// API's text.format puts it beside "type".
		spec := v.Value
		if nested := field(spec, "json_schema"); nested != nil {
			spec = nested
		}
		schema, ok := field(spec, "schema").(*chat.Object)
		if !ok {
			return nil, badRequest(param+".json_schema.schema", "%s json_schema needs a schema object", param)
		}
		strict, _ := field(spec, "strict").(bool)
		return &constraintSpec{Kind: constraintJSONSchema, Schema: schema, Name: stringField(spec, "name"), Strict: strict, Param: param}, nil
	default:
		return nil, badRequest(param+".type", "%s.type %q: use text, json_object or json_schema", param, typ)
	}
}

// thinkingFrom reads OpenAI-style thinking switches: reasoning_effort
// "none" turns it off, another effort on; chat_template_kwargs'
// enable_thinking (vLLM, SGLang) or a top-level enable_thinking wins.
func thinkingFrom(effort *string, kwargs map[string]any, flag *bool) (*bool, error) {
	var thinking *bool
	if effort != nil {
		on := *effort != "none"
		thinking = &on
	}
	if flag != nil {
		thinking = flag
	}
	if v, ok := kwargs["enable_thinking"]; ok {
		on, isBool := v.(bool)
		if !isBool {
			return nil, badRequest("chat_template_kwargs.enable_thinking", "chat_template_kwargs.enable_thinking must be true or false")
		}
		thinking = &on
	}
	return thinking, nil
}

// kwargsOf reads chat_template_kwargs into template variables.
func kwargsOf(v orderedJSON) (map[string]any, error) {
	if !v.Set || v.Value == nil {
		return nil, nil
	}
	obj, ok := v.Value.(*chat.Object)
	if !ok {
		return nil, badRequest("chat_template_kwargs", "chat_template_kwargs must be an object")
	}
	out := map[string]any{}
	for _, k := range obj.Keys() {
		out[k], _ = obj.Get(k)
	}
	return out, nil
}

// checkMessages normalises OpenAI messages for the template: "developer"
// is the system role, text parts become one string, a user message's file
// parts are kept for readDocuments, and anything else is refused.
func checkMessages(messages []chat.Message) error {
	if len(messages) == 0 {
		return badRequest("messages", "messages is empty: send at least one message")
	}
	for i := range messages {
		m := &messages[i]
		param := fmt.Sprintf("messages[%d]", i)
		switch m.Role {
		case "developer":
			m.Role = "system"
		case "system", "user", "assistant", "tool":
		case "":
			return badRequest(param+".role", "%s has no role: use system, user, assistant or tool", param)
		default:
			return badRequest(param+".role", "%s.role %q: use system, developer, user, assistant or tool", param, m.Role)
		}
		var content any
		var err error
		if m.Role == "user" {
			content, err = userContent(m.Content, param+".content")
		} else {
			content, err = textOf(m.Content, param+".content")
		}
		if err != nil {
			return err
		}
		if m.Content != nil {
			m.Content = content
		}
		for j, call := range m.ToolCalls {
			if call.Function.Name == "" {
				return badRequest(fmt.Sprintf("%s.tool_calls[%d].function.name", param, j), "%s.tool_calls[%d] names no function", param, j)
			}
			if s, ok := call.Function.Arguments.(string); ok {
				args, err := chat.DecodeJSON([]byte(s))
				if _, isObj := args.(*chat.Object); err != nil || !isObj {
					return badRequest(fmt.Sprintf("%s.tool_calls[%d].function.arguments", param, j), "%s.tool_calls[%d].function.arguments must be a JSON object (as a string)", param, j)
				}
				m.ToolCalls[j].Function.Arguments = args
			}
		}
	}
	return nil
}

// maxTokensOf picks max_completion_tokens over max_tokens.
func maxTokensOf(params ...*int) (int, error) {
	names := []string{"max_completion_tokens", "max_tokens"}
	for i, p := range params {
		if p != nil {
			if *p < 1 {
				return 0, badRequest(names[i], "%s %d: must be at least 1", names[i], *p)
			}
			return *p, nil
		}
	}
	return 0, nil
}

// checkModel accepts an empty model name or the loaded model's.
func checkModel(requested, served string) error {
	if requested == "" || strings.EqualFold(requested, served) {
		return nil
	}
	return &apiError{Status: http.StatusNotFound, Type: "invalid_request_error", Param: "model", Code: "model_not_found",
		Message: fmt.Sprintf("the model %q is not served here; this server runs %q (GET /v1/models)", requested, served)}
}

func (s *Server) handleChatCompletions(w http.ResponseWriter, r *http.Request) {
	var req chatCompletionRequest
	if err := decodeBody(r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	turn, err := req.turn()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	g, name, ok := s.startTurn(w, r, turn, turnStart{api: "chat.completions", model: req.Model, stream: req.Stream, checkModel: checkModel})
	if !ok {
		return
	}
	out := chatCompletionOutput{id: newID("chatcmpl-"), created: time.Now().Unix(), model: name}
	if req.Stream {
		s.streamChatCompletion(w, r, g, out, req.StreamOptions != nil && req.StreamOptions.IncludeUsage)
		return
	}
	events, res, ok := s.runToEnd(w, r, g)
	if !ok {
		return
	}
	collected := chat.Collect(events)
	message := chatMessageOut{Role: "assistant", Content: &collected.Content, ReasoningContent: collected.Reasoning}
	for _, c := range collected.ToolCalls {
		message.ToolCalls = append(message.ToolCalls, chatToolCall{ID: newID("call_"), Type: "function",
			Function: chatFunction{Name: c.Name, Arguments: c.Arguments}})
	}
	if len(message.ToolCalls) > 0 && collected.Content == "" {
		message.Content = nil
	}
	writeJSON(w, http.StatusOK, openAICompletion[chatChoice]{
		ID: out.id, Object: "chat.completion", Created: out.created, Model: out.model,
		Choices: []chatChoice{{Message: message, Logprobs: logprobsField(g.p.logprobs, g.takeLogprobs()), FinishReason: res.finish()}},
		Usage:   some(usageOf(&res)),
	})
}

// turn checks the request and turns it into a chatTurn.
func (req *chatCompletionRequest) turn() (*chatTurn, error) {
	if req.N != nil && *req.N != 1 {
		return nil, badRequest("n", "n %d: this server returns one choice per request; send n 1 or leave it out", *req.N)
	}
	if req.TopLogprobs != nil && (*req.TopLogprobs < 0 || *req.TopLogprobs > maxTopLogprobs) {
		return nil, badRequest("top_logprobs", "top_logprobs %d: must be between 0 and %d", *req.TopLogprobs, maxTopLogprobs)
	}
	// top_logprobs without logprobs: true asks for nothing (OpenAI refuses
	// it; clients that send it by default are served).
	topLogprobs := 0
	if req.TopLogprobs != nil && req.Logprobs != nil && *req.Logprobs {
		topLogprobs = *req.TopLogprobs
	}
	if err := checkMessages(req.Messages); err != nil {
		return nil, err
	}
	maxTokens, err := maxTokensOf(req.MaxCompletionTokens, req.MaxTokens)
	if err != nil {
		return nil, err
	}
	tools, err := decodeTools(req.Tools, "tools")
	if err != nil {
		return nil, err
	}
	choice, name, err := toolChoiceOf(req.ToolChoice, &tools)
	if err != nil {
		return nil, err
	}
	kwargs, err := kwargsOf(req.ChatTemplateKwargs)
	if err != nil {
		return nil, err
	}
	thinking, err := thinkingFrom(req.ReasoningEffort, kwargs, req.EnableThinking)
	if err != nil {
		return nil, err
	}
	constraint, err := decodeResponseFormat(req.ResponseFormat, "response_format")
	if err != nil {
		return nil, err
	}
	return &chatTurn{
		messages: req.Messages, tools: tools, toolChoice: choice, toolName: name,
		thinking: thinking, extra: kwargs, sampling: req.samplingFields,
		maxTokens: maxTokens, stop: req.Stop, constraint: constraint,
		logprobs: req.Logprobs != nil && *req.Logprobs, topLogprobs: topLogprobs,
	}, nil
}

// chatCompletionOutput is what every chunk of one answer repeats.
type chatCompletionOutput struct {
	id      string
	created int64
	model   string
}

// chunk is a chat.completion.chunk of one choice; usage is null in each
// chunk but the last when the client asked for it.
func (o chatCompletionOutput) chunk(delta chatDeltaOut, finish string, includeUsage bool) *openAICompletion[chunkChoice] {
	c := &openAICompletion[chunkChoice]{ID: o.id, Object: "chat.completion.chunk", Created: o.created, Model: o.model,
		Choices: []chunkChoice{{Delta: delta, FinishReason: nullString(finish)}}}
	if includeUsage {
		c.Usage = some[*openAIUsage](nil)
	}
	return c
}

// streamChatCompletion streams the answer as chat.completion.chunk events:
// the first delta carries the role, the last one the finish_reason, then
// the usage chunk when asked for, then [DONE].
func (s *Server) streamChatCompletion(w http.ResponseWriter, r *http.Request, g *generation, out chatCompletionOutput, includeUsage bool) {
	sse := newSSE(w)
	// Each chunk carries the logprobs of the tokens received since the
	// last one sent; a token whose text the parser holds back has its
	// logprob in the next chunk.
	send := func(delta chatDeltaOut, finish string) {
		chunk := out.chunk(delta, finish, includeUsage)
		if g.p.logprobs {
			if pending := g.takeLogprobs(); len(pending) > 0 {
				chunk.Choices[0].Logprobs = logprobsField(true, pending)
			}
		}
		sse.event("", chunk)
	}
	// The role goes out at once: the client knows its request was taken
	// while the prompt is prefilled.
	sse.event("", out.chunk(chatDeltaOut{Role: "assistant", Content: ptr("")}, "", includeUsage))
	sse.flush()
	callIDs := map[int]string{}
	g.keepAlive = func() error { return sse.comment(g.waitNote()) }
	res := g.run(func(events []chat.Event, received time.Time) error {
		for _, ev := range events {
			if delta, ok := chatDelta(ev, callIDs); ok {
				send(delta, "")
			}
		}
		return s.flushToken(sse, received)
	})
	if !s.endStream(r, sse, res, openAIErrors) {
		return
	}
	send(chatDeltaOut{}, res.finish())
	if includeUsage {
		sse.event("", &openAICompletion[chunkChoice]{ID: out.id, Object: "chat.completion.chunk", Created: out.created, Model: out.model,
			Choices: []chunkChoice{}, Usage: some(usageOf(&res))})
	}
	sse.raw("", []byte("[DONE]"))
	sse.flush()
}

// chatDelta is the chunk delta of one parsed event: content, reasoning,
// or a tool call (its start with the id, the type and the name, then its
// arguments in pieces, each with the call's index); ok is false for none.
func chatDelta(ev chat.Event, callIDs map[int]string) (delta chatDeltaOut, ok bool) {
	switch ev.Kind {
	case chat.ContentDelta:
		return chatDeltaOut{Content: ptr(ev.Text)}, true
	case chat.ReasoningDelta:
		return chatDeltaOut{ReasoningContent: ptr(ev.Text)}, true
	case chat.ToolCallStart:
		callIDs[ev.Index] = newID("call_")
		return chatDeltaOut{ToolCalls: []chatToolCallDelta{{Index: ev.Index, ID: callIDs[ev.Index], Type: "function",
			Function: chatFunctionDelta{Name: ev.Name}}}}, true
	case chat.ToolCallArguments:
		return chatDeltaOut{ToolCalls: []chatToolCallDelta{{Index: ev.Index, Function: chatFunctionDelta{Arguments: ev.Text}}}}, true
	}
	return chatDeltaOut{}, false
}

// flushToken sends one step's events and records the server's overhead:
// the time from the engine's event to the bytes leaving.
func (s *Server) flushToken(sse *sseWriter, received time.Time) error {
	if len(sse.buf) == 0 {
		return nil
	}
	err := sse.flush()
	if s.tokenWritten != nil && err == nil {
		s.tokenWritten(time.Since(received))
	}
	return err
}

// endStream handles the ends of a stream that are not a normal finish:
// a failure after streaming began is sent as an error event (the stream
// then ends), and a generation cancelled by shutdown says so. It reports
// whether the normal ending should follow.
func (s *Server) endStream(r *http.Request, sse *sseWriter, res genResult, flavor errFlavor) bool {
	var fail *apiError
	switch {
	case res.err != nil:
		fail = &apiError{Status: http.StatusInternalServerError, Type: "server_error", Message: "generation failed: " + res.err.Error()}
	case res.stats.FinishReason == engine.FinishCancelled:
		fail = cancelledError()
	default:
		return true
	}
	body := errorBody(flavor, fail)
	if flavor == anthropicErrors {
		sse.event("error", body)
	} else {
		sse.event("", body)
	}
	sse.flush()
	return false
}

// cancelledError says why a generation stopped before its end. A client
// that left reads nothing, so whoever reads it saw the server shut down.
func cancelledError() *apiError {
	return &apiError{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "cancelled",
		Message: "the generation was cancelled: the server is shutting down; retry"}
}

// usageOf is OpenAI's usage object.
func usageOf(res *genResult) *openAIUsage {
	st := res.stats
	return &openAIUsage{
		PromptTokens:            st.PromptTokens,
		CompletionTokens:        st.GeneratedTokens,
		TotalTokens:             st.PromptTokens + st.GeneratedTokens,
		PromptTokensDetails:     cachedTokens{st.CachedTokens},
		CompletionTokensDetails: reasoningTokens{res.reasoningTokens},
	}
}

// debugRequest logs a request's parameters (never its text) with
// --log-requests.
func (s *Server) debugRequest(r *http.Request, api string, p genParams, stream bool) {
	if !s.cfg.LogRequests {
		return
	}
	s.log.Debug().Str("api", api).Bool("stream", stream).Int("prompt_tokens", len(p.prompt.IDs)).
		Int("max_tokens", p.maxTokens).Int("stops", len(p.stop)).Float32("temperature", p.sampling.Temperature).
		Float32("top_p", p.sampling.TopP).Int("top_k", p.sampling.TopK).Bool("thinking", p.thinking).
		Bool("constrained", p.constraint != nil).Msg("request")
}
