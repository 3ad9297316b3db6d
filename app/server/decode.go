package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"

	"github.com/suzuran-app/suzuran/engine/chat"
)

// decodeBody reads a JSON request body into v. Unknown fields are ignored
// (clients send many this server has no use for); a body that is not JSON,
// or a field of the wrong type, is a 400 naming it; a body over the limit
// is a 413.
func decodeBody(r *http.Request, v any) error {
	// Read into a buffer of the announced size (limitBody has bounded it):
	// growing one as the bytes come would copy the body several times.
	buf := bytes.NewBuffer(make([]byte, 0, max(0, r.ContentLength)+bytes.MinRead))
	_, err := buf.ReadFrom(r.Body)
	data := buf.Bytes()
	if err != nil {
		var tooLarge *http.MaxBytesError
		var e *apiError
		if errors.As(err, &tooLarge) || errors.As(err, &e) {
			return err
		}
		return badRequest("", "reading the request body: %v", err)
	}
	return decodeJSON(data, v)
}

// decodeJSON is decodeBody's decoding, for the fuzz test.
func decodeJSON(data []byte, v any) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return badRequest("", "the request body is empty: send a JSON object")
	}
	if err := json.Unmarshal(data, v); err != nil {
		var typeErr *json.UnmarshalTypeError
		var syntaxErr *json.SyntaxError
		switch {
		case errors.As(err, &typeErr):
			// Fields of embedded structs come with the struct's name.
			field := strings.TrimPrefix(typeErr.Field, "samplingFields.")
			if field == "" {
				return badRequest("", "the request body must be a JSON object, not %s", typeErr.Value)
			}
			return badRequest(field, "%s: expected %s, got %s", field, jsonTypeName(typeErr.Type.String()), typeErr.Value)
		case errors.As(err, &syntaxErr):
			return badRequest("", "the request body is not valid JSON: %v (at byte %d)", err, syntaxErr.Offset)
		}
		// Errors of the custom decoders (messages, content parts) name
		// their field themselves.
		return badRequest(fieldOf(err.Error()), "%v", err)
	}
	return nil
}

// fieldOf takes the field a decoder error starts with ("messages[2]: …").
func fieldOf(msg string) string {
	if f, _, ok := strings.Cut(msg, ":"); ok && !strings.ContainsAny(f, " \"") {
		return f
	}
	return ""
}

// jsonTypeName names a Go type as JSON does.
func jsonTypeName(goType string) string {
	switch {
	case strings.HasSuffix(goType, "stringOrList"):
		return "a string or a list of strings"
	case strings.HasPrefix(goType, "[]"):
		return "an array"
	case strings.Contains(goType, "int"):
		return "an integer"
	case strings.Contains(goType, "float"):
		return "a number"
	case goType == "string" || goType == "*string":
		return "a string"
	case goType == "bool" || goType == "*bool":
		return "a boolean"
	}
	return "an object"
}

// stringOrList decodes "stop": a string or a list of strings.
type stringOrList []string

func (s *stringOrList) UnmarshalJSON(data []byte) error {
	if string(bytes.TrimSpace(data)) == "null" {
		*s = nil
		return nil
	}
	var one string
	if err := json.Unmarshal(data, &one); err == nil {
		*s = []string{one}
		return nil
	}
	var list []string
	if err := json.Unmarshal(data, &list); err != nil {
		// A type error gets the field's name from the decoder.
		return &json.UnmarshalTypeError{Value: jsonValueKind(data), Type: reflect.TypeFor[stringOrList]()}
	}
	*s = list
	return nil
}

// orderedJSON is a JSON value decoded with its objects' key order kept
// (chat.DecodeJSON), as the chat template prints tools and arguments.
type orderedJSON struct {
	Value any
	Set   bool
}

func (o *orderedJSON) UnmarshalJSON(data []byte) error {
	v, err := chat.DecodeJSON(data)
	if err != nil {
		return err
	}
	o.Value, o.Set = v, true
	return nil
}

// field reads key of an ordered JSON object.
func field(v any, key string) any {
	if obj, ok := v.(*chat.Object); ok {
		x, _ := obj.Get(key)
		return x
	}
	return nil
}

// stringField reads a string member of an ordered JSON object.
func stringField(v any, key string) string {
	s, _ := field(v, key).(string)
	return s
}

// kindOf names a JSON value's type for errors.
func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	case *chat.Object:
		return "an object"
	}
	return "a number"
}

// textOf joins a message content's text: a string, or text parts. Any other
// part (an image, audio, a file) is refused, naming it: this model reads
// text only.
func textOf(content any, param string) (string, error) {
	switch c := content.(type) {
	case nil:
		return "", nil
	case string:
		return c, nil
	case []any:
		var b strings.Builder
		for i, part := range c {
			typ := stringField(part, "type")
			switch typ {
			case "text", "input_text", "output_text":
				text, ok := field(part, "text").(string)
				if !ok {
					return "", badRequest(fmt.Sprintf("%s[%d].text", param, i), "%s[%d].text must be a string", param, i)
				}
				b.WriteString(text)
			case "":
				return "", badRequest(fmt.Sprintf("%s[%d].type", param, i), "%s[%d] has no type: use {\"type\": \"text\", \"text\": …}", param, i)
			default:
				return "", badRequest(fmt.Sprintf("%s[%d].type", param, i), "%s[%d] is a %q part: this model reads text only", param, i, typ)
			}
		}
		return b.String(), nil
	}
	return "", badRequest(param, "%s must be a string or a list of text parts, not %s", param, kindOf(content))
}

// jsonValueKind names the kind of a raw JSON value for a type error.
func jsonValueKind(data []byte) string {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return "nothing"
	}
	switch data[0] {
	case '"':
		return "string"
	case '[':
		return "array"
	case '{':
		return "object"
	case 't', 'f':
		return "bool"
	case 'n':
		return "null"
	}
	return "number"
}
