package server

import "encoding/json"

// The answers' wire shapes. Each field is written exactly when the API's
// format has it: a plain field is always there, omitempty ones only when
// set, and optional ones (absent, or present even when empty or null) as
// the code that builds the answer says. TestWireKeys pins the key sets.

// optional is a field that is present only when set; a set value may be
// empty or null.
type optional[T any] struct {
	set bool
	v   T
}

func some[T any](v T) optional[T] { return optional[T]{set: true, v: v} }

func (o optional[T]) IsZero() bool { return !o.set }

func (o optional[T]) MarshalJSON() ([]byte, error) { return json.Marshal(o.v) }

// nullString is a string that is null when empty (finish_reason while a
// stream runs, stop_sequence, instructions).
type nullString string

func (s nullString) MarshalJSON() ([]byte, error) {
	if s == "" {
		return []byte("null"), nil
	}
	return json.Marshal(string(s))
}

func ptr[T any](v T) *T { return &v }

// emptyList is a list this server never fills (annotations, a response's
// tools).
var emptyList = []struct{}{}

// OpenAI's errors: {"error": {"code", "message", "param", "type"}}. The
// errors' keys are in the order they always had here, which clients that
// match an error's text rely on.
type openAIErrorBody struct {
	Error openAIError `json:"error"`
}

type openAIError struct {
	Code    nullString `json:"code"`
	Message string     `json:"message"`
	Param   nullString `json:"param"`
	Type    string     `json:"type"`
}

// Anthropic's errors: {"error": {"message", "type"}, "type": "error"}.
type anthropicErrorBody struct {
	Error anthropicError `json:"error"`
	Type  string         `json:"type"`
}

type anthropicError struct {
	Message string `json:"message"`
	Type    string `json:"type"`
}

// cachedTokens and reasoningTokens are the usage details that chat
// completions and the Responses API share under their own names.
type cachedTokens struct {
	CachedTokens int `json:"cached_tokens"`
}

type reasoningTokens struct {
	ReasoningTokens int `json:"reasoning_tokens"`
}

// openAIUsage is chat completions' and completions' usage.
type openAIUsage struct {
	PromptTokens            int             `json:"prompt_tokens"`
	CompletionTokens        int             `json:"completion_tokens"`
	TotalTokens             int             `json:"total_tokens"`
	PromptTokensDetails     cachedTokens    `json:"prompt_tokens_details"`
	CompletionTokensDetails reasoningTokens `json:"completion_tokens_details"`
}

// responsesUsage is the Responses API's usage.
type responsesUsage struct {
	InputTokens         int             `json:"input_tokens"`
	InputTokensDetails  cachedTokens    `json:"input_tokens_details"`
	OutputTokens        int             `json:"output_tokens"`
	OutputTokensDetails reasoningTokens `json:"output_tokens_details"`
	TotalTokens         int             `json:"total_tokens"`
}

// logprobAlt is one token's log-probability: its text, its logprob and its
// UTF-8 bytes (a token may hold part of a character).
type logprobAlt struct {
	Token   string  `json:"token"`
	Logprob float64 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

// logprobEntry is a generated token's entry in chat completions'
// logprobs.content and the Responses API's output_text logprobs: the token
// and its most likely alternatives.
type logprobEntry struct {
	logprobAlt
	TopLogprobs []logprobAlt `json:"top_logprobs"`
}

// logprobsContent is a chat choice's logprobs.
type logprobsContent struct {
	Content []logprobEntry `json:"content"`
}

// openAICompletion is a chat.completion, a chat.completion.chunk or a
// text_completion, whose choices are of type C. Usage is absent from the
// chunks of a stream that did not ask for it, and null in those before the
// last when it did.
type openAICompletion[C any] struct {
	ID      string                 `json:"id"`
	Object  string                 `json:"object"`
	Created int64                  `json:"created"`
	Model   string                 `json:"model"`
	Choices []C                    `json:"choices"`
	Usage   optional[*openAIUsage] `json:"usage,omitzero"`
}

// chatChoice is a chat.completion's choice.
type chatChoice struct {
	Index        int              `json:"index"`
	Message      chatMessageOut   `json:"message"`
	Logprobs     *logprobsContent `json:"logprobs"`
	FinishReason string           `json:"finish_reason"`
}

// chatMessageOut is the assistant's message; its content is null when it
// is only tool calls.
type chatMessageOut struct {
	Role             string         `json:"role"`
	Content          *string        `json:"content"`
	ReasoningContent string         `json:"reasoning_content,omitempty"`
	ToolCalls        []chatToolCall `json:"tool_calls,omitempty"`
}

type chatToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function chatFunction `json:"function"`
}

type chatFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// chunkChoice is a chat.completion.chunk's choice.
type chunkChoice struct {
	Index        int              `json:"index"`
	Delta        chatDeltaOut     `json:"delta"`
	Logprobs     *logprobsContent `json:"logprobs"`
	FinishReason nullString       `json:"finish_reason"`
}

// chatDeltaOut holds what one chunk adds: the role (first chunk), content,
// reasoning or a tool call's piece; the last chunk's is empty.
type chatDeltaOut struct {
	Role             string              `json:"role,omitempty"`
	Content          *string             `json:"content,omitempty"`
	ReasoningContent *string             `json:"reasoning_content,omitempty"`
	ToolCalls        []chatToolCallDelta `json:"tool_calls,omitempty"`
}

// chatToolCallDelta starts a call (id, type, name) or continues its
// arguments.
type chatToolCallDelta struct {
	Index    int               `json:"index"`
	ID       string            `json:"id,omitempty"`
	Type     string            `json:"type,omitempty"`
	Function chatFunctionDelta `json:"function"`
}

type chatFunctionDelta struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

// textChoice is a text_completion's choice.
type textChoice struct {
	Text         string          `json:"text"`
	Index        int             `json:"index"`
	Logprobs     *legacyLogprobs `json:"logprobs"`
	FinishReason nullString      `json:"finish_reason"`
}

// legacyLogprobs is the completions API's logprobs (legacyLogprobsOf).
type legacyLogprobs struct {
	Tokens        []string             `json:"tokens"`
	TokenLogprobs []float64            `json:"token_logprobs"`
	TopLogprobs   []map[string]float64 `json:"top_logprobs"`
	TextOffset    []int                `json:"text_offset"`
}

// modelObject is an entry of GET /v1/models; the context length is known
// once the model is loaded.
type modelObject struct {
	ID            string `json:"id"`
	Object        string `json:"object"`
	Created       int64  `json:"created"`
	OwnedBy       string `json:"owned_by"`
	ContextLength int    `json:"context_length,omitempty"`
	MaxModelLen   int    `json:"max_model_len,omitempty"`
}

type modelList struct {
	Object string        `json:"object"`
	Data   []modelObject `json:"data"`
}

// healthBody is GET /health.
type healthBody struct {
	Status              string            `json:"status"`
	Model               string            `json:"model"`
	ConstrainedSampling bool              `json:"constrained_sampling"`
	Progress            optional[float64] `json:"progress,omitzero"`
	Error               optional[string]  `json:"error,omitzero"`
}

// The Anthropic Messages API.

// anthropicMessageOut is a message: the whole answer, or the start of a
// stream's (no content yet, no stop reason).
type anthropicMessageOut struct {
	ID           string           `json:"id"`
	Type         string           `json:"type"`
	Role         string           `json:"role"`
	Model        string           `json:"model"`
	Content      []anthropicBlock `json:"content"`
	StopReason   nullString       `json:"stop_reason"`
	StopSequence nullString       `json:"stop_sequence"`
	Usage        anthropicUsage   `json:"usage"`
}

// anthropicUsage is the message's usage; the stream's start and its
// message_delta carry fewer of the cache counts.
type anthropicUsage struct {
	InputTokens              int  `json:"input_tokens"`
	CacheReadInputTokens     *int `json:"cache_read_input_tokens,omitempty"`
	CacheCreationInputTokens *int `json:"cache_creation_input_tokens,omitempty"`
	OutputTokens             int  `json:"output_tokens"`
}

