package grammar

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/suzuran-app/suzuran/engine/chat"
)

// Depths of the values a schema leaves open: json_object's object, and a
// value whose schema is true, {} or an object without properties. Each
// level doubles the automaton (an object's and an array's values are
// separate copies), so the bound is small.
const (
	objectDepth   = 5 // json_object: the object and four levels inside it
	openDepth     = 3 // an open value inside a schema
	maxRepetition = 256
)

// SchemaError reports a schema this package cannot compile. Keyword is set
// when the cause is a keyword it does not support; Path is where in the
// schema, as a JSON pointer ("#/properties/zip").
type SchemaError struct {
	Path    string
	Keyword string
	Reason  string
}

func (e *SchemaError) Error() string {
	if e.Keyword != "" {
		return fmt.Sprintf("JSON schema keyword %q at %s is not supported: %s", e.Keyword, e.Path, e.Reason)
	}
	return fmt.Sprintf("JSON schema at %s: %s", e.Path, e.Reason)
}

// errTooBig stops a compilation that passed maxStates as soon as it does.
var errTooBig = fmt.Errorf("grammar: the schema unrolls into more than %d automaton states: bound fewer repetitions (maxItems, maxLength) or nest less", maxStates)

// annotations are keywords that do not constrain the value; they are
// accepted and ignored.
var annotations = map[string]bool{
	"title": true, "description": true, "default": true, "examples": true, "$schema": true,
	"$id": true, "$comment": true, "deprecated": true, "readOnly": true, "writeOnly": true,
	"$defs": true, "definitions": true, "$anchor": true, "contentMediaType": true,
	"contentEncoding": true, "discriminator": true, "strict": true,
}

// constraining are the keywords the compiler understands.
var constraining = map[string]bool{
	"type": true, "enum": true, "const": true, "anyOf": true, "oneOf": true, "allOf": true,
	"$ref": true, "nullable": true,
	"properties": true, "required": true, "additionalProperties": true, "unevaluatedProperties": true,
	"items": true, "prefixItems": true, "minItems": true, "maxItems": true,
	"minLength": true, "maxLength": true, "format": true,
	"minimum": true, "maximum": true, "exclusiveMinimum": true, "exclusiveMaximum": true,
	"pattern": true,
}

// unsupportedWhy explains the keywords most often met that the compiler
// refuses.
var unsupportedWhy = map[string]string{
	"patternProperties": "property names by pattern are not generated; list the properties",
	"multipleOf":        "multiples are not enforced; drop the keyword",
	"uniqueItems":       "distinct items are not enforced; drop the keyword",
	"not":               "negated schemas are not compiled",
	"if":                "conditional schemas are not compiled",
}

// compiler turns a schema into NFA fragments.
type compiler struct {
	n    *nfa
	root any
	// refs are the $refs being expanded, to refuse recursive schemas.
	refs []string
	// noCloseTag: strings may not contain "</" (tool-call values).
	noCloseTag bool
}

func (c *compiler) errorf(path, format string, args ...any) error {
	return &SchemaError{Path: path, Reason: fmt.Sprintf(format, args...)}
}

// value compiles the schema s found at path.
func (c *compiler) value(s any, path string) (frag, error) {
	n := c.n
	if n.tooBig {
		return frag{}, errTooBig
	}
	if b, ok := s.(bool); ok {
		if !b {
			return frag{}, c.errorf(path, "the schema false allows no value")
		}
		return n.anyValue(openDepth, c.noCloseTag), nil
	}
	obj, ok := s.(*chat.Object)
	if !ok {
		return frag{}, c.errorf(path, "a schema must be an object or a boolean, not %s", kindOf(s))
	}
	for _, k := range obj.Keys() {
		if annotations[k] || constraining[k] || strings.HasPrefix(k, "x-") {
			continue
		}
		why := unsupportedWhy[k]
		if why == "" {
			why = "remove it or describe the value with type, properties, items, enum, const or anyOf"
		}
		return frag{}, &SchemaError{Path: path, Keyword: k, Reason: why}
	}
	if f, ok, err := c.combined(obj, path); ok {
		return f, err
	}
	return c.typed(obj, path)
}

