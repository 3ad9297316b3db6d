package chat

import (
	"bytes"
	"encoding/json"
	"strings"
)

// Tags of the Qwen3.5/3.6 output format.
const (
	thinkOpen      = "<think>"
	thinkClose     = "</think>"
	toolCallOpen   = "<tool_call>"
	toolCallClose  = "</tool_call>"
	functionOpen   = "<function="
	functionClose  = "</function>"
	parameterOpen  = "<parameter="
	parameterClose = "</parameter>"
)

// EventKind says what an Event carries.
type EventKind int

// Events a Parser emits, in output order.
const (
	// ReasoningDelta: Text continues the reasoning.
	ReasoningDelta EventKind = iota + 1
	// ContentDelta: Text continues the answer.
	ContentDelta
	// ToolCallStart: a call numbered Index (from 0) to function Name begins.
	ToolCallStart
	// ToolCallArguments: Text continues the JSON object of the call's
	// arguments; the fragments of one call concatenate to the whole object.
	ToolCallArguments
	// ToolCallEnd: the call numbered Index is complete.
	ToolCallEnd
)

// Event is one step of parsed output.
type Event struct {
	Kind  EventKind
	Text  string
	Index int
	Name  string
}

// ParserOptions describe the prompt the output continues.
type ParserOptions struct {
	// InReasoning is true when the prompt ended inside an open <think>
	// block, as the Qwen generation prompt does with thinking on; the output
	// then starts as reasoning. PromptOpensThinking tells from the prompt.
	InReasoning bool
	// Tools are the request's tool definitions. A parameter whose schema
	// type is "string" keeps its value as a string even when it would parse
	// as JSON ("42", "true"); other values become JSON when they parse.
	Tools []any
}

// PromptOpensThinking reports whether prompt ends inside a <think> block.
func PromptOpensThinking(prompt string) bool {
	return strings.LastIndex(prompt, thinkOpen) > strings.LastIndex(prompt, thinkClose)
}

type parserState int

const (
	stateStart     parserState = iota // before any output, not in reasoning
	stateReasoning                    // inside <think>
	stateContent                      // the answer
	stateTool                         // inside <tool_call>
	stateAfterTool                    // between or after tool calls
)

type toolState int

const (
	toolHeader toolState = iota // expecting <function=NAME>
	toolBody                    // expecting <parameter=…>, </function> or </tool_call>
	toolValue                   // inside a parameter's value
	toolClose                   // expecting </tool_call>
)

// Parser splits streamed model output into reasoning, content and tool
// calls. Feed it text as it is decoded; it returns the events that became
// certain and holds back only what might still be the start of a tag.
type Parser struct {
	opts  ParserOptions
	state parserState
	buf   string
	// started is set once the current reasoning or content section has
	// emitted text; leading newlines (after <think>, </think>) are dropped.
	started bool

	tool      toolState
	calls     int    // tool calls started so far
	callName  string // function of the current call
	callRaw   string // text of the current call, to fall back to content
	space     string // white space before <tool_call>, likewise
	param     string // parameter whose value is being read
	params    int    // parameters emitted in the current call
	paramType map[[2]string]string
}

// NewParser returns a parser for output that continues a prompt as
// described by opts.
func NewParser(opts ParserOptions) *Parser {
	p := &Parser{opts: opts, paramType: schemaTypes(opts.Tools)}
	if opts.InReasoning {
		p.state = stateReasoning
	}
	return p
}

// Feed adds text and returns the events it completes.
func (p *Parser) Feed(text string) []Event {
	p.buf += text
	var ev []Event
	for {
		var progressed bool
		ev, progressed = p.step(ev, false)
		if !progressed {
			return ev
		}
	}
}

