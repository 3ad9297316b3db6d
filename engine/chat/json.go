package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"

	"github.com/ardanlabs/jinja"
)

// Object is a JSON object that keeps its keys in the order they were
// decoded or set. Values are JSON values as DecodeJSON returns them.
type Object struct {
	keys   []string
	values map[string]any
}

// NewObject returns an empty object.
func NewObject() *Object { return &Object{values: map[string]any{}} }

// Keys returns the keys in order.
func (o *Object) Keys() []string { return o.keys }

// Len is the number of keys.
func (o *Object) Len() int { return len(o.keys) }

// Get returns the value of key.
func (o *Object) Get(key string) (any, bool) {
	v, ok := o.values[key]
	return v, ok
}

// Set adds or replaces key; a new key goes last.
func (o *Object) Set(key string, v any) {
	if o.values == nil {
		o.values = map[string]any{}
	}
	if _, ok := o.values[key]; !ok {
		o.keys = append(o.keys, key)
	}
	o.values[key] = v
}

// MarshalJSON writes the object with its keys in order.
func (o *Object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	if err := writeJSON(&b, o); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// UnmarshalJSON decodes an object keeping its key order.
func (o *Object) UnmarshalJSON(data []byte) error {
	v, err := DecodeJSON(data)
	if err != nil {
		return err
	}
	obj, ok := v.(*Object)
	if !ok {
		return fmt.Errorf("expected a JSON object, got %s", jsonKind(v))
	}
	*o = *obj
	return nil
}

// DecodeJSON decodes one JSON value: objects become *Object (key order
// kept), arrays []any, numbers json.Number (so integers stay integers),
// strings, bools and nil.
func DecodeJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("unexpected data after the JSON value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			obj := NewObject()
			for dec.More() {
				keyTok, err := dec.Token()
				if err != nil {
					return nil, err
				}
				key, _ := keyTok.(string)
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				obj.Set(key, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return obj, nil
		case '[':
			list := []any{}
			for dec.More() {
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				list = append(list, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return list, nil
		}
		return nil, fmt.Errorf("unexpected %q", t)
	default:
		return tok, nil // string, json.Number, bool or nil
	}
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case *Object, map[string]any:
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

// writeJSON encodes a JSON value compactly, keys in order, without Go's
// HTML escaping.
func writeJSON(b *bytes.Buffer, v any) error {
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		if x {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case json.Number:
		b.WriteString(string(x))
	case string:
		writeJSONString(b, x)
	case *Object:
		b.WriteByte('{')
		for i, k := range x.keys {
			if i > 0 {
				b.WriteByte(',')
			}
			writeJSONString(b, k)
			b.WriteByte(':')
			if err := writeJSON(b, x.values[k]); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, item := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeJSON(b, item); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	default:
		data, err := json.Marshal(x)
		if err != nil {
			return err
		}
		b.Write(data)
	}
	return nil
}

func writeJSONString(b *bytes.Buffer, s string) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)       // a string always encodes
	b.Truncate(b.Len() - 1) // Encode's newline
}

// toValue converts a JSON value (as DecodeJSON returns, or plain Go
// values) to the template engine's value. *Object keeps its order; a Go map
// has none, so its keys are sorted.
func toValue(v any) (jinja.Value, error) {
	switch x := v.(type) {
	case nil:
		return jinja.None(), nil
	case bool:
		return jinja.NewBool(x), nil
	case string:
		return jinja.NewString(x), nil
	case int:
		return jinja.NewInt(int64(x)), nil
	case int64:
		return jinja.NewInt(x), nil
	case float64:
		return floatValue(x)
	case json.Number:
		s := string(x)
		if !strings.ContainsAny(s, ".eE") {
			if i, err := x.Int64(); err == nil {
				return jinja.NewInt(i), nil
			}
		}
		f, err := x.Float64()
		if err != nil {
			return jinja.Undefined(), fmt.Errorf("number %s: %w", s, err)
		}
		return floatValue(f)
	case ImagePart, *ImagePart:
		d := jinja.NewDict()
		d.AsDict().Set("type", jinja.NewString("image"))
		return d, nil
	case *Object:
		d := jinja.NewDict()
		for _, k := range x.keys {
			item, err := toValue(x.values[k])
			if err != nil {
				return jinja.Undefined(), err
			}
			d.AsDict().Set(k, item)
		}
		return d, nil
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		d := jinja.NewDict()
		for _, k := range keys {
			item, err := toValue(x[k])
			if err != nil {
				return jinja.Undefined(), err
			}
			d.AsDict().Set(k, item)
		}
		return d, nil
	case []any:
		items := make([]jinja.Value, len(x))
		for i, item := range x {
			val, err := toValue(item)
			if err != nil {
				return jinja.Undefined(), err
			}
			items[i] = val
		}
		return jinja.NewList(items), nil
	case jinja.Value:
		return x, nil
	}
	return jinja.Undefined(), fmt.Errorf("value of type %T cannot be passed to the chat template", v)
}

func floatValue(f float64) (jinja.Value, error) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return jinja.Undefined(), fmt.Errorf("number %v cannot be rendered as JSON", f)
	}
	return jinja.NewFloat(f), nil
}
