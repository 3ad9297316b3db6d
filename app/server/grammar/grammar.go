package grammar

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/suzuran-app/suzuran/engine/chat"
)

// Options adapt a grammar to the prompt it continues.
type Options struct {
	// Thinking: the prompt ends inside an open <think> block (the Qwen
	// generation prompt with thinking on; chat.PromptOpensThinking tells).
	// The output may then reason freely up to </think>, and the
	// constrained text follows it (after at most two newlines).
	Thinking bool
	// ParallelToolCalls lets ToolCall's grammar continue after a call with
	// more calls (each on a new line) or end; without it there is exactly
	// one call.
	ParallelToolCalls bool
}

// JSONObject is the grammar of response_format json_object: any JSON
// object, nested at most five levels deep, with bounded whitespace.
func JSONObject(v *Vocabulary, o Options) (*Grammar, error) {
	n := &nfa{}
	body := n.anyObject(false, func() frag { return n.anyValue(objectDepth-1, false) })
	return build(v, n, body, o)
}

// JSONSchema is the grammar of response_format json_schema (and of the
// Responses API's text.format): JSON text that the schema validates. The
// schema is JSON text; an unsupported keyword is a *SchemaError naming it.
// Properties come in the schema's order, optional ones may be left out,
// and no property outside "properties" is written.
func JSONSchema(v *Vocabulary, schema []byte, o Options) (*Grammar, error) {
	root, err := chat.DecodeJSON(schema)
	if err != nil {
		return nil, &SchemaError{Path: "#", Reason: fmt.Sprintf("not valid JSON: %v", err)}
	}
	n := &nfa{}
	c := &compiler{n: n, root: root}
	body, err := c.value(root, "#")
	if err != nil {
		return nil, err
	}
	return build(v, n, body, o)
}

// Function is one tool the model may be made to call: its name and its
// parameters' JSON schema (an object schema; empty or null: no parameters).
type Function struct {
	Name       string
	Parameters json.RawMessage
}

// ToolCall is the grammar of a forced tool call (tool_choice "required" or
// a named function): one of functions called in the Qwen3.5/3.6 format the
// chat template teaches and engine/chat's Parser reads,
//
//	<tool_call>
//	<function=NAME>
//	<parameter=P>
//	value
//	</parameter>
//	</function>
//	</tool_call>
//
// with the parameters in schema order, the required ones always. A
// parameter whose schema type is "string" is written as raw text (the
// parser keeps it as a string), kept free of "</" and of "<" after a
// newline so that no closing tag can end it early; any other is JSON text
// valid against its schema. The arguments the parser assembles validate
// against the function's parameter schema.
func ToolCall(v *Vocabulary, functions []Function, o Options) (*Grammar, error) {
	if len(functions) == 0 {
		return nil, errors.New("grammar: a forced tool call needs at least one function")
	}
	n := &nfa{}
	var calls []func() (frag, error)
	for _, f := range functions {
		if f.Name == "" || !validName(f.Name) {
			return nil, fmt.Errorf("grammar: function name %q cannot be written in a tool call: use letters, digits, '_', '-' or '.'", f.Name)
		}
		var params any = chat.NewObject()
		if len(f.Parameters) > 0 && string(f.Parameters) != "null" {
			var err error
			if params, err = chat.DecodeJSON(f.Parameters); err != nil {
				return nil, &SchemaError{Path: "#", Reason: fmt.Sprintf("function %s: parameters are not valid JSON: %v", f.Name, err)}
			}
		}
		calls = append(calls, func() (frag, error) { return toolCall(n, f.Name, params) })
	}
	one := func() (frag, error) {
		var parts []frag
		for _, call := range calls {
			f, err := call()
			if err != nil {
				return frag{}, err
			}
			parts = append(parts, f)
		}
		return n.alt(parts...), nil
	}
	body, err := one()
	if err != nil {
		return nil, err
	}
	if o.ParallelToolCalls {
		more, err := one()
		if err != nil {
			return nil, err
		}
		body = n.seq(body, n.star(n.seq(n.lit("\n"), more)))
	}
	return build(v, n, body, o)
}

func validName(s string) bool {
	for _, r := range s {
		ok := r == '_' || r == '-' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
		if !ok {
			return false
		}
	}
	return true
}

