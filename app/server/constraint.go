package server

import (
	"github.com/suzuran-app/suzuran/engine"
)

// Constrained sampling: response_format json_object and json_schema, and
// tool_choice "required" or a named function, force the output into a
// shape by masking the logits each step. The compiler of those masks lives
// in its own package; this file is the one place the server calls it.

// Constraint kinds.
const (
	constraintJSONObject = "json_object" // any JSON object
	constraintJSONSchema = "json_schema" // JSON matching Schema
	constraintToolCall   = "tool_call"   // a call of one of Tools
)

// constraintSpec is what a request asks its output to be.
type constraintSpec struct {
	Kind string
	// Schema is the JSON schema (ordered JSON values, chat.DecodeJSON) for
	// json_schema; Name is its name and Strict the client's strict flag.
	Schema any
	Name   string
	Strict bool
	// Tools are the function tools ({"type":"function","function":{…}}) one
	// of which the output must call, for tool_call.
	Tools []any
	// Param names the request field that asked, for errors.
	Param string
	// Thinking: the prompt ends inside an open <think> block, so the
	// constrained text follows the model's reasoning.
	Thinking bool
}

// constrain compiles spec for the engine's tokenizer and sets it on req;
// nil while this build has no constrained sampling.
var constrain func(e *engine.Engine, spec constraintSpec, req *engine.TurnRequest) error

// applyConstraint constrains req to spec, or says why it cannot: an
// unsupported schema keyword is the client's error (400 naming it).
func applyConstraint(e *engine.Engine, spec constraintSpec, req *engine.TurnRequest) error {
	if constrain == nil {
		return badRequest(spec.Param, "%s: this build of the server has no constrained sampling, so it cannot guarantee %s output; leave %s out", spec.Param, spec.Kind, spec.Param)
	}
	return constrain(e, spec, req)
}