// Finish ends the output and returns the remaining events. A tool call cut
// off before its end is closed with the parameters read so far; one cut off
// before its function name is returned as content.
func (p *Parser) Finish() []Event {
	var ev []Event
	for {
		var progressed bool
		ev, progressed = p.step(ev, true)
		if !progressed {
			break
		}
	}
	switch p.state {
	case stateStart, stateContent:
		ev = p.emitText(ev, ContentDelta, p.buf)
	case stateReasoning:
		ev = p.emitText(ev, ReasoningDelta, p.buf)
	case stateTool:
		switch p.tool {
		case toolHeader:
			ev = p.emitText(ev, ContentDelta, p.space+toolCallOpen+p.callRaw+p.buf)
		case toolValue:
			// Drop a closing tag that was cut off with the output.
			ev = p.emitParam(ev, p.buf[:len(p.buf)-partialSuffix(p.buf, "\n"+parameterClose)])
			ev = p.endCall(ev)
		default:
			ev = p.endCall(ev)
		}
	}
	p.buf = ""
	return ev
}

// emitText appends a text event, dropping the leading newlines of a section.
func (p *Parser) emitText(ev []Event, kind EventKind, s string) []Event {
	if !p.started {
		s = strings.TrimLeft(s, "\r\n")
	}
	if s == "" {
		return ev
	}
	p.started = true
	if n := len(ev); n > 0 && ev[n-1].Kind == kind {
		ev[n-1].Text += s
		return ev
	}
	return append(ev, Event{Kind: kind, Text: s})
}

// step makes one transition if the buffer allows it.
func (p *Parser) step(ev []Event, final bool) ([]Event, bool) {
	switch p.state {
	case stateStart:
		s := strings.TrimLeft(p.buf, " \t\r\n")
		if strings.HasPrefix(s, thinkOpen) {
			p.buf = s[len(thinkOpen):]
			p.state, p.started = stateReasoning, false
			return ev, true
		}
		if !final && (s == "" || strings.HasPrefix(thinkOpen, s)) {
			return ev, false
		}
		p.state = stateContent
		return ev, true

	case stateReasoning:
		if !p.started {
			// A model may repeat the <think> its prompt already opened.
			s := strings.TrimLeft(p.buf, " \t\r\n")
			if strings.HasPrefix(s, thinkOpen) {
				p.buf = s[len(thinkOpen):]
				return ev, true
			}
			if !final && s != "" && strings.HasPrefix(thinkOpen, s) {
				return ev, false
			}
		}
		if i := strings.Index(p.buf, thinkClose); i >= 0 {
			ev = p.emitText(ev, ReasoningDelta, strings.TrimRight(p.buf[:i], " \t\r\n"))
			p.buf = p.buf[i+len(thinkClose):]
			p.state, p.started = stateContent, false
			return ev, true
		}
		n := holdBack(p.buf, thinkClose)
		ev = p.emitText(ev, ReasoningDelta, p.buf[:n])
		p.buf = p.buf[n:]
		return ev, false

	case stateContent:
		if i := strings.Index(p.buf, toolCallOpen); i >= 0 {
			text := strings.TrimRight(p.buf[:i], " \t\r\n")
			ev = p.emitText(ev, ContentDelta, text)
			p.startCall(p.buf[len(text):i])
			p.buf = p.buf[i+len(toolCallOpen):]
			return ev, true
		}
		n := holdBack(p.buf, toolCallOpen)
		ev = p.emitText(ev, ContentDelta, p.buf[:n])
		p.buf = p.buf[n:]
		return ev, false

	case stateAfterTool:
		s := strings.TrimLeft(p.buf, " \t\r\n")
		if strings.HasPrefix(s, toolCallOpen) {
			p.buf = s[len(toolCallOpen):]
			p.startCall("")
			return ev, true
		}
		if s == "" || (!final && strings.HasPrefix(toolCallOpen, s)) {
			p.buf = s
			return ev, false
		}
		// Text after the calls, which the format does not foresee: keep it
		// as content rather than lose it.
		p.buf = s
		p.state, p.started = stateContent, false
		return ev, true

	case stateTool:
		return p.stepTool(ev, final)
	}
	return ev, false
}