// toolCall builds one call of function name with parameter schema params.
func toolCall(n *nfa, name string, params any) (frag, error) {
	c := &compiler{n: n, root: params, noCloseTag: true}
	obj, ok := params.(*chat.Object)
	if !ok {
		return frag{}, &SchemaError{Path: "#", Reason: fmt.Sprintf("function %s: parameters must be an object schema", name)}
	}
	if t, ok := obj.Get("type"); ok && t != "object" {
		return frag{}, &SchemaError{Path: "#/type", Reason: fmt.Sprintf("function %s: parameters must be an object schema, not type %v", name, t)}
	}
	members, err := c.members(obj, "#")
	if err != nil {
		return frag{}, err
	}
	parts := []frag{n.lit("<tool_call>\n<function=" + name + ">\n")}
	for _, m := range members {
		if !validName(m.name) {
			return frag{}, &SchemaError{Path: "#/properties", Reason: fmt.Sprintf("function %s: parameter name %q cannot be written in a tool call", name, m.name)}
		}
		path := "#/properties/" + escapePointer(m.name)
		var value frag
		if isStringSchema(m.schema) {
			value, err = c.rawString(m.schema.(*chat.Object), path)
		} else {
			value, err = c.value(m.schema, path)
		}
		if err != nil {
			return frag{}, err
		}
		p := n.seq(n.lit("<parameter="+m.name+">\n"), value, n.lit("\n</parameter>\n"))
		if !m.required {
			p = n.opt(p)
		}
		parts = append(parts, p)
	}
	parts = append(parts, n.lit("</function>\n</tool_call>"))
	return n.seq(parts...), nil
}

// isStringSchema is the chat parser's test for a parameter kept as raw
// text: a schema whose type is exactly "string".
func isStringSchema(s any) bool {
	obj, ok := s.(*chat.Object)
	if !ok {
		return false
	}
	t, _ := obj.Get("type")
	return t == "string"
}

// rawString is a string parameter's value as the template writes it: the
// text itself, unquoted. It may not contain "</" nor a '<' right after a
// newline (the parser's closing tags all start so); enum and const give
// their strings verbatim, and a format or length bound writes characters
// without '<' or newlines.
func (c *compiler) rawString(obj *chat.Object, path string) (frag, error) {
	n := c.n
	for _, k := range obj.Keys() {
		if annotations[k] || k == "type" || k == "enum" || k == "const" || k == "format" || k == "minLength" || k == "maxLength" {
			continue
		}
		return frag{}, &SchemaError{Path: path, Keyword: k, Reason: "not supported on a string parameter of a tool call"}
	}
	var values []any
	if v, ok := obj.Get("const"); ok {
		values = []any{v}
	} else if v, ok := obj.Get("enum"); ok {
		values, _ = v.([]any)
	}
	if values != nil {
		var parts []frag
		for _, v := range values {
			if s, ok := v.(string); ok && !strings.Contains(s, "</") && !strings.Contains(s, "\n<") {
				parts = append(parts, n.lit(s))
			}
		}
		if len(parts) == 0 {
			return frag{}, c.errorf(path, "no enum value is a string that can be written as a tool-call parameter")
		}
		return n.alt(parts...), nil
	}
	if f, ok := obj.Get("format"); ok {
		name, _ := f.(string)
		build, known := formats[name]
		if !known {
			return frag{}, &SchemaError{Path: path, Keyword: "format", Reason: fmt.Sprintf("format %q is not generated (supported: date-time, date, time, uuid); drop it", name)}
		}
		return build(n), nil
	}
	lo, _, err := c.count(obj, "minLength", path)
	if err != nil {
		return frag{}, err
	}
	hi, bounded, err := c.count(obj, "maxLength", path)
	if err != nil {
		return frag{}, err
	}
	if lo > 0 || bounded {
		if !bounded {
			hi = -1
		} else if hi < lo {
			return frag{}, c.errorf(path, "maxLength %d is below minLength %d", hi, lo)
		}
		return n.repeat(lo, hi, func() frag {
			return n.alt(n.class(append(asciiExcept('<'), byteRange{'\t', '\t'})...), n.utf8Multibyte())
		}), nil
	}
	return n.rawText(), nil
}

// rawText matches UTF-8 text (tabs and newlines included) without "</"
// and without '<' right after a newline: three states remember whether the
// last byte was an ordinary character, a newline or a '<'.
func (n *nfa) rawText() frag {
	normal, newline, lt, end := n.state(), n.state(), n.state(), n.state()
	link := func(from int32, f frag, to int32) {
		n.epsilon(from, f.in)
		n.epsilon(f.out, to)
	}
	plain := func(exclude ...byte) frag {
		ascii := asciiExcept(append([]byte{'<'}, exclude...)...)
		return n.alt(n.class(append(ascii, byteRange{'\t', '\t'})...), n.utf8Multibyte())
	}
	for _, s := range []int32{normal, newline, lt} {
		n.epsilon(s, end)
		link(s, n.lit("\n"), newline)
	}
	link(normal, plain(), normal)
	link(newline, plain(), normal)
	link(lt, plain('/'), normal)
	link(normal, n.lit("<"), lt)
	link(lt, n.lit("<"), lt)
	return frag{normal, end}
}

// build finishes an automaton: the thinking prefix if asked, then body,
// then acceptance.
func build(v *Vocabulary, n *nfa, body frag, o Options) (*Grammar, error) {
	if o.Thinking {
		body = n.seq(n.until("</think>"), n.repeat(0, 2, func() frag { return n.lit("\n") }), body)
	}
	if n.tooBig {
		return nil, errTooBig
	}
	return &Grammar{dfa: newDFA(n, body.in, body.out, v)}, nil
}