// siblings names a constraining keyword of obj other than except (and
// nullable), or "".
func siblings(obj *chat.Object, except string) string {
	for _, k := range obj.Keys() {
		if k != except && constraining[k] && k != "nullable" {
			return k
		}
	}
	return ""
}

// combined compiles a schema made of others ($ref, allOf, anyOf, oneOf);
// ok is false for a schema that is none of these.
func (c *compiler) combined(obj *chat.Object, path string) (f frag, ok bool, err error) {
	if ref, ok := obj.Get("$ref"); ok {
		if k := siblings(obj, "$ref"); k != "" {
			return frag{}, true, &SchemaError{Path: path, Keyword: k, Reason: "keywords beside $ref are not combined with it; move them into the referenced schema"}
		}
		f, err := c.ref(ref, path)
		return f, true, err
	}
	if all, ok := obj.Get("allOf"); ok {
		list, _ := all.([]any)
		if len(list) != 1 || siblings(obj, "allOf") != "" {
			return frag{}, true, &SchemaError{Path: path, Keyword: "allOf", Reason: "only an allOf of one schema and nothing beside it is supported; merge the schemas"}
		}
		f, err := c.value(list[0], path+"/allOf/0")
		return f, true, err
	}
	for _, kw := range []string{"anyOf", "oneOf"} {
		branches, ok := obj.Get(kw)
		if !ok {
			continue
		}
		if k := siblings(obj, kw); k != "" {
			return frag{}, true, &SchemaError{Path: path, Keyword: k, Reason: kw + " beside other keywords is not supported; move them into each branch"}
		}
		list, ok := branches.([]any)
		if !ok || len(list) == 0 {
			return frag{}, true, c.errorf(path+"/"+kw, "must be a non-empty array of schemas")
		}
		var parts []frag
		for i, b := range list {
			f, err := c.value(b, fmt.Sprintf("%s/%s/%d", path, kw, i))
			if err != nil {
				return frag{}, true, err
			}
			parts = append(parts, f)
		}
		if nullable(obj) {
			parts = append(parts, c.n.lit("null"))
		}
		return c.n.alt(parts...), true, nil
	}
	return frag{}, false, nil
}

// typed compiles a schema by its const, enum or types.
func (c *compiler) typed(obj *chat.Object, path string) (frag, error) {
	n := c.n
	types, err := c.types(obj, path)
	if err != nil {
		return frag{}, err
	}
	if v, ok := obj.Get("const"); ok {
		return c.literals([]any{v}, types, path+"/const")
	}
	if v, ok := obj.Get("enum"); ok {
		list, ok := v.([]any)
		if !ok || len(list) == 0 {
			return frag{}, c.errorf(path+"/enum", "must be a non-empty array")
		}
		return c.literals(list, types, path+"/enum")
	}
	if types == nil {
		return n.anyValue(openDepth, c.noCloseTag), nil
	}
	var parts []frag
	for _, t := range types {
		var f frag
		var err error
		switch t {
		case "object":
			f, err = c.object(obj, path)
		case "array":
			f, err = c.array(obj, path)
		case "string":
			f, err = c.str(obj, path)
		case "integer":
			f, err = c.integer(obj, path)
		case "number":
			f, err = c.number(obj, path)
		case "boolean":
			f = n.alt(n.lit("true"), n.lit("false"))
		case "null":
			f = n.lit("null")
		}
		if err != nil {
			return frag{}, err
		}
		parts = append(parts, f)
	}
	return n.alt(parts...), nil
}

func nullable(obj *chat.Object) bool {
	v, _ := obj.Get("nullable")
	return v == true
}