// startCall enters a tool call; space is the white space that preceded
// the tag, which belongs to the content if the call turns out to be text.
func (p *Parser) startCall(space string) {
	p.state, p.tool = stateTool, toolHeader
	p.callName, p.callRaw, p.param, p.params = "", "", "", 0
	p.space = space
}

// consume drops n bytes of the buffer, remembering them as the call's text.
func (p *Parser) consume(n int) {
	p.callRaw += p.buf[:n]
	p.buf = p.buf[n:]
}

// leadingSpace is the length of the buffer's leading white space.
func (p *Parser) leadingSpace() int {
	return len(p.buf) - len(strings.TrimLeft(p.buf, " \t\r\n"))
}

func (p *Parser) stepTool(ev []Event, final bool) ([]Event, bool) {
	ws := p.leadingSpace()
	s := p.buf[ws:]
	switch p.tool {
	case toolHeader:
		if strings.HasPrefix(s, functionOpen) {
			end := strings.IndexByte(s, '>')
			if end < 0 {
				return ev, false
			}
			p.callName = strings.TrimSpace(s[len(functionOpen):end])
			p.consume(ws + end + 1)
			p.tool = toolBody
			ev = append(ev,
				Event{Kind: ToolCallStart, Index: p.calls, Name: p.callName},
				Event{Kind: ToolCallArguments, Index: p.calls, Text: "{"})
			return ev, true
		}
		if !final && strings.HasPrefix(functionOpen, s) {
			return ev, false
		}
		// Not a tool call after all: the tag was text. (Nothing of the
		// call has been consumed yet, so the buffer continues it.)
		p.state, p.started = stateContent, true
		ev = p.emitText(ev, ContentDelta, p.space+toolCallOpen)
		return ev, true

	case toolBody:
		switch {
		case strings.HasPrefix(s, parameterOpen):
			end := strings.IndexByte(s, '>')
			if end < 0 {
				return ev, false
			}
			p.param = strings.TrimSpace(s[len(parameterOpen):end])
			p.consume(ws + end + 1)
			p.tool = toolValue
			return ev, true
		case strings.HasPrefix(s, functionClose):
			p.consume(ws + len(functionClose))
			p.tool = toolClose
			return ev, true
		case strings.HasPrefix(s, toolCallClose):
			p.consume(ws + len(toolCallClose))
			return p.endCall(ev), true
		}
		if !final && (strings.HasPrefix(parameterOpen, s) || strings.HasPrefix(functionClose, s) || strings.HasPrefix(toolCallClose, s)) {
			return ev, false
		}
		// Unexpected text inside the call: close the call and carry on
		// with the text as content.
		ev = p.endCall(ev)
		p.buf = s
		p.state, p.started = stateContent, false
		return ev, true

	case toolValue:
		// The value ends at </parameter>; a model that forgets it is caught
		// by the next parameter or the end of the function.
		end, tagLen := strings.Index(p.buf, parameterClose), len(parameterClose)
		for _, tag := range []string{"\n" + parameterOpen, "\n" + functionClose, "\n" + toolCallClose} {
			if i := strings.Index(p.buf, tag); i >= 0 && (end < 0 || i < end) {
				end, tagLen = i+1, 0
			}
		}
		if end < 0 {
			return ev, false
		}
		ev = p.emitParam(ev, p.buf[:end])
		p.consume(end + tagLen)
		p.tool = toolBody
		return ev, true

	case toolClose:
		if strings.HasPrefix(s, toolCallClose) {
			p.consume(ws + len(toolCallClose))
			return p.endCall(ev), true
		}
		if !final && strings.HasPrefix(toolCallClose, s) {
			return ev, false
		}
		ev = p.endCall(ev)
		p.buf = s
		p.state, p.started = stateContent, false
		return ev, true
	}
	return ev, false
}

