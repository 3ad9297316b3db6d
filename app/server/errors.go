package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	pathpkg "path"
	"regexp"
	"strconv"
	"strings"

	"github.com/suzuran-app/suzuran/app/modelhost"
	"github.com/suzuran-app/suzuran/engine"
)

// apiError is an error the client sees: an HTTP status and a message, with
// the OpenAI fields (type, param, code). Anthropic's shape uses the status
// to pick its type.
type apiError struct {
	Status  int
	Type    string // OpenAI's error.type
	Message string
	Param   string // the request field at fault, when one is
	Code    string
	cause   error // what the message tells of, for errors.Is
}

func (e *apiError) Error() string { return e.Message }

func (e *apiError) Unwrap() error { return e.cause }

// contextExceeded is the 400 of a prompt too long for the context (err
// wraps engine.ErrPromptTooLong); what names what to shorten.
func contextExceeded(err error, param, what string) *apiError {
	return &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: param, Code: "context_length_exceeded",
		Message: fmt.Sprintf("%v; shorten %s or start the server with a larger context (--ctx)", err, what), cause: err}
}

// badRequest is a 400 naming the field at fault.
func badRequest(param, format string, args ...any) *apiError {
	return &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: param, Message: fmt.Sprintf(format, args...)}
}

func notFound(format string, args ...any) *apiError {
	return &apiError{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "not_found", Message: fmt.Sprintf(format, args...)}
}

// errFlavor is the API whose error shape a response uses.
type errFlavor int

const (
	openAIErrors errFlavor = iota
	anthropicErrors
)

// flavorOf picks the error shape by route: the Anthropic SDKs read
// Anthropic's shape, everything else OpenAI's.
func flavorOf(r *http.Request) errFlavor {
	if r.URL.Path == "/v1/messages" || r.URL.Path == "/v1/messages/count_tokens" {
		return anthropicErrors
	}
	return openAIErrors
}

// anthropicType is Anthropic's error type for a status.
func anthropicType(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "invalid_request_error"
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case http.StatusServiceUnavailable:
		return "overloaded_error"
	}
	return "api_error"
}

// diskPath finds what looks like a path of the server's disk in a message:
// two or more segments after a slash (a segment may hold spaces, as in
// "Application Support"), or one after "~".
var diskPath = regexp.MustCompile(`~?(?:/[^/\s"'<>|:;,()\[\]]+(?: [^/\s"'<>|:;,()\[\]]+)*){2,}/?`)

// withoutPaths rewrites the paths of the server's disk in an error message
// to their last element ("chat template chat_template.jinja: …"): a client
// learns what is wrong, not where the server keeps its files (the home
// folder's name, the cache's layout). The API's own routes (/v1/…, /api/…)
// and URLs stay as they are.
func withoutPaths(msg string) string {
	if !strings.Contains(msg, "/") {
		return msg
	}
	var b strings.Builder
	last := 0
	for _, m := range diskPath.FindAllStringIndex(msg, -1) {
		p := msg[m[0]:m[1]]
		if m[0] > 0 && strings.ContainsRune(":/.", rune(msg[m[0]-1])) ||
			strings.HasPrefix(p, "/v1/") || strings.HasPrefix(p, "/api/") {
			continue
		}
		b.WriteString(msg[last:m[0]])
		b.WriteString(pathpkg.Base(strings.TrimPrefix(p, "~")))
		last = m[1]
	}
	b.WriteString(msg[last:])
	return b.String()
}

// errorBody is the JSON of e in the flavor's shape.
func errorBody(flavor errFlavor, e *apiError) any {
	e = &apiError{Status: e.Status, Type: e.Type, Message: withoutPaths(e.Message), Param: e.Param, Code: e.Code}
	if flavor == anthropicErrors {
		return anthropicErrorBody{Type: "error", Error: anthropicError{Type: anthropicType(e.Status), Message: e.Message}}
	}
	return openAIErrorBody{Error: openAIError{Message: e.Message, Type: e.Type, Param: nullString(e.Param), Code: nullString(e.Code)}}
}

// writeError answers with err in the route's error shape. Errors that are
// not apiErrors are the server's fault: 500, logged.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	e := s.toAPIError(r, err)
	var long *promptTooLong
	if flavorOf(r) == anthropicErrors && errors.As(err, &long) {
		// Anthropic's words, which Claude Code parses to compact the
		// conversation; the count is what is known (at least the context).
		e = &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: "messages", Code: "context_length_exceeded",
			Message: fmt.Sprintf("prompt is too long: %d tokens > %d maximum", long.tokens, long.context-1), cause: err}
	}
	if e.Status == http.StatusTooManyRequests || e.Status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds))
	}
	if e.Status == http.StatusUnauthorized {
		// A wrong key stays wrong: the SDKs (Anthropic's, OpenAI's) and
		// Claude Code retry a 401 unless told not to.
		w.Header().Set("X-Should-Retry", "false")
	}
	if e.Status == http.StatusUnauthorized && !isAPIPath(r.URL.Path) {
		// The UI in a browser: the browser asks for the key as a password.
		w.Header().Set("WWW-Authenticate", `Basic realm="Suzuran", charset="UTF-8"`)
	}
	writeJSON(w, e.Status, errorBody(flavorOf(r), e))
}

// toAPIError maps engine and decoding errors to statuses.
func (s *Server) toAPIError(r *http.Request, err error) *apiError {
	var e *apiError
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &e):
		return e
	case errors.As(err, &tooLarge):
		return &apiError{Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error", Code: "request_too_large",
			Message: fmt.Sprintf("the request body is larger than this server's limit of %d bytes", tooLarge.Limit)}
	case errors.Is(err, engine.ErrBusy):
		return &apiError{Status: http.StatusTooManyRequests, Type: "rate_limit_error", Code: "rate_limit_exceeded",
			Message: "the model is busy with other requests and its queue is full; retry in a moment"}
	case errors.Is(err, modelhost.ErrLoading):
		st := s.cfg.Models.Status()
		return &apiError{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "model_loading",
			Message: fmt.Sprintf("the model %s is loading (%.0f%%); retry in a moment", st.Name, st.Progress*100)}
	case errors.Is(err, engine.ErrClosed):
		return &apiError{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "model_unloaded",
			Message: "the model was unloaded while the request waited; retry"}
	case errors.Is(err, engine.ErrPromptTooLong):
		return &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: "messages", Code: "context_length_exceeded",
			Message: err.Error() + "; shorten the conversation or start the server with a larger context (--ctx)"}
	}
	s.log.Error().Err(err).Str("path", r.URL.Path).Msg("request failed")
	return &apiError{Status: http.StatusInternalServerError, Type: "server_error", Message: "internal error: " + err.Error()}
}

// writeJSON answers with v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		body = []byte(`{"error":{"message":"internal error: encoding the response failed","type":"server_error","param":null,"code":null}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)+1))
	w.WriteHeader(status)
	w.Write(append(body, '\n'))
}

// current asks Models for the engine. Any failure but loading (a model
// that failed to load, or was unloaded) is a 503 saying why.
func (s *Server) current(r *http.Request) (*engine.Engine, string, error) {
	e, name, err := s.cfg.Models.Current(r.Context())
	if err != nil && !errors.Is(err, modelhost.ErrLoading) {
		return nil, "", &apiError{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "model_unavailable",
			Message: "no model to answer with: " + err.Error()}
	}
	return e, name, err
}