// types returns the schema's types (nil: any value), from "type" or, when
// absent, from the keywords that imply one.
func (c *compiler) types(obj *chat.Object, path string) ([]string, error) {
	var types []string
	switch t, _ := obj.Get("type"); t := t.(type) {
	case nil:
		_, props := obj.Get("properties")
		_, req := obj.Get("required")
		_, addl := obj.Get("additionalProperties")
		_, items := obj.Get("items")
		_, prefix := obj.Get("prefixItems")
		switch {
		case props || req || addl:
			types = []string{"object"}
		case items || prefix:
			types = []string{"array"}
		default:
			return nil, nil
		}
	case string:
		types = []string{t}
	case []any:
		for i, x := range t {
			s, ok := x.(string)
			if !ok {
				return nil, c.errorf(fmt.Sprintf("%s/type/%d", path, i), "a type must be a string")
			}
			types = append(types, s)
		}
	default:
		return nil, c.errorf(path+"/type", "must be a string or an array of strings")
	}
	for _, t := range types {
		switch t {
		case "object", "array", "string", "integer", "number", "boolean", "null":
		default:
			return nil, c.errorf(path+"/type", "unknown type %q", t)
		}
	}
	if nullable(obj) && !slices.Contains(types, "null") {
		types = append(types, "null")
	}
	return types, nil
}

// literals matches exactly one of values (const, enum), keeping those of
// the schema's types when it names any.
func (c *compiler) literals(values []any, types []string, path string) (frag, error) {
	var parts []frag
	for _, v := range values {
		if types != nil && !slices.ContainsFunc(types, func(t string) bool { return hasType(v, t) }) {
			continue
		}
		text, err := encodeJSON(v)
		if err != nil {
			return frag{}, c.errorf(path, "%v", err)
		}
		parts = append(parts, c.n.lit(string(text)))
	}
	if len(parts) == 0 {
		return frag{}, c.errorf(path, "no value is of the schema's type %v", types)
	}
	return c.n.alt(parts...), nil
}

func hasType(v any, t string) bool {
	switch v := v.(type) {
	case nil:
		return t == "null"
	case bool:
		return t == "boolean"
	case string:
		return t == "string"
	case []any:
		return t == "array"
	case *chat.Object:
		return t == "object"
	case json.Number:
		if t == "number" {
			return true
		}
		f, err := strconv.ParseFloat(string(v), 64)
		return t == "integer" && err == nil && f == float64(int64(f))
	}
	return false
}

// encodeJSON writes a decoded value compactly. Go's HTML escaping of <, >
// and & is kept: it is valid JSON, and it keeps "</" out of tool-call
// values.
func encodeJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	switch v := v.(type) {
	case *chat.Object:
		b.WriteByte('{')
		for i, k := range v.Keys() {
			if i > 0 {
				b.WriteByte(',')
			}
			key, _ := json.Marshal(k)
			b.Write(key)
			b.WriteByte(':')
			x, _ := v.Get(k)
			inner, err := encodeJSON(x)
			if err != nil {
				return nil, err
			}
			b.Write(inner)
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, x := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			inner, err := encodeJSON(x)
			if err != nil {
				return nil, err
			}
			b.Write(inner)
		}
		b.WriteByte(']')
	default:
		out, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		b.Write(out)
	}
	return b.Bytes(), nil
}

// ref expands a local $ref ("#/$defs/Name", any JSON pointer into the root
// schema). A schema that refers to itself is refused: its language is not
// regular, and this compiler builds finite automata.
func (c *compiler) ref(ref any, path string) (frag, error) {
	s, ok := ref.(string)
	if !ok || !strings.HasPrefix(s, "#") {
		return frag{}, &SchemaError{Path: path, Keyword: "$ref", Reason: fmt.Sprintf("only references inside the schema (#/...) are supported, not %v", ref)}
	}
	if slices.Contains(c.refs, s) {
		return frag{}, &SchemaError{Path: path, Keyword: "$ref", Reason: fmt.Sprintf("recursive reference %s: nesting without a bound is not supported", s)}
	}
	target := c.root
	if p := strings.TrimPrefix(s, "#"); p != "" {
		for _, tok := range strings.Split(strings.TrimPrefix(p, "/"), "/") {
			tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
			switch cur := target.(type) {
			case *chat.Object:
				next, ok := cur.Get(tok)
				if !ok {
					return frag{}, c.errorf(path+"/$ref", "%s does not exist in the schema", s)
				}
				target = next
			case []any:
				i, err := strconv.Atoi(tok)
				if err != nil || i < 0 || i >= len(cur) {
					return frag{}, c.errorf(path+"/$ref", "%s does not exist in the schema", s)
				}
				target = cur[i]
			default:
				return frag{}, c.errorf(path+"/$ref", "%s does not exist in the schema", s)
			}
		}
	}
	c.refs = append(c.refs, s)
	defer func() { c.refs = c.refs[:len(c.refs)-1] }()
	return c.value(target, s)
}