// emitParam appends one "name": value member to the call's arguments. The
// template writes each value between newlines; those two are not part of it.
func (p *Parser) emitParam(ev []Event, raw string) []Event {
	raw = strings.TrimPrefix(raw, "\n")
	raw = strings.TrimSuffix(raw, "\n")
	var b bytes.Buffer
	if p.params > 0 {
		b.WriteByte(',')
	}
	writeJSONString(&b, p.param)
	b.WriteByte(':')
	b.WriteString(p.valueJSON(raw))
	p.params++
	return append(ev, Event{Kind: ToolCallArguments, Index: p.calls, Text: b.String()})
}

// valueJSON is a parameter's value as JSON: the value itself when it parses
// as JSON and its schema does not say string, else a JSON string.
func (p *Parser) valueJSON(raw string) string {
	if p.paramType[[2]string{p.callName, p.param}] != "string" {
		var b bytes.Buffer
		if err := json.Compact(&b, []byte(raw)); err == nil {
			return b.String()
		}
	}
	var b bytes.Buffer
	writeJSONString(&b, raw)
	return b.String()
}

func (p *Parser) endCall(ev []Event) []Event {
	ev = append(ev,
		Event{Kind: ToolCallArguments, Index: p.calls, Text: "}"},
		Event{Kind: ToolCallEnd, Index: p.calls})
	p.calls++
	p.state = stateAfterTool
	return ev
}

// partialSuffix is the length of the longest proper prefix of tag that s
// ends with.
func partialSuffix(s, tag string) int {
	for k := min(len(tag)-1, len(s)); k > 0; k-- {
		if strings.HasSuffix(s, tag[:k]) {
			return k
		}
	}
	return 0
}

// holdBack returns how much of s is safe to emit: everything except a
// suffix that could be the start of tag, and the white space before it
// (which is dropped if the tag follows).
func holdBack(s, tag string) int {
	n := len(s) - partialSuffix(s, tag)
	for n > 0 && strings.IndexByte(" \t\r\n", s[n-1]) >= 0 {
		n--
	}
	return n
}

// schemaTypes maps (function, parameter) to the parameter's JSON schema
// type, where the tools give a single type.
func schemaTypes(tools []any) map[[2]string]string {
	types := map[[2]string]string{}
	for _, tool := range tools {
		fn := objectAt(tool, "function")
		name, _ := valueAt(fn, "name").(string)
		props := objectAt(objectAt(fn, "parameters"), "properties")
		if props == nil {
			continue
		}
		for _, param := range props.Keys() {
			prop, _ := props.Get(param)
			if typ, ok := valueAt(prop, "type").(string); ok {
				types[[2]string{name, param}] = typ
			}
		}
	}
	return types
}

func valueAt(v any, key string) any {
	if obj, ok := v.(*Object); ok {
		x, _ := obj.Get(key)
		return x
	}
	return nil
}

func objectAt(v any, key string) *Object {
	obj, _ := valueAt(v, key).(*Object)
	return obj
}

// ParsedToolCall is a complete tool call.
type ParsedToolCall struct {
	Name string
	// Arguments is the JSON object of the arguments, keys in the order the
	// model wrote them.
	Arguments string
}

// Output is a whole response, parsed.
type Output struct {
	Reasoning string
	Content   string
	ToolCalls []ParsedToolCall
}

// ParseOutput parses a complete response at once.
func ParseOutput(text string, opts ParserOptions) Output {
	p := NewParser(opts)
	return Collect(append(p.Feed(text), p.Finish()...))
}

// Collect assembles events into an Output.
func Collect(events []Event) Output {
	var out Output
	var reasoning, content strings.Builder
	for _, e := range events {
		switch e.Kind {
		case ReasoningDelta:
			reasoning.WriteString(e.Text)
		case ContentDelta:
			content.WriteString(e.Text)
		case ToolCallStart:
			out.ToolCalls = append(out.ToolCalls, ParsedToolCall{Name: e.Name})
		case ToolCallArguments:
			if e.Index < len(out.ToolCalls) {
				out.ToolCalls[e.Index].Arguments += e.Text
			}
		}
	}
	out.Reasoning, out.Content = reasoning.String(), content.String()
	return out
}
