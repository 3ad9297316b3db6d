package server

import (
	"encoding/json"
	"fmt"

	"github.com/suzuran-app/suzuran/app/server/grammar"
	"github.com/suzuran-app/suzuran/engine"
)

// This build constrains sampling with app/server/grammar: the spec is
// compiled (or found in the cache of the loaded model's grammars) into an
// automaton whose token masks the engine applies before each token.
func init() { constrain = constrainWithGrammar }

// constrainWithGrammar sets req's constraint to spec. Everything a
// compilation can refuse comes from the request (an unsupported schema
// keyword, a function name the tool-call format cannot carry), so it is a
// 400 naming spec.Param.
func constrainWithGrammar(e *engine.Engine, spec constraintSpec, req *engine.TurnRequest) error {
	grammars, err := grammar.Shared(e)
	if err != nil {
		return fmt.Errorf("preparing constrained sampling for this model: %w", err)
	}
	// One forced call: the formats' parallel calls are left to unforced
	// tool use.
	opts := grammar.Options{Thinking: spec.Thinking}
	var g *grammar.Grammar
	switch spec.Kind {
	case constraintJSONObject:
		g, err = grammars.JSONObject(opts)
	case constraintJSONSchema:
		var schema []byte
		if schema, err = json.Marshal(spec.Schema); err == nil {
			g, err = grammars.JSONSchema(schema, opts)
		}
	case constraintToolCall:
		var fns []grammar.Function
		if fns, err = grammar.Functions(spec.Tools); err == nil {
			g, err = grammars.ToolCall(fns, opts)
		}
	default:
		return fmt.Errorf("constraint kind %q has no grammar", spec.Kind)
	}
	if err != nil {
		return badRequest(spec.Param, "%s: %v", spec.Param, err)
	}
	// The tokens the engine lets the request generate (its budget), so
	// that the constrained text is closed validly before they run out.
	budget := e.ContextTokens() - len(req.Prompt.IDs) + 1
	if req.MaxTokens > 0 {
		budget = min(budget, req.MaxTokens)
	}
	if !g.FitsIn(budget) {
		param := "max_tokens"
		if spec.Param == "text.format" {
			param = "max_output_tokens" // the Responses API's name
		}
		if spec.Kind == constraintToolCall {
			return badRequest(param, "%s %d is too few for the shortest call of the forced tool (%d bytes): raise %s", param, budget, g.ShortestBytes(), param)
		}
		return badRequest(param, "%s %d is too few for the shortest answer %s allows (%d bytes): raise %s", param, budget, spec.Param, g.ShortestBytes(), param)
	}
	req.Constraint = g.NewConstraint().WithBudget(budget)
	return nil
}