// member is one property an object may or must have.
type member struct {
	name     string
	schema   any
	required bool
}

// members lists an object schema's properties in schema order, then
// required names that properties leaves out (any value).
func (c *compiler) members(obj *chat.Object, path string) ([]member, error) {
	var required []string
	if r, ok := obj.Get("required"); ok {
		list, ok := r.([]any)
		if !ok {
			return nil, c.errorf(path+"/required", "must be an array of property names")
		}
		for _, x := range list {
			s, ok := x.(string)
			if !ok {
				return nil, c.errorf(path+"/required", "must be an array of property names")
			}
			if !slices.Contains(required, s) {
				required = append(required, s)
			}
		}
	}
	var out []member
	if p, ok := obj.Get("properties"); ok {
		props, ok := p.(*chat.Object)
		if !ok {
			return nil, c.errorf(path+"/properties", "must be an object of schemas")
		}
		for _, k := range props.Keys() {
			s, _ := props.Get(k)
			out = append(out, member{name: k, schema: s, required: slices.Contains(required, k)})
		}
	}
	for _, r := range required {
		if !slices.ContainsFunc(out, func(m member) bool { return m.name == r }) {
			out = append(out, member{name: r, schema: true, required: true})
		}
	}
	return out, nil
}

// object compiles an object schema. With properties, the object holds
// those (the required ones always, the others optionally) in schema order
// and no others, which satisfies any additionalProperties. Without, it is
// a map whose values follow additionalProperties (any value when absent).
func (c *compiler) object(obj *chat.Object, path string) (frag, error) {
	n := c.n
	if u, ok := obj.Get("unevaluatedProperties"); ok && u != false {
		return frag{}, &SchemaError{Path: path, Keyword: "unevaluatedProperties", Reason: "only false is supported"}
	}
	members, err := c.members(obj, path)
	if err != nil {
		return frag{}, err
	}
	_, hasProps := obj.Get("properties")
	addl, hasAddl := obj.Get("additionalProperties")
	if !hasProps && len(members) == 0 {
		switch {
		case addl == false:
			return n.seq(n.lit("{"), n.ws(), n.lit("}")), nil
		case hasAddl && addl != true:
			var ferr error
			f := n.anyObject(c.noCloseTag, func() frag {
				v, err := c.value(addl, path+"/additionalProperties")
				if err != nil {
					ferr = err
					return n.empty()
				}
				return v
			})
			return f, ferr
		}
		return n.anyObject(c.noCloseTag, func() frag { return n.anyValue(openDepth-1, c.noCloseTag) }), nil
	}

	// first[i]: nothing written yet before member i; after[i]: something
	// was, so member i needs a comma.
	first := make([]int32, len(members)+1)
	after := make([]int32, len(members)+1)
	for i := range first {
		first[i], after[i] = n.state(), n.state()
	}
	for i, m := range members {
		key, _ := json.Marshal(m.name)
		v, err := c.value(m.schema, path+"/properties/"+escapePointer(m.name))
		if err != nil {
			return frag{}, err
		}
		body := n.seq(n.lit(string(key)), n.ws(), n.lit(":"), n.ws(), v)
		n.epsilon(first[i], body.in)
		comma := n.seq(n.ws(), n.lit(","), n.ws())
		n.epsilon(after[i], comma.in)
		n.epsilon(comma.out, body.in)
		n.epsilon(body.out, after[i+1])
		if !m.required {
			n.epsilon(first[i], first[i+1])
			n.epsilon(after[i], after[i+1])
		}
	}
	open := n.seq(n.lit("{"), n.ws())
	n.epsilon(open.out, first[0])
	end := n.state()
	closeEmpty := n.lit("}")
	n.epsilon(first[len(members)], closeEmpty.in)
	n.epsilon(closeEmpty.out, end)
	closeAfter := n.seq(n.ws(), n.lit("}"))
	n.epsilon(after[len(members)], closeAfter.in)
	n.epsilon(closeAfter.out, end)
	return frag{open.in, end}, nil
}