// anthropicBlock is a content block of the answer: text, thinking (with
// its signature, empty here) or tool_use.
type anthropicBlock struct {
	Type      string          `json:"type"`
	Text      *string         `json:"text,omitempty"`
	Thinking  *string         `json:"thinking,omitempty"`
	Signature *string         `json:"signature,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
}

func textBlock(text string) anthropicBlock {
	return anthropicBlock{Type: "text", Text: &text}
}

func thinkingBlock(thinking string) anthropicBlock {
	return anthropicBlock{Type: "thinking", Thinking: &thinking, Signature: ptr("")}
}

func toolUseBlock(name string, input json.RawMessage) anthropicBlock {
	return anthropicBlock{Type: "tool_use", ID: newID("toolu_"), Name: name, Input: input}
}

// anthropicDelta is a content_block_delta's delta.
type anthropicDelta struct {
	Type        string  `json:"type"`
	Text        *string `json:"text,omitempty"`
	Thinking    *string `json:"thinking,omitempty"`
	PartialJSON *string `json:"partial_json,omitempty"`
}

// anthropicEvent is a stream event that names only its type (ping,
// message_stop).
type anthropicEvent struct {
	Type string `json:"type"`
}

type messageStartEvent struct {
	Type    string              `json:"type"`
	Message anthropicMessageOut `json:"message"`
}

// blockEvent is content_block_start, content_block_delta or
// content_block_stop.
type blockEvent struct {
	Type         string          `json:"type"`
	Index        int             `json:"index"`
	ContentBlock *anthropicBlock `json:"content_block,omitempty"`
	Delta        *anthropicDelta `json:"delta,omitempty"`
}

type messageDeltaEvent struct {
	Type  string `json:"type"`
	Delta struct {
		StopReason   string     `json:"stop_reason"`
		StopSequence nullString `json:"stop_sequence"`
	} `json:"delta"`
	Usage anthropicUsage `json:"usage"`
}

// countTokensBody is POST /v1/messages/count_tokens.
type countTokensBody struct {
	InputTokens int `json:"input_tokens"`
}

// The OpenAI Responses API.

// responseObject is a response: in progress (the stream's first events)
// or complete, with its output.
type responseObject struct {
	ID                string             `json:"id"`
	Object            string             `json:"object"`
	CreatedAt         int64              `json:"created_at"`
	Status            string             `json:"status"`
	Model             string             `json:"model"`
	Output            []*responseItem    `json:"output"`
	OutputText        optional[string]   `json:"output_text,omitzero"`
	Error             *openAIError       `json:"error"`
	IncompleteDetails *incompleteDetails `json:"incomplete_details"`
	Store             bool               `json:"store"`
	Instructions      nullString         `json:"instructions"`
	ParallelToolCalls bool               `json:"parallel_tool_calls"`
	Tools             []struct{}         `json:"tools"`
	TopLogprobs       optional[int]      `json:"top_logprobs,omitzero"`
	Usage             *responsesUsage    `json:"usage"`
}

type incompleteDetails struct {
	Reason string `json:"reason"`
}

// responseItem is an output item: reasoning, message or function_call.
// What an item holds when it is added differs from when it is done (a
// reasoning item gains its content and status).
type responseItem struct {
	Type      string                   `json:"type"`
	ID        string                   `json:"id"`
	Status    string                   `json:"status,omitempty"`
	Role      string                   `json:"role,omitempty"`
	CallID    string                   `json:"call_id,omitempty"`
	Name      string                   `json:"name,omitempty"`
	Arguments optional[string]         `json:"arguments,omitzero"`
	Content   optional[[]responsePart] `json:"content,omitzero"`
	Summary   optional[[]responsePart] `json:"summary,omitzero"`
}

// responsePart is an item's part: output_text (with annotations, and
// logprobs when asked), reasoning_text or summary_text.
type responsePart struct {
	Type        string                   `json:"type"`
	Text        string                   `json:"text"`
	Annotations optional[[]struct{}]     `json:"annotations,omitzero"`
	Logprobs    optional[[]logprobEntry] `json:"logprobs,omitzero"`
}

func outputTextPart(text string) responsePart {
	return responsePart{Type: "output_text", Text: text, Annotations: some(emptyList)}
}

// eventHead begins every Responses stream event.
type eventHead struct {
	Type           string `json:"type"`
	SequenceNumber int    `json:"sequence_number"`
}

func (h *eventHead) stamp(typ string, seq int) { h.Type, h.SequenceNumber = typ, seq }

// responseEvent is response.created, response.in_progress,
// response.completed or response.incomplete.
type responseEvent struct {
	eventHead
	Response *responseObject `json:"response"`
}

// itemEvent is response.output_item.added or response.output_item.done.
type itemEvent struct {
	eventHead
	OutputIndex int           `json:"output_index"`
	Item        *responseItem `json:"item"`
}

// partEvent adds or ends an item's part: content_part (content_index) or
// reasoning_summary_part (summary_index).
type partEvent struct {
	eventHead
	ItemID       string        `json:"item_id"`
	OutputIndex  int           `json:"output_index"`
	ContentIndex *int          `json:"content_index,omitempty"`
	SummaryIndex *int          `json:"summary_index,omitempty"`
	Part         *responsePart `json:"part"`
}

// textEvent is a piece of an item's text (delta) or its whole (text, or
// arguments for a function call), in its content or its summary.
type textEvent struct {
	eventHead
	ItemID       string                   `json:"item_id"`
	OutputIndex  int                      `json:"output_index"`
	ContentIndex *int                     `json:"content_index,omitempty"`
	SummaryIndex *int                     `json:"summary_index,omitempty"`
	Delta        *string                  `json:"delta,omitempty"`
	Text         *string                  `json:"text,omitempty"`
	Arguments    *string                  `json:"arguments,omitempty"`
	Logprobs     optional[[]logprobEntry] `json:"logprobs,omitzero"`
}

// errorEvent is a stream's failure (its keys in their old order, as the
// errors').
type errorEvent struct {
	Code    string  `json:"code"`
	Message string  `json:"message"`
	Param   *string `json:"param"`
	eventHead
}