func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// count reads a non-negative integer keyword, bounded by maxRepetition.
func (c *compiler) count(obj *chat.Object, key, path string) (int, bool, error) {
	v, ok := obj.Get(key)
	if !ok {
		return 0, false, nil
	}
	num, isNum := v.(json.Number)
	i, err := strconv.Atoi(string(num))
	if !isNum || err != nil || i < 0 {
		return 0, false, c.errorf(path+"/"+key, "must be a non-negative integer")
	}
	if i > maxRepetition {
		return 0, false, &SchemaError{Path: path, Keyword: key, Reason: fmt.Sprintf("at most %d is supported", maxRepetition)}
	}
	return i, true, nil
}

// array compiles an array schema: prefixItems first, then items, between
// minItems and maxItems elements.
func (c *compiler) array(obj *chat.Object, path string) (frag, error) {
	n := c.n
	var prefix []any
	if p, ok := obj.Get("prefixItems"); ok {
		list, ok := p.([]any)
		if !ok {
			return frag{}, c.errorf(path+"/prefixItems", "must be an array of schemas")
		}
		prefix = list
	}
	items, hasItems := obj.Get("items")
	if !hasItems {
		items = true
	}
	if _, isList := items.([]any); isList {
		return frag{}, &SchemaError{Path: path, Keyword: "items", Reason: "an array of item schemas is the old tuple form; use prefixItems"}
	}
	lo, _, err := c.count(obj, "minItems", path)
	if err != nil {
		return frag{}, err
	}
	hi, bounded, err := c.count(obj, "maxItems", path)
	if err != nil {
		return frag{}, err
	}
	if !bounded {
		hi = -1
	}
	if items == false {
		if !bounded || hi > len(prefix) {
			hi, bounded = len(prefix), true
		}
	}
	if bounded && hi < lo {
		return frag{}, c.errorf(path, "maxItems %d is below minItems %d", hi, lo)
	}
	if bounded && hi == 0 {
		return n.seq(n.lit("["), n.ws(), n.lit("]")), nil
	}
	if lo > len(prefix) && items == false {
		return frag{}, c.errorf(path, "minItems %d needs more items than prefixItems gives and items is false", lo)
	}
	element := func(i int) (frag, error) {
		s, p := items, path+"/items"
		if i < len(prefix) {
			s, p = prefix[i], fmt.Sprintf("%s/prefixItems/%d", path, i)
		}
		return c.value(s, p)
	}
	// after[k]: k elements written. Positions up to the last distinct one
	// (the prefix, the minimum, or the bound) are unrolled; past that an
	// unbounded array loops on its last state.
	unroll := max(len(prefix), lo, 1)
	if bounded {
		unroll = hi
	}
	open := n.seq(n.lit("["), n.ws())
	end := n.state()
	after := make([]int32, unroll+1)
	for k := range after {
		after[k] = n.state()
	}
	n.epsilon(open.out, after[0])
	for k := 0; k < unroll; k++ {
		e, err := element(k)
		if err != nil {
			return frag{}, err
		}
		if k == 0 {
			n.epsilon(after[0], e.in)
		} else {
			sep := n.seq(n.ws(), n.lit(","), n.ws())
			n.epsilon(after[k], sep.in)
			n.epsilon(sep.out, e.in)
		}
		n.epsilon(e.out, after[k+1])
	}
	if !bounded {
		e, err := element(unroll)
		if err != nil {
			return frag{}, err
		}
		sep := n.seq(n.ws(), n.lit(","), n.ws())
		n.epsilon(after[unroll], sep.in)
		n.epsilon(sep.out, e.in)
		n.epsilon(e.out, after[unroll])
	}
	for k := lo; k <= unroll; k++ {
		var closing frag
		if k == 0 {
			closing = n.lit("]")
		} else {
			closing = n.seq(n.ws(), n.lit("]"))
		}
		n.epsilon(after[k], closing.in)
		n.epsilon(closing.out, end)
	}
	return frag{open.in, end}, nil
}

// str compiles a string schema: a pattern, a few formats, or length
// bounds.
func (c *compiler) str(obj *chat.Object, path string) (frag, error) {
	if p, ok := obj.Get("pattern"); ok {
		expr, isString := p.(string)
		if !isString {
			return frag{}, c.errorf(path+"/pattern", "must be a string")
		}
		for _, k := range []string{"format", "minLength", "maxLength"} {
			if _, ok := obj.Get(k); ok {
				return frag{}, &SchemaError{Path: path, Keyword: k, Reason: "not supported together with pattern; put the bound into the pattern"}
			}
		}
		if c.noCloseTag {
			return frag{}, &SchemaError{Path: path, Keyword: "pattern", Reason: "not supported inside a tool call's JSON parameter"}
		}
		body, err := c.pattern(expr, path)
		if err != nil {
			return frag{}, err
		}
		return c.n.seq(c.n.lit(`"`), body, c.n.lit(`"`)), nil
	}
	if f, ok := obj.Get("format"); ok {
		name, _ := f.(string)
		build, known := formats[name]
		if !known {
			return frag{}, &SchemaError{Path: path, Keyword: "format", Reason: fmt.Sprintf("format %q is not generated (supported: date-time, date, time, uuid); drop it", name)}
		}
		return c.n.seq(c.n.lit(`"`), build(c.n), c.n.lit(`"`)), nil
	}
	lo, _, err := c.count(obj, "minLength", path)
	if err != nil {
		return frag{}, err
	}
	hi, bounded, err := c.count(obj, "maxLength", path)
	if err != nil {
		return frag{}, err
	}
	if !bounded {
		hi = -1
	} else if hi < lo {
		return frag{}, c.errorf(path, "maxLength %d is below minLength %d", hi, lo)
	}
	return c.n.jsonString(stringOptions{minLength: lo, maxLength: hi, noCloseTag: c.noCloseTag}), nil
}

// integer compiles an integer schema, with its bounds if it has any.
func (c *compiler) integer(obj *chat.Object, path string) (frag, error) {
	lo, hi, bounded, err := c.integerBounds(obj, path)
	if err != nil || !bounded {
		return c.n.jsonInteger(), err
	}
	return c.n.integerRange(lo, hi), nil
}

// number compiles a number schema. Fractional bounds are not generated;
// a lower bound of zero (the common "minimum": 0) is, by leaving out the
// minus sign.
func (c *compiler) number(obj *chat.Object, path string) (frag, error) {
	for _, k := range []string{"exclusiveMinimum", "maximum", "exclusiveMaximum"} {
		if _, ok := obj.Get(k); ok {
			return frag{}, &SchemaError{Path: path, Keyword: k, Reason: "bounds on a number are not enforced (only minimum 0 is); use type integer, or drop the bound"}
		}
	}
	if v, ok := obj.Get("minimum"); ok {
		num, _ := v.(json.Number)
		if f, err := strconv.ParseFloat(string(num), 64); err != nil || f != 0 {
			return frag{}, &SchemaError{Path: path, Keyword: "minimum", Reason: "bounds on a number are not enforced (only minimum 0 is); use type integer, or drop the bound"}
		}
		n := c.n
		return n.seq(n.alt(n.lit("0"), n.seq(n.class(byteRange{'1', '9'}), n.digits(0, maxIntDigits-1))),
			n.opt(n.seq(n.lit("."), n.digits(1, maxFractionDigits))),
			n.opt(n.seq(n.class(byteRange{'e', 'e'}, byteRange{'E', 'E'}), n.opt(n.class(byteRange{'+', '+'}, byteRange{'-', '-'})), n.digits(1, maxExponentDigits)))), nil
	}
	return c.n.jsonNumber(), nil
}

func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case *chat.Object:
		return "an object"
	case []any:
		return "an array"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	}
	return "a number"
}
